package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TowerSession is a session payload the cloud sealed for a tower (DESIGN §4.8).
type TowerSession struct {
	ID              uuid.UUID
	TowerID         string
	OrganizationID  int64
	ClientID        string
	UserID          *string
	Claims          []string
	Permission      int32
	FirmwareVersion *string
	IssuedAt        time.Time
	ExpiresAt       time.Time
}

// RecordTowerSession keeps the record of an issued session.
func (s *Store) RecordTowerSession(ctx context.Context, t TowerSession) error {
	return s.exec(ctx, "record tower session", `
		INSERT INTO tower_sessions (id, tower_id, organization_id, client_id, user_id, claims, permission, firmware_version, issued_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		t.ID, strings.ToLower(t.TowerID), t.OrganizationID, t.ClientID, t.UserID, t.Claims, t.Permission, t.FirmwareVersion, t.IssuedAt, t.ExpiresAt)
}

// SetClientSDKClaims sets the session claims a client may ask for; nil restores the
// service's default. ErrNotFound for an unknown client.
func (s *Store) SetClientSDKClaims(ctx context.Context, clientID string, claims []string) error {
	return s.execOne(ctx, "set client sdk claims", `UPDATE api_clients SET sdk_claims = $2 WHERE client_id = $1`, clientID, claims)
}

// ClientSDKClaims returns the claims a client may ask for (nil when it uses the default)
// and whether it is disabled; ErrNotFound for an unknown client.
func (s *Store) ClientSDKClaims(ctx context.Context, clientID string) (claims []string, disabled bool, err error) {
	err = s.db.QueryRow(ctx, `SELECT sdk_claims, disabled_at IS NOT NULL FROM api_clients WHERE client_id = $1`, clientID).
		Scan(&claims, &disabled)
	if err != nil {
		return nil, false, fmt.Errorf("get client sdk claims: %w", translate(err))
	}
	return claims, disabled, nil
}

// EventsReset is a phone's report that a tower's event log was reset.
type EventsReset struct {
	ID             int64
	TowerID        string
	OrganizationID int64
	ClientID       string
	UserID         *string
	Reason         string
	Repeats        int
	CreatedAt      time.Time
	LastAt         time.Time
}

// ResetRepeatWindow is how long a report identical to the last one (same tower, caller and
// reason) counts as a repeat of it: the SDK retries on network errors, and a retried report
// is not a second reset.
const ResetRepeatWindow = time.Minute

// RecordEventsReset records a reset report; a repeat within ResetRepeatWindow only counts.
func (s *Store) RecordEventsReset(ctx context.Context, r EventsReset) (EventsReset, error) {
	r.TowerID = strings.ToLower(r.TowerID)
	err := s.db.QueryRow(ctx, `
		WITH repeat AS (
		    UPDATE tower_event_resets SET repeats = repeats + 1, last_at = now()
		    WHERE id = (SELECT id FROM tower_event_resets
		                WHERE tower_id = $1 AND client_id = $3 AND user_id IS NOT DISTINCT FROM $4 AND reason = $5
		                  AND last_at > now() - make_interval(secs => $6)
		                ORDER BY id DESC LIMIT 1)
		    RETURNING id, repeats, created_at, last_at
		), fresh AS (
		    INSERT INTO tower_event_resets (tower_id, organization_id, client_id, user_id, reason)
		    SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM repeat)
		    RETURNING id, repeats, created_at, last_at
		)
		SELECT * FROM repeat UNION ALL SELECT * FROM fresh`,
		r.TowerID, r.OrganizationID, r.ClientID, r.UserID, r.Reason, ResetRepeatWindow.Seconds()).
		Scan(&r.ID, &r.Repeats, &r.CreatedAt, &r.LastAt)
	if err != nil {
		return EventsReset{}, fmt.Errorf("record events reset: %w", translate(err))
	}
	return r, nil
}

// EventsResets lists reset reports, newest first; towerID "" lists every tower's.
func (s *Store) EventsResets(ctx context.Context, towerID string, limit int) ([]EventsReset, error) {
	return listRows(ctx, s, "events resets", func(r pgx.CollectableRow) (EventsReset, error) {
		var e EventsReset
		return e, r.Scan(&e.ID, &e.TowerID, &e.OrganizationID, &e.ClientID, &e.UserID, &e.Reason, &e.Repeats, &e.CreatedAt, &e.LastAt)
	}, `
		SELECT id, tower_id, organization_id, client_id, user_id, reason, repeats, created_at, last_at
		FROM tower_event_resets WHERE ($1 = '' OR tower_id = $1) ORDER BY id DESC LIMIT $2`, strings.ToLower(towerID), limit)
}

// TowerLocation is what the SDK's tower object shows of a tower's location.
type TowerLocation struct {
	Name        string
	Description *string
	City        string
	Zip         string
}

// TowerLocationOf returns the location a tower stands at.
func (s *Store) TowerLocationOf(ctx context.Context, towerID string) (TowerLocation, error) {
	var l TowerLocation
	err := s.db.QueryRow(ctx, `
		SELECT l.name, l.description, l.city, l.zip FROM towers t JOIN locations l ON l.id = t.location_id WHERE t.id = $1`,
		strings.ToLower(towerID)).Scan(&l.Name, &l.Description, &l.City, &l.Zip)
	if err != nil {
		return TowerLocation{}, fmt.Errorf("get tower location: %w", translate(err))
	}
	return l, nil
}
