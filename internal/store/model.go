package store

import (
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// LockerStatus is one of Harbor's six tower-locker statuses (DESIGN §4.1); the rules of
// which action it allows are lockerrules.Decide's.
type LockerStatus = lockerrules.Status

// The six statuses, with the ids clients see.
const (
	StatusAvailable    = lockerrules.Available
	StatusReserved     = lockerrules.Reserved
	StatusRented       = lockerrules.Rented
	StatusOccupied     = lockerrules.Occupied
	StatusDeclined     = lockerrules.Declined
	StatusOutOfService = lockerrules.OutOfService
)

// Organization is a tenant.
type Organization struct {
	ID   int64
	Name string
}

// Client is a service-provider OAuth client.
type Client struct {
	ClientID       string
	OrganizationID int64
	Name           string
	SecretHash     []byte
	Scopes         []string
	Disabled       bool
}

// SigningKey is a JWT signing key; PrivateKeySealed is sealed under the master key.
type SigningKey struct {
	KID              string
	Algorithm        string
	PublicKey        []byte
	PrivateKeySealed []byte
	CreatedAt        time.Time
	RetiredAt        *time.Time
}

// Availability counts lockers, and of them those available now.
type Availability struct {
	TotalLockers     int `json:"totalLockers"`
	AvailableLockers int `json:"availableLockers"`
}

// LockerType describes a size class of lockers.
type LockerType struct {
	ID          int64   `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	SortOrder   int     `json:"sortOrder"`
}

// TypeAvailability is the availability of one locker type at a location.
type TypeAvailability struct {
	LockerType            LockerType   `json:"lockerType"`
	LockerAvailability    Availability `json:"lockerAvailability"`
	LowLockerAvailability Availability `json:"lowLockerAvailability"`
}

// Location is a place with towers (and/or a gateway), with availability computed at read time.
type Location struct {
	ID                    int64
	Name                  string
	Lat, Lon              float64
	Description           *string
	Address1              string
	Address2              *string
	City, State, Zip      string
	Country               string
	Notes                 *string
	AccessHours           *string
	Timezone              *string
	LockerAvailability    Availability
	LowLockerAvailability Availability
	ByType                []TypeAvailability
	DistanceKm            float64 // set by ClosestLocation
}

// Locker is a tower locker with its current status (lapsed holds shown as available).
type Locker struct {
	ID                int64
	Name              string
	IsLowLocker       bool
	TowerID           string
	LocationID        int64
	Status            LockerStatus
	TypeID            int64
	TypeName          string
	TypeDescription   *string
	AccessMode        string
	Generation        int32
	PossessorClientID *string
	PossessionSince   *time.Time
	ReservationID     *uuid.UUID
	HoldExpiresAt     *time.Time
}

// Tower is a BLE tower; its secret stays sealed unless a caller opens it with the keyring.
type Tower struct {
	ID             string
	OrganizationID int64
	LocationID     int64
	Name           string
	LockerCount    int
	SecretSealed   []byte
}

// Reservation statuses.
const (
	ReservationActive    = "active"
	ReservationConsumed  = "consumed"
	ReservationCancelled = "cancelled"
	ReservationExpired   = "expired"
)

// Reservation holds a locker for its creator until it expires.
type Reservation struct {
	ID              uuid.UUID
	OrganizationID  int64
	ClientID        string
	LockerID        int64
	TowerID         string
	LocationID      int64
	Status          string
	DurationSeconds int
	CreatedAt       time.Time
	ExpiresAt       time.Time
	EndedAt         *time.Time
}
