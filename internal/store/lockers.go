package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// lockerSelect reads lockers with their current status: a lapsed hold reads as available.
const lockerSelect = `
	SELECT k.id, k.name, k.is_low_locker, k.tower_id, k.location_id,
	       locker_status(k.status, k.hold_expires_at), k.locker_type_id, lt.name, lt.description,
	       k.access_mode, k.generation, k.possessor_client_id, k.possession_since, k.reservation_id,
	       k.hold_expires_at
	FROM lockers k JOIN locker_types lt ON lt.id = k.locker_type_id`

func scanLocker(row pgx.Row) (Locker, error) {
	var k Locker
	err := row.Scan(&k.ID, &k.Name, &k.IsLowLocker, &k.TowerID, &k.LocationID, &k.Status, &k.TypeID,
		&k.TypeName, &k.TypeDescription, &k.AccessMode, &k.Generation, &k.PossessorClientID,
		&k.PossessionSince, &k.ReservationID, &k.HoldExpiresAt)
	if err != nil {
		return Locker{}, err
	}
	if k.Status == StatusAvailable {
		// A lapsed hold is not a possession any more, whatever the row still says.
		k.PossessorClientID, k.PossessionSince, k.ReservationID, k.HoldExpiresAt = nil, nil, nil, nil
	}
	return k, nil
}

func collectLockers(rows pgx.Rows, err error) ([]Locker, error) {
	return scanAll(rows, err, "query lockers", "locker", []Locker{}, scanLocker)
}

// LocationLockers lists a location's tower lockers; ErrNotFound if the organization does not
// own a tower location with that id.
func (s *Store) LocationLockers(ctx context.Context, orgID, locationID int64) ([]Locker, error) {
	ok, err := s.LocationExists(ctx, orgID, locationID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("list location lockers: %w", ErrNotFound)
	}
	return collectLockers(s.db.Query(ctx, lockerSelect+`
		WHERE k.location_id = $1 AND k.organization_id = $2
		ORDER BY k.tower_id, k.id`, locationID, orgID))
}

// TowerLockers lists a tower's lockers; ErrNotFound if the organization has no such tower.
func (s *Store) TowerLockers(ctx context.Context, orgID int64, towerID string) ([]Locker, error) {
	if _, err := s.Tower(ctx, orgID, towerID); err != nil {
		return nil, err
	}
	return collectLockers(s.db.Query(ctx, lockerSelect+`
		WHERE k.tower_id = $1 AND k.organization_id = $2
		ORDER BY k.id`, strings.ToLower(towerID), orgID))
}

// Locker returns one locker of a tower of the organization, or ErrNotFound.
func (s *Store) Locker(ctx context.Context, orgID int64, towerID string, lockerID int64) (Locker, error) {
	k, err := scanLocker(s.db.QueryRow(ctx, lockerSelect+`
		WHERE k.id = $1 AND k.tower_id = $2 AND k.organization_id = $3`,
		lockerID, strings.ToLower(towerID), orgID))
	if err != nil {
		return Locker{}, fmt.Errorf("get locker: %w", translate(err))
	}
	return k, nil
}

// Tower returns a tower of the organization with its locker count, or ErrNotFound.
func (s *Store) Tower(ctx context.Context, orgID int64, towerID string) (Tower, error) {
	t := Tower{ID: strings.ToLower(towerID)}
	err := s.db.QueryRow(ctx, `
		SELECT t.organization_id, t.location_id, t.name, t.secret_sealed,
		       (SELECT count(*) FROM lockers k WHERE k.tower_id = t.id)
		FROM towers t WHERE t.id = $1 AND t.organization_id = $2`, t.ID, orgID).
		Scan(&t.OrganizationID, &t.LocationID, &t.Name, &t.SecretSealed, &t.LockerCount)
	if err != nil {
		return Tower{}, fmt.Errorf("get tower: %w", translate(err))
	}
	return t, nil
}

// TowerByID returns a tower of any organization, without its locker count (the caller
// checks the organization): the token and event paths read it through a cache.
func (s *Store) TowerByID(ctx context.Context, towerID string) (Tower, error) {
	t := Tower{ID: strings.ToLower(towerID)}
	err := s.db.QueryRow(ctx, `SELECT organization_id, location_id, name, secret_sealed FROM towers WHERE id = $1`, t.ID).
		Scan(&t.OrganizationID, &t.LocationID, &t.Name, &t.SecretSealed)
	if err != nil {
		return Tower{}, fmt.Errorf("get tower: %w", translate(err))
	}
	return t, nil
}
