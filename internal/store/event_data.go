package store

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// The data of the webhook events this package records, shaped as the API shows the object
// (DESIGN §10).

// atomically runs fn in s's transaction, or in a new one when s is not in a transaction, so
// a change and its event commit together. When organization orgID (0: any organization)
// has no webhook endpoint, no event will be recorded and fn runs as it is, without a
// transaction of its own: changes of organizations that use no webhooks cost what they did
// before webhooks existed.
func (s *Store) atomically(ctx context.Context, orgID int64, fn func(tx *Store) error) error {
	if _, ok := s.db.(pgx.Tx); ok || !s.wantsEvents(ctx, orgID) {
		return fn(s)
	}
	return s.WithTx(ctx, fn)
}

// hookedOrgsTTL is how long a process trusts its list of the organizations that have webhook
// endpoints. An organization's first endpoint is seen by the other processes within it; the
// process that made it sees it at once.
const hookedOrgsTTL = time.Second

// hookedOrgs caches the organizations that have webhook endpoints.
type hookedOrgs struct {
	mu   sync.Mutex
	at   time.Time
	orgs map[int64]bool
}

// wantsEvents reports whether organization orgID (0: any organization) has a webhook
// endpoint, as of at most hookedOrgsTTL ago. When the list cannot be read it answers true:
// recording an event nobody wants costs a statement, missing one loses it.
func (s *Store) wantsEvents(ctx context.Context, orgID int64) bool {
	h := s.hooked
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.orgs == nil || time.Since(h.at) > hookedOrgsTTL {
		rows, err := s.db.Query(ctx, `SELECT DISTINCT organization_id FROM webhook_endpoints WHERE deleted_at IS NULL`)
		if err != nil {
			return true
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return true
		}
		h.orgs = make(map[int64]bool, len(ids))
		for _, id := range ids {
			h.orgs[id] = true
		}
		h.at = time.Now()
	}
	if orgID == 0 {
		return len(h.orgs) > 0
	}
	return h.orgs[orgID]
}

// forgetHookedOrgs makes the next wantsEvents read the list again (an endpoint was made).
func (s *Store) forgetHookedOrgs() {
	if h := s.hooked; h != nil {
		h.mu.Lock()
		h.orgs = nil
		h.mu.Unlock()
	}
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
	Outcome      string     `json:"outcome,omitempty" doc:"unknown when the request may or may not have been carried out (gateway_unresponsive): the door may have moved"`
}

func gatewayRequestEvent(r GatewayRequest) Event {
	typ := "gateway_request.failed"
	if r.Status == gatewayreq.StateCompleted {
		typ = "gateway_request.completed"
	}
	return Event{OrgID: r.OrganizationID, LocationID: r.LocationID, Type: typ, Data: gatewayRequestData{
		ID: r.ID.String(), Status: r.Status, Kind: r.Kind, Method: r.Method, Path: r.Path, LocationID: r.LocationID,
		GatewayID: r.GatewaySerial, CreatedAt: EventTime(r.CreatedAt), UpdatedAt: EventTime(r.UpdatedAt),
		CompletedAt: eventTimePtr(r.CompletedAt), Attempts: r.Attempts, HTTPStatus: r.Outcome.HTTPStatus,
		ErrorCode: r.Outcome.ErrorCode, ErrorMessage: r.Outcome.ErrorMessage, Outcome: outcomeOf(r.Outcome)}}
}

// outcomeOf is an outcome's details.outcome ("unknown" when the request may or may not have
// been carried out), or empty.
func outcomeOf(o gatewayreq.Outcome) string {
	if s, ok := o.Details["outcome"].(string); ok {
		return s
	}
	return ""
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
