package store

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The data of the webhook events this package records, shaped as the API shows the object
// (DESIGN §10).

// atomically runs fn in s's transaction, or in a new one when s is not in a transaction, so
// a change and its event commit together.
func (s *Store) atomically(ctx context.Context, fn func(tx *Store) error) error {
	if _, ok := s.db.(pgx.Tx); ok {
		return fn(s)
	}
	return s.WithTx(ctx, fn)
}

func eventTimePtr(t *time.Time) *EventTime {
	if t == nil {
		return nil
	}
	v := EventTime(*t)
	return &v
}

// accessCodeData is an access code as the app engine API shows it, the code masked.
type accessCodeData struct {
	ID         string     `json:"id"`
	AccessCode string     `json:"access_code"`
	LocationID string     `json:"location_id"`
	LockerName string     `json:"locker_name"`
	SingleUse  bool       `json:"single_use"`
	Expiry     EventTime  `json:"expiry"`
	Status     string     `json:"status"`
	CreatedAt  EventTime  `json:"created_at"`
	UsedAt     *EventTime `json:"used_at,omitempty"`
}

func accessCodeEvent(typ string, c AccessCode) Event {
	return Event{OrgID: c.OrganizationID, LocationID: c.LocationID, Type: typ, Data: accessCodeData{
		ID: c.ID.String(), AccessCode: "****" + c.CodeLast2, LocationID: strconv.FormatInt(c.LocationID, 10),
		LockerName: c.LockerName, SingleUse: c.SingleUse, Expiry: EventTime(c.ExpiresAt), Status: c.Status,
		CreatedAt: EventTime(c.CreatedAt), UsedAt: eventTimePtr(c.UsedAt)}}
}

// gatewayRequestData is a gateway request as the gateway cloud API's polls show it, with its
// outcome.
type gatewayRequestData struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	Kind         string     `json:"kind"`
	Method       string     `json:"method"`
	Path         string     `json:"path"`
	LocationID   int64      `json:"locationId"`
	GatewayID    string     `json:"gatewayId"`
	CreatedAt    EventTime  `json:"createdAt"`
	UpdatedAt    EventTime  `json:"updatedAt"`
	CompletedAt  *EventTime `json:"completedAt"`
	Attempts     int        `json:"attempts"`
	HTTPStatus   int        `json:"httpStatus,omitempty" doc:"The gateway's answer, when it answered"`
	ErrorCode    string     `json:"errorCode,omitempty"`
	ErrorMessage string     `json:"errorMessage,omitempty"`
}

func gatewayRequestEvent(r GatewayRequest) Event {
	typ := "gateway_request.failed"
	if r.Status == "completed" {
		typ = "gateway_request.completed"
	}
	return Event{OrgID: r.OrganizationID, LocationID: r.LocationID, Type: typ, Data: gatewayRequestData{
		ID: r.ID.String(), Status: r.Status, Kind: r.Kind, Method: r.Method, Path: r.Path, LocationID: r.LocationID,
		GatewayID: r.GatewaySerial, CreatedAt: EventTime(r.CreatedAt), UpdatedAt: EventTime(r.UpdatedAt),
		CompletedAt: eventTimePtr(r.CompletedAt), Attempts: r.Attempts, HTTPStatus: r.Outcome.HTTPStatus,
		ErrorCode: r.Outcome.ErrorCode, ErrorMessage: r.Outcome.ErrorMessage}}
}

// gatewayHealthData is a gateway's reachability as the gateway cloud API's locations show it.
type gatewayHealthData struct {
	GatewayID     string     `json:"gatewayId"`
	LocationID    int64      `json:"locationId"`
	GatewayOnline bool       `json:"gatewayOnline"`
	LastSeenAt    *EventTime `json:"lastSeenAt"`
}

// gatewayHealthEvent is gateway.online or gateway.offline for gateway g (the row as it is now).
func gatewayHealthEvent(orgID, locationID int64, serial string, online bool, lastSeen *time.Time) Event {
	typ := "gateway.offline"
	if online {
		typ = "gateway.online"
	}
	return Event{OrgID: orgID, LocationID: locationID, Type: typ,
		Data: gatewayHealthData{GatewayID: serial, LocationID: locationID, GatewayOnline: online, LastSeenAt: eventTimePtr(lastSeen)}}
}
