package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MaxAreaResults caps an in-area search; callers narrow the rectangle for more.
const MaxAreaResults = 1000

// locationSelect reads a location with its availability, counted from the lockers' current
// statuses in the same statement (never a stale counter).
var locationSelect = `
	SELECT l.id, l.name, l.lat, l.lon, l.description, l.address1, l.address2, l.city, l.state,
	       l.zip, l.country, l.notes, l.access_hours, l.timezone,
	       coalesce((
	           SELECT json_agg(t ORDER BY t.sort_order, t.id)
	           FROM (
	               SELECT lt.id, lt.name, lt.description, lt.sort_order,
	                      count(*) AS total,
	                      count(*) FILTER (WHERE locker_status(k.status, k.hold_expires_at) = ` + availableSQL + `) AS available,
	                      count(*) FILTER (WHERE k.is_low_locker) AS low_total,
	                      count(*) FILTER (WHERE k.is_low_locker AND locker_status(k.status, k.hold_expires_at) = ` + availableSQL + `) AS low_available
	               FROM lockers k JOIN locker_types lt ON lt.id = k.locker_type_id
	               WHERE k.location_id = l.id
	               GROUP BY lt.id
	           ) t), '[]'::json) AS by_type`

// hasTowers keeps the tower API to locations with towers; gateway-only locations belong to
// the gateway cloud API.
const hasTowers = `EXISTS (SELECT 1 FROM towers tw WHERE tw.location_id = l.id)`

type typeRow struct {
	ID           int64   `json:"id"`
	Name         string  `json:"name"`
	Description  *string `json:"description"`
	SortOrder    int     `json:"sort_order"`
	Total        int     `json:"total"`
	Available    int     `json:"available"`
	LowTotal     int     `json:"low_total"`
	LowAvailable int     `json:"low_available"`
}

func scanLocation(row pgx.Row, extra ...any) (Location, error) {
	var l Location
	var byType []byte
	dest := []any{&l.ID, &l.Name, &l.Lat, &l.Lon, &l.Description, &l.Address1, &l.Address2, &l.City,
		&l.State, &l.Zip, &l.Country, &l.Notes, &l.AccessHours, &l.Timezone, &byType}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Location{}, err
	}
	var types []typeRow
	if err := json.Unmarshal(byType, &types); err != nil {
		return Location{}, fmt.Errorf("decode availability: %w", err)
	}
	l.ByType = make([]TypeAvailability, 0, len(types))
	for _, t := range types {
		l.ByType = append(l.ByType, TypeAvailability{
			LockerType:            LockerType{ID: t.ID, Name: t.Name, Description: t.Description, SortOrder: t.SortOrder},
			LockerAvailability:    Availability{TotalLockers: t.Total, AvailableLockers: t.Available},
			LowLockerAvailability: Availability{TotalLockers: t.LowTotal, AvailableLockers: t.LowAvailable},
		})
		l.LockerAvailability.TotalLockers += t.Total
		l.LockerAvailability.AvailableLockers += t.Available
		l.LowLockerAvailability.TotalLockers += t.LowTotal
		l.LowLockerAvailability.AvailableLockers += t.LowAvailable
	}
	return l, nil
}

func collectLocations(rows pgx.Rows, err error) ([]Location, error) {
	return scanAll(rows, err, "query locations", "location", []Location{}, func(row pgx.Row) (Location, error) { return scanLocation(row) })
}

// LocationsInArea returns the organization's tower locations inside the box, by id.
func (s *Store) LocationsInArea(ctx context.Context, orgID int64, b Box) ([]Location, error) {
	// The box is filtered first, through the GiST index, in a materialized step: left to
	// itself, a cached generic plan of "ORDER BY id LIMIT n" walks the primary key and
	// filters every location of the table (measured: 46 ms against 0.2 ms on 100,000).
	rows, err := s.db.Query(ctx, `
		WITH inbox AS MATERIALIZED (
		    SELECT l.id FROM locations l
		    WHERE l.organization_id = $1
		      AND point(l.lon, l.lat) <@ box(point($2, $3), point($4, $5))
		      AND `+hasTowers+`
		), firsts AS (SELECT id FROM inbox ORDER BY id LIMIT $6)
		`+locationSelect+`
		FROM locations l JOIN firsts f ON f.id = l.id
		ORDER BY l.id`, orgID, b.MinLon, b.MinLat, b.MaxLon, b.MaxLat, MaxAreaResults)
	return collectLocations(rows, err)
}

// ListLocations pages through the organization's tower locations by id.
func (s *Store) ListLocations(ctx context.Context, orgID int64, skip, limit int) ([]Location, error) {
	rows, err := s.db.Query(ctx, locationSelect+`
		FROM locations l
		WHERE l.organization_id = $1 AND `+hasTowers+`
		ORDER BY l.id
		OFFSET $2 LIMIT $3`, orgID, skip, limit)
	return collectLocations(rows, err)
}

// ClosestLocation returns the organization's nearest tower location within radiusKm by
// great-circle distance, or ErrNotFound. The bounding boxes keep it on the GiST index.
func (s *Store) ClosestLocation(ctx context.Context, orgID int64, lat, lon, radiusKm float64) (Location, error) {
	boxes := BoxesAround(lat, lon, radiusKm)
	second := boxes[0]
	if len(boxes) > 1 {
		second = boxes[1]
	}
	row := s.db.QueryRow(ctx, `
		SELECT * FROM (`+locationSelect+`,
		       2 * $10::float8 * asin(least(1, sqrt(
		           power(sin(radians(l.lat - $2) / 2), 2) +
		           cos(radians($2)) * cos(radians(l.lat)) * power(sin(radians(l.lon - $3) / 2), 2)))) AS distance_km
		    FROM locations l
		    WHERE l.organization_id = $1
		      AND (point(l.lon, l.lat) <@ box(point($4, $5), point($6, $7))
		           OR point(l.lon, l.lat) <@ box(point($11, $12), point($13, $14)))
		      AND `+hasTowers+`
		) c
		WHERE c.distance_km <= $8
		ORDER BY c.distance_km, c.id
		LIMIT $9`,
		orgID, lat, lon,
		boxes[0].MinLon, boxes[0].MinLat, boxes[0].MaxLon, boxes[0].MaxLat,
		radiusKm, 1, EarthRadiusKm,
		second.MinLon, second.MinLat, second.MaxLon, second.MaxLat)
	var distance float64
	l, err := scanLocation(row, &distance)
	if err != nil {
		return Location{}, fmt.Errorf("closest location: %w", translate(err))
	}
	l.DistanceKm = distance
	return l, nil
}

// LocationExists reports whether the organization owns the location (tower locations only).
func (s *Store) LocationExists(ctx context.Context, orgID, locationID int64) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM locations l WHERE l.id = $1 AND l.organization_id = $2 AND `+hasTowers+`)`,
		locationID, orgID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check location: %w", translate(err))
	}
	return ok, nil
}
