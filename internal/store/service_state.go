package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// ServiceChange reports what an operator's service-state change ended.
type ServiceChange struct {
	From, To             LockerStatus
	CancelledReservation *uuid.UUID
	// CancelledReservationExpiresAt is the cancelled reservation's expiry (its workflow's input).
	CancelledReservationExpiresAt time.Time
	RevokedTokens                 []uuid.UUID
}

// SetOutOfService takes a tower locker out of service (operators only). The possession
// ends, a reservation is cancelled, active tokens are revoked and the generation is bumped,
// so no outstanding token opens it; the tower's command log gets the new generation floor
// and the service state in the same transaction. An occupied locker needs force, and keeps its possession
// (the item is inside) for when it returns to service. Doing it twice changes nothing.
// The change records locker.out_of_service (and reservation.cancelled for a cancelled
// reservation) in the same transaction.
func (s *Store) SetOutOfService(ctx context.Context, towerID string, lockerID int64, reason string, force bool) (ServiceChange, error) {
	var ch ServiceChange
	err := s.atomically(ctx, 0, func(tx *Store) error {
		k, err := tx.lockLocker(ctx, 0, towerID, lockerID)
		if err != nil {
			return err
		}
		action := lockerrules.TakeOutOfService
		if force {
			action = lockerrules.ForceOutOfService
		}
		d, err := lockerrules.Decide(k.rules(""), action)
		if err != nil {
			return err
		}
		ch = ServiceChange{From: d.From, To: d.To}
		if d.Unchanged() {
			return nil
		}
		var cancelled *Reservation
		if d.EndsReservation {
			ch.CancelledReservation = k.ReservationID
			if k.HoldExpiresAt != nil {
				ch.CancelledReservationExpiresAt = *k.HoldExpiresAt
			}
			var r Reservation
			err := tx.db.QueryRow(ctx, `
				UPDATE reservations SET status = 'cancelled', ended_at = now() WHERE id = $1 AND status = 'active'
				RETURNING id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, created_at, expires_at, ended_at`,
				*k.ReservationID).Scan(&r.ID, &r.OrganizationID, &r.ClientID, &r.LockerID, &r.TowerID, &r.Status,
				&r.DurationSeconds, &r.CreatedAt, &r.ExpiresAt, &r.EndedAt)
			switch {
			case err == nil:
				cancelled = &r
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("cancel reservation: %w", translate(err))
			}
		}
		keep := d.KeepsPossession
		var gen int32
		var org int64
		locker, subOrg, err := scanEventLocker(tx.db.QueryRow(ctx, `
			UPDATE lockers k SET status = $4, generation = k.generation + 1, kept_possession = $2, service_reason = $3,
			       possessor_client_id = CASE WHEN $2 THEN k.possessor_client_id END,
			       possession_since = CASE WHEN $2 THEN k.possession_since END,
			       hold_expires_at = NULL, reservation_id = NULL, updated_at = now()
			FROM locker_types lt, locations l
			WHERE k.id = $1 AND lt.id = k.locker_type_id AND l.id = k.location_id
			RETURNING `+eventLockerColumns+`, k.generation, k.organization_id`, k.ID, keep, reason, d.To), &gen, &org)
		if err != nil {
			return fmt.Errorf("set out of service: %w", translate(err))
		}
		if ch.RevokedTokens, err = tx.revokeActiveTokens(ctx, k.ID); err != nil {
			return err
		}
		// The tower learns it with the next sync through any phone, even before it sees a token
		// of the new generation: every outstanding token is refused from then on.
		if err := tx.appendCommands(ctx, k.TowerID, []newCommand{floorCommand(k.ID, gen), serviceCommand(k.ID, true)}); err != nil {
			return err
		}
		if cancelled != nil {
			if _, err := tx.RecordEvent(ctx, Event{OrgID: cancelled.OrganizationID, SubOrgID: subOrg,
				Type: EventTypeReservationCancelled, Data: eventReservation(*cancelled)}); err != nil {
				return err
			}
		}
		_, err = tx.RecordEvent(ctx, Event{OrgID: org, SubOrgID: subOrg, Type: EventTypeLockerOutOfService, Data: locker})
		return err
	})
	if err != nil {
		return ServiceChange{}, err
	}
	return ch, nil
}

