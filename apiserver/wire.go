package apiserver

import (
	"encoding/json"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/store"
)

// Timestamp is an RFC 3339 UTC time with milliseconds, the form every response uses.
type Timestamp time.Time

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes e.g. "2026-11-21T15:04:05.123Z".
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Time(t).UTC().Format(timestampLayout))
}

// UnmarshalJSON accepts any RFC 3339 timestamp, with any offset.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = Timestamp(v)
	return nil
}

// Schema documents Timestamp as a date-time string.
func (Timestamp) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: "string", Format: "date-time", Examples: []any{"2026-11-21T15:04:05.123Z"}}
}

func ts(t time.Time) Timestamp { return Timestamp(t) }

// optTS is ts of an optional time: nil stays nil (JSON null).
func optTS(t *time.Time) *Timestamp {
	if t == nil {
		return nil
	}
	v := ts(*t)
	return &v
}

// LocationBody is the Location object of the seed, field names exactly as Harbor's.
type LocationBody struct {
	ID                    int64                    `json:"id"`
	Name                  string                   `json:"name"`
	Lat                   float64                  `json:"lat"`
	Lon                   float64                  `json:"lon"`
	Description           *string                  `json:"description"`
	Address1              string                   `json:"address1"`
	Address2              *string                  `json:"address2"`
	City                  string                   `json:"city"`
	State                 string                   `json:"state"`
	Zip                   string                   `json:"zip"`
	Country               string                   `json:"country"`
	Notes                 *string                  `json:"notes"`
	AccessHours           *string                  `json:"accessHours"`
	Timezone              *string                  `json:"timezone" doc:"IANA time zone name"`
	LockerAvailability    store.Availability       `json:"lockerAvailability"`
	LowLockerAvailability store.Availability       `json:"lowLockerAvailability"`
	ByType                []store.TypeAvailability `json:"byType" doc:"One entry per locker type at the location, by sortOrder"`
}

func locationBody(l store.Location) LocationBody {
	return LocationBody{
		ID: l.ID, Name: l.Name, Lat: l.Lat, Lon: l.Lon, Description: l.Description,
		Address1: l.Address1, Address2: l.Address2, City: l.City, State: l.State, Zip: l.Zip,
		Country: l.Country, Notes: l.Notes, AccessHours: l.AccessHours, Timezone: l.Timezone,
		LockerAvailability: l.LockerAvailability, LowLockerAvailability: l.LowLockerAvailability,
		ByType: l.ByType,
	}
}

func locationBodies(ls []store.Location) []LocationBody { return bodies(ls, locationBody) }

// bodies maps a list read from the store to its wire bodies (an empty list, never nil).
func bodies[T, B any](list []T, body func(T) B) []B {
	out := make([]B, len(list))
	for i, v := range list {
		out[i] = body(v)
	}
	return out
}

// StatusBody is a locker status as {id, name}.
type StatusBody struct {
	ID   int    `json:"id" example:"1"`
	Name string `json:"name" enum:"available,reserved,rented,occupied,declined,out_of_service"`
}

// LockerTypeRef names a locker's type.
type LockerTypeRef struct {
	ID          int64   `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

// LockerBody is a tower locker.
type LockerBody struct {
	ID          int64         `json:"id"`
	Name        string        `json:"name" doc:"Label on the door"`
	IsLowLocker bool          `json:"isLowLocker"`
	TowerID     string        `json:"towerId"`
	LocationID  int64         `json:"locationId"`
	Status      StatusBody    `json:"status"`
	Type        LockerTypeRef `json:"type"`
	AccessMode  string        `json:"accessMode"`
}

func statusBody(s store.LockerStatus) StatusBody { return StatusBody{ID: int(s), Name: s.Name()} }

func lockerBody(k store.Locker) LockerBody {
	return LockerBody{
		ID: k.ID, Name: k.Name, IsLowLocker: k.IsLowLocker, TowerID: k.TowerID, LocationID: k.LocationID,
		Status:     statusBody(k.Status),
		Type:       LockerTypeRef{ID: k.TypeID, Name: k.TypeName, Description: k.TypeDescription},
		AccessMode: k.AccessMode,
	}
}

func lockerBodies(ks []store.Locker) []LockerBody { return bodies(ks, lockerBody) }
