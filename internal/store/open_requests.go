package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// OpenRequest is a locker-open link (Harbor's deep-link flow): a token wrapped for a link.
type OpenRequest struct {
	ID         uuid.UUID
	OrgID      int64
	ClientID   string
	Type       string
	TokenID    uuid.UUID
	LockerID   int64
	TowerID    string
	LocationID int64
	ReturnURL  string
	ClientInfo *string
	Payload    json.RawMessage
	// LinkTokenSealed is the link's token sealed with the master key; the plaintext is
	// never stored.
	LinkTokenSealed []byte
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

// CreateOpenRequest records a locker-open link.
func (s *Store) CreateOpenRequest(ctx context.Context, r OpenRequest) (OpenRequest, error) {
	var payload any
	if len(r.Payload) > 0 {
		payload = r.Payload
	}
	err := s.db.QueryRow(ctx, `
		INSERT INTO locker_open_requests (id, organization_id, client_id, type, token_id, locker_id, tower_id, location_id,
		                                  return_url, client_info, payload, link_token_sealed, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		RETURNING created_at`,
		r.ID, r.OrgID, r.ClientID, r.Type, r.TokenID, r.LockerID, r.TowerID, r.LocationID, r.ReturnURL, r.ClientInfo,
		payload, r.LinkTokenSealed, r.ExpiresAt).Scan(&r.CreatedAt)
	if err != nil {
		return OpenRequest{}, fmt.Errorf("create open request: %w", translate(err))
	}
	return r, nil
}

// GetOpenRequest returns a locker-open link made by the client: another client of the same
// organization is told it does not exist.
func (s *Store) GetOpenRequest(ctx context.Context, orgID int64, clientID string, id uuid.UUID) (OpenRequest, error) {
	var r OpenRequest
	var payload []byte
	err := s.db.QueryRow(ctx, `
		SELECT id, organization_id, client_id, type, token_id, locker_id, tower_id, location_id, return_url, client_info,
		       payload, link_token_sealed, created_at, expires_at
		FROM locker_open_requests WHERE id = $1 AND organization_id = $2 AND client_id = $3`, id, orgID, clientID).
		Scan(&r.ID, &r.OrgID, &r.ClientID, &r.Type, &r.TokenID, &r.LockerID, &r.TowerID, &r.LocationID, &r.ReturnURL,
			&r.ClientInfo, &payload, &r.LinkTokenSealed, &r.CreatedAt, &r.ExpiresAt)
	if err != nil {
		return OpenRequest{}, fmt.Errorf("get open request: %w", translate(err))
	}
	r.Payload = payload
	return r, nil
}

// LockerRef names a tower locker.
type LockerRef struct {
	ID      int64
	TowerID string
}

// AvailableLockers lists candidate lockers of a type at a location that are available now,
// best first: low lockers only when required, else the others before the low ones.
func (s *Store) AvailableLockers(ctx context.Context, orgID, locationID, typeID int64, requireLow bool, limit int) ([]LockerRef, error) {
	rows, err := s.db.Query(ctx, `
		SELECT k.id, k.tower_id FROM lockers k
		WHERE k.organization_id = $1 AND k.location_id = $2 AND k.locker_type_id = $3
		  AND locker_status(k.status, k.hold_expires_at) = `+availableSQL+` AND (NOT $4 OR k.is_low_locker)
		ORDER BY k.is_low_locker, k.id
		LIMIT $5`, orgID, locationID, typeID, requireLow, limit)
	if err != nil {
		return nil, fmt.Errorf("find available lockers: %w", translate(err))
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LockerRef, error) {
		var l LockerRef
		return l, r.Scan(&l.ID, &l.TowerID)
	})
	if err != nil {
		return nil, fmt.Errorf("find available lockers: %w", translate(err))
	}
	return refs, nil
}

// LockerTypeExists reports whether the organization has the locker type.
func (s *Store) LockerTypeExists(ctx context.Context, orgID, typeID int64) (bool, error) {
	var ok bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM locker_types WHERE id = $1 AND organization_id = $2)`, typeID, orgID).Scan(&ok); err != nil {
		return false, fmt.Errorf("check locker type: %w", translate(err))
	}
	return ok, nil
}

// LockerByID returns a tower locker of the organization by id alone.
func (s *Store) LockerByID(ctx context.Context, orgID, lockerID int64) (Locker, error) {
	k, err := scanLocker(s.db.QueryRow(ctx, lockerSelect+` WHERE k.id = $1 AND k.organization_id = $2`, lockerID, orgID))
	if err != nil {
		return Locker{}, fmt.Errorf("get locker: %w", translate(err))
	}
	return k, nil
}