// SetInService returns an out-of-service locker to service: occupied if it kept a
// possession, else available. The change records locker.in_service in the same transaction.
func (s *Store) SetInService(ctx context.Context, towerID string, lockerID int64) (ServiceChange, error) {
	var ch ServiceChange
	err := s.atomically(ctx, 0, func(tx *Store) error {
		k, err := tx.lockLocker(ctx, 0, towerID, lockerID)
		if err != nil {
			return err
		}
		d, err := lockerrules.Decide(k.rules(""), lockerrules.ReturnToService)
		if err != nil {
			return err
		}
		if d.Unchanged() {
			ch = ServiceChange{From: d.From, To: d.To}
			return nil
		}
		to := d.To
		var org int64
		locker, subOrg, err := scanEventLocker(tx.db.QueryRow(ctx, `
			UPDATE lockers k SET status = $2, kept_possession = false, service_reason = NULL, updated_at = now()
			FROM locker_types lt, locations l
			WHERE k.id = $1 AND lt.id = k.locker_type_id AND l.id = k.location_id
			RETURNING `+eventLockerColumns+`, k.organization_id`, k.ID, to), &org)
		if err != nil {
			return fmt.Errorf("set in service: %w", translate(err))
		}
		if err := tx.appendCommands(ctx, k.TowerID, []newCommand{serviceCommand(k.ID, false)}); err != nil {
			return err
		}
		ch = ServiceChange{From: k.Status, To: to}
		_, err = tx.RecordEvent(ctx, Event{OrgID: org, SubOrgID: subOrg, Type: EventTypeLockerInService, Data: locker})
		return err
	})
	if err != nil {
		return ServiceChange{}, err
	}
	return ch, nil
}

// ActiveToken is an unexpired, unused token of a possession.
type ActiveToken struct {
	ID        uuid.UUID
	Type      string
	ExpiresAt time.Time
}

// AssignedLocker is a locker in a client's possession with the possession's details.
type AssignedLocker struct {
	Locker        Locker
	Since         *time.Time
	ReservationID *uuid.UUID
	ActiveTokens  []ActiveToken
}

// AssignedLockers lists the lockers the client possesses now: reserved by it, rented,
// occupied, declined, and out of service with its item kept inside.
func (s *Store) AssignedLockers(ctx context.Context, orgID int64, clientID string) ([]AssignedLocker, error) {
	lockers, err := collectLockers(s.db.Query(ctx, lockerSelect+`
		WHERE k.organization_id = $1 AND k.possessor_client_id = $2
		  AND (locker_status(k.status, k.hold_expires_at) IN (`+possessedSQL+`)
		       OR (k.status = `+outOfServiceSQL+` AND k.kept_possession))
		ORDER BY k.possession_since, k.id`, orgID, clientID))
	if err != nil {
		return nil, err
	}
	out := make([]AssignedLocker, 0, len(lockers))
	for _, k := range lockers {
		a := AssignedLocker{Locker: k, Since: k.PossessionSince, ReservationID: k.ReservationID, ActiveTokens: []ActiveToken{}}
		rows, err := s.db.Query(ctx, `
			SELECT id, type, expires_at FROM locker_tokens
			WHERE locker_id = $1 AND generation = $2 AND status = 'active' AND expires_at > now()
			ORDER BY expires_at, id`, k.ID, k.Generation)
		if err != nil {
			return nil, fmt.Errorf("list active tokens: %w", translate(err))
		}
		for rows.Next() {
			var t ActiveToken
			if err := rows.Scan(&t.ID, &t.Type, &t.ExpiresAt); err != nil {
				rows.Close()
				return nil, fmt.Errorf("scan active token: %w", err)
			}
			a.ActiveTokens = append(a.ActiveTokens, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("list active tokens: %w", translate(err))
		}
		out = append(out, a)
	}
	return out, nil
}

// LockerIDByName finds a tower locker by its door label (operators address lockers so).
func (s *Store) LockerIDByName(ctx context.Context, towerID, name string) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT id FROM lockers WHERE tower_id = $1 AND name = $2`, strings.ToLower(towerID), name).Scan(&id); err != nil {
		return 0, fmt.Errorf("find locker: %w", translate(err))
	}
	return id, nil
}
