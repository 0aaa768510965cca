package store

import (
	"context"
	"fmt"
	"strings"
)

// NewLocation describes a location to create or update (the admin command and the seed).
type NewLocation struct {
	OrganizationID    int64
	SubOrganizationID *int64
	Name              string
	Lat, Lon          float64
	Description       *string
	Address1          string
	Address2          *string
	City, State, Zip  string
	Country           string
	Notes             *string
	AccessHours       *string
	Timezone          *string
}

// UpsertLocation creates the location or updates the one with the same name in the organization.
func (s *Store) UpsertLocation(ctx context.Context, l NewLocation) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO locations (organization_id, sub_organization_id, name, lat, lon, description, address1,
		                       address2, city, state, zip, country, notes, access_hours, timezone)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (organization_id, name) DO UPDATE SET
		    sub_organization_id = EXCLUDED.sub_organization_id, lat = EXCLUDED.lat, lon = EXCLUDED.lon,
		    description = EXCLUDED.description, address1 = EXCLUDED.address1, address2 = EXCLUDED.address2,
		    city = EXCLUDED.city, state = EXCLUDED.state, zip = EXCLUDED.zip, country = EXCLUDED.country,
		    notes = EXCLUDED.notes, access_hours = EXCLUDED.access_hours, timezone = EXCLUDED.timezone
		RETURNING id`,
		l.OrganizationID, l.SubOrganizationID, l.Name, l.Lat, l.Lon, l.Description, l.Address1, l.Address2,
		l.City, l.State, l.Zip, l.Country, l.Notes, l.AccessHours, l.Timezone).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("upsert location: %w", translate(err))
	}
	return id, nil
}

// UpsertLockerType creates the locker type or updates the one with the same name.
func (s *Store) UpsertLockerType(ctx context.Context, orgID int64, t LockerType) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO locker_types (organization_id, name, description, sort_order) VALUES ($1, $2, $3, $4)
		ON CONFLICT (organization_id, name) DO UPDATE SET description = EXCLUDED.description, sort_order = EXCLUDED.sort_order
		RETURNING id`, orgID, t.Name, t.Description, t.SortOrder).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("upsert locker type: %w", translate(err))
	}
	return id, nil
}

// EnsureTower creates the tower with the sealed secret if it does not exist and returns the
// stored sealed secret (the existing one when the tower was already there).
func (s *Store) EnsureTower(ctx context.Context, t Tower) ([]byte, error) {
	var sealed []byte
	err := s.db.QueryRow(ctx, `
		INSERT INTO towers (id, organization_id, location_id, name, secret_sealed) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, location_id = EXCLUDED.location_id
		RETURNING secret_sealed`, strings.ToLower(t.ID), t.OrganizationID, t.LocationID, t.Name, t.SecretSealed).Scan(&sealed)
	if err != nil {
		return nil, fmt.Errorf("ensure tower: %w", translate(err))
	}
	return sealed, nil
}

// NewLocker describes a tower locker to create.
type NewLocker struct {
	TowerID     string
	Name        string
	TypeID      int64
	IsLowLocker bool
}

// EnsureLocker creates the locker if the tower has none with that name; an existing locker
// keeps its status. It returns the locker id.
func (s *Store) EnsureLocker(ctx context.Context, k NewLocker) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO lockers (tower_id, location_id, organization_id, name, locker_type_id, is_low_locker)
		SELECT t.id, t.location_id, t.organization_id, $2, $3, $4 FROM towers t WHERE t.id = $1
		ON CONFLICT (tower_id, name) DO UPDATE SET locker_type_id = EXCLUDED.locker_type_id, is_low_locker = EXCLUDED.is_low_locker
		RETURNING id`, strings.ToLower(k.TowerID), k.Name, k.TypeID, k.IsLowLocker).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("ensure locker: %w", translate(err))
	}
	return id, nil
}
