package store

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/webhook"
)

// Event types the tower API's state changes record (DESIGN §10).
const (
	EventTypeReservationCreated     = "reservation.created"
	EventTypeReservationCancelled   = "reservation.cancelled"
	EventTypeReservationExpired     = "reservation.expired"
	EventTypeLockerDropoffCompleted = "locker.dropoff_completed"
	EventTypeLockerPickupCompleted  = "locker.pickup_completed"
	EventTypeLockerReleased         = "locker.released"
	EventTypeLockerTokenExpired     = "locker_token.expired"
	EventTypeLockerOutOfService     = "locker.out_of_service"
	EventTypeLockerInService        = "locker.in_service"
)

// EventTime is a timestamp as the tower API writes it: RFC 3339 UTC with milliseconds.
type EventTime time.Time

// MarshalJSON writes e.g. "2026-11-21T15:04:05.123Z".
func (t EventTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Time(t).UTC().Format(webhook.TimeFormat))
}

// EventReservation is a reservation as the tower API shows it (DESIGN §4.4).
type EventReservation struct {
	ID        uuid.UUID `json:"id"`
	LockerID  int64     `json:"lockerId"`
	TowerID   string    `json:"towerId"`
	Status    string    `json:"status"`
	CreatedAt EventTime `json:"createdAt"`
	ExpiresAt EventTime `json:"expiresAt"`
	Duration  int       `json:"duration"`
}

func eventReservation(r Reservation) EventReservation {
	return EventReservation{ID: r.ID, LockerID: r.LockerID, TowerID: r.TowerID, Status: r.Status,
		CreatedAt: EventTime(r.CreatedAt), ExpiresAt: EventTime(r.ExpiresAt), Duration: r.DurationSeconds}
}

// EventLockerStatus is a locker status as {id, name}.
type EventLockerStatus struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// EventLockerType names a locker's type.
type EventLockerType struct {
	ID          int64   `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

// EventLocker is a tower locker as the tower API shows it (DESIGN §4.2).
type EventLocker struct {
	ID          int64             `json:"id"`
	Name        string            `json:"name"`
	IsLowLocker bool              `json:"isLowLocker"`
	TowerID     string            `json:"towerId"`
	LocationID  int64             `json:"locationId"`
	Status      EventLockerStatus `json:"status"`
	Type        EventLockerType   `json:"type"`
	AccessMode  string            `json:"accessMode"`
}

// EventToken is a locker token as the tower API shows it (DESIGN §4.5), without the
// payload that opens the locker.
type EventToken struct {
	ID         uuid.UUID `json:"id"`
	Type       string    `json:"type"`
	LockerID   int64     `json:"lockerId"`
	TowerID    string    `json:"towerId"`
	ClientInfo *string   `json:"clientInfo"`
	CreatedAt  EventTime `json:"createdAt"`
	ExpiresAt  EventTime `json:"expiresAt"`
}

// EventTokenUse is a drop-off or pickup completed at the tower: the locker as it is now,
// the token used and its client_info, and when the tower saw the door close.
type EventTokenUse struct {
	Locker      EventLocker `json:"locker"`
	TokenID     uuid.UUID   `json:"tokenId"`
	ClientInfo  *string     `json:"clientInfo"`
	CompletedAt EventTime   `json:"completedAt"`
}

// eventLockerColumns read a locker as the API shows it and the sub-organization of its
// location, from lockers k, locker_types lt and locations l (scanEventLocker reads them).
const eventLockerColumns = `k.id, k.name, k.is_low_locker, k.tower_id, k.location_id, locker_status(k.status, k.hold_expires_at),
	lt.id, lt.name, lt.description, k.access_mode, l.sub_organization_id`

// scanEventLocker scans eventLockerColumns followed by extra destinations.
func scanEventLocker(row pgx.Row, extra ...any) (EventLocker, *int64, error) {
	var k EventLocker
	var status LockerStatus
	var subOrg *int64
	dest := append([]any{&k.ID, &k.Name, &k.IsLowLocker, &k.TowerID, &k.LocationID, &status,
		&k.Type.ID, &k.Type.Name, &k.Type.Description, &k.AccessMode, &subOrg}, extra...)
	if err := row.Scan(dest...); err != nil {
		return EventLocker{}, nil, err
	}
	k.Status = EventLockerStatus{ID: int(status), Name: status.Name()}
	return k, subOrg, nil
}

// locationSubOrg is a subquery for the sub-organization of the location of the locker whose
// id is the expression lockerID.
func locationSubOrg(lockerID string) string {
	return `(SELECT l.sub_organization_id FROM lockers lk JOIN locations l ON l.id = lk.location_id WHERE lk.id = ` + lockerID + `)`
}
