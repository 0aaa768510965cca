package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What a restored database re-arms (lockernet-admin restore, reconcile; docs/runbook.md): every
// reservation, locker token and access code whose row says active, whatever its expiry, so
// each gets its workflow again (with its original expiry) when the restored Temporal state
// lacks it. Ordered by id, so a long list is read the same way each time.

// ActiveReservations lists the reservations whose row is active.
func (s *Store) ActiveReservations(ctx context.Context) ([]Reservation, error) {
	return listRows(ctx, s, "active reservations", func(row pgx.CollectableRow) (Reservation, error) {
		var r Reservation
		err := row.Scan(&r.ID, &r.OrganizationID, &r.ClientID, &r.LockerID, &r.TowerID, &r.LocationID, &r.Status,
			&r.DurationSeconds, &r.CreatedAt, &r.ExpiresAt, &r.EndedAt)
		return r, err
	}, `
		SELECT r.id, r.organization_id, r.client_id, r.locker_id, r.tower_id, k.location_id, r.status,
		       r.duration_seconds, r.created_at, r.expires_at, r.ended_at
		FROM reservations r JOIN lockers k ON k.id = r.locker_id
		WHERE r.status = 'active' ORDER BY r.id`)
}

// ActiveTokens lists the locker tokens whose row is active.
func (s *Store) ActiveTokens(ctx context.Context) ([]LockerToken, error) {
	return listRows(ctx, s, "active tokens", func(row pgx.CollectableRow) (LockerToken, error) {
		var t LockerToken
		err := row.Scan(&t.ID, &t.OrgID, &t.ClientID, &t.LockerID, &t.TowerID, &t.LocationID, &t.Type, &t.Generation,
			&t.ClientInfo, &t.Status, &t.CreatedAt, &t.ExpiresAt, &t.UsedAt)
		return t, err
	}, `
		SELECT t.id, t.organization_id, t.client_id, t.locker_id, t.tower_id, k.location_id, t.type, t.generation,
		       t.client_info, t.status, t.created_at, t.expires_at, t.used_at
		FROM locker_tokens t JOIN lockers k ON k.id = t.locker_id
		WHERE t.status = 'active' ORDER BY t.id`)
}

// ActiveAccessCodes lists the access codes whose row is active (a lapsed one shows expired,
// as everywhere).
func (s *Store) ActiveAccessCodes(ctx context.Context) ([]AccessCode, error) {
	return listRows(ctx, s, "active access codes", func(row pgx.CollectableRow) (AccessCode, error) { return scanAccessCode(row) },
		`SELECT `+accessCodeColumns+` FROM access_codes c WHERE c.status = 'active' ORDER BY c.id`)
}

// PendingDelivery is a webhook delivery still pending: what its workflow is started with.
type PendingDelivery struct {
	ID         uuid.UUID
	Round      int
	OrgID      int64
	EndpointID uuid.UUID
	EventType  string
}

// PendingWebhookDeliveries lists the webhook deliveries still pending.
func (s *Store) PendingWebhookDeliveries(ctx context.Context) ([]PendingDelivery, error) {
	return listRows(ctx, s, "pending webhook deliveries", func(row pgx.CollectableRow) (PendingDelivery, error) {
		var d PendingDelivery
		return d, row.Scan(&d.ID, &d.Round, &d.OrgID, &d.EndpointID, &d.EventType)
	}, `
		SELECT d.id, d.round, d.organization_id, d.endpoint_id, ev.type
		FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id AND ev.created_at = d.created_at
		WHERE d.status = 'pending' ORDER BY d.id`)
}

// OpenPickupWindows lists the pickup windows still open (their workflow has a time ahead).
func (s *Store) OpenPickupWindows(ctx context.Context) ([]PickupWindow, error) {
	return listRows(ctx, s, "open pickup windows", func(row pgx.CollectableRow) (PickupWindow, error) { return scanWindow(row) },
		`SELECT `+windowColumns+windowFrom+` WHERE w.closed_at IS NULL AND w.status = 'open' ORDER BY w.id`)
}
