package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// DefaultLinkSeconds is how long a locker-open link's token lives unless the request says.
const DefaultLinkSeconds = 900

// OpenRequestBody is a locker-open link. linkToken is the token for the link:
// "<payload>.<payload_auth>", the same two hex strings a locker token carries.
type OpenRequestBody struct {
	ID         uuid.UUID       `json:"id"`
	Type       string          `json:"type" enum:"dropoff,pickup"`
	LockerID   int64           `json:"lockerId"`
	TowerID    string          `json:"towerId"`
	LocationID int64           `json:"locationId"`
	LinkToken  string          `json:"linkToken" doc:"<payload>.<payload_auth> of the locker token"`
	ExpiresAt  Timestamp       `json:"expiresAt"`
	CreatedAt  Timestamp       `json:"createdAt"`
	ReturnURL  string          `json:"returnUrl"`
	ClientInfo *string         `json:"clientInfo"`
	Payload    json.RawMessage `json:"payload,omitempty" doc:"The client metadata sent with the request"`
}

// OpenRequestCommon are the fields both link requests share (exported: huma skips
// unexported embedded structs).
type OpenRequestCommon struct {
	ReturnURL  string         `json:"returnUrl,omitempty" maxLength:"2048" doc:"Where the app returns after opening; may be empty"`
	ClientInfo *string        `json:"clientInfo,omitempty" maxLength:"256" nullable:"true"`
	Payload    map[string]any `json:"payload,omitempty" doc:"A JSON object kept as client metadata"`
	Duration   int            `json:"duration,omitempty" minimum:"1" maximum:"86400" doc:"Seconds the link's token lives (default 900)"`
}

// DropoffLinkRequest asks for a locker of a type at a location for a drop-off.
type DropoffLinkRequest struct {
	LocationID       FlexID `json:"locationId"`
	LockerTypeID     FlexID `json:"lockerTypeId"`
	RequireLowLocker bool   `json:"requireLowLocker,omitempty"`
	OpenRequestCommon
}

// PickupLinkRequest asks for a pickup link to a locker holding the caller's item.
type PickupLinkRequest struct {
	LockerID FlexID `json:"lockerId"`
	OpenRequestCommon
}

func (s *Server) registerOpenRequests(api huma.API) {
	tags := []string{"Locker-open links"}
	for _, base := range []string{"locker-open-requests", "locker-open-request"} {
		hidden := base == "locker-open-request"
		suffix := ""
		if hidden {
			suffix = "-singular"
		}
		huma.Register(api, op(huma.Operation{
			OperationID: "create-dropoff-link" + suffix, Method: http.MethodPost, Path: "/api/v1/" + base + "/dropoff-locker-request", Tags: tags,
			Summary:       "Create a drop-off link",
			Description:   "Picks an available locker of the type at the location (low lockers only if required, else others first), rents it with a drop-off token and returns the link.",
			DefaultStatus: http.StatusCreated, Security: needs(jwtauth.ScopeServiceProvider), Hidden: hidden,
		}), s.dropoffLink)
		huma.Register(api, op(huma.Operation{
			OperationID: "create-pickup-link" + suffix, Method: http.MethodPost, Path: "/api/v1/" + base + "/pickup-locker-request", Tags: tags,
			Summary: "Create a pickup link", Description: "A pickup token for a locker holding the caller's item, wrapped for a link.",
			DefaultStatus: http.StatusCreated, Security: needs(jwtauth.ScopeServiceProvider), Hidden: hidden,
		}), s.pickupLink)
	}
	huma.Register(api, op(huma.Operation{
		OperationID: "get-locker-open-request", Method: http.MethodGet, Path: "/api/v1/locker-open-requests/{id}", Tags: tags,
		Summary: "A locker-open link", Security: needs(jwtauth.ScopeServiceProvider),
		Description: "Only the client that made the link sees it; for any other client, even of the same organization, it does not exist (404).",
	}), s.getOpenRequest)
}

// getOpenRequest answers GET /api/v1/locker-open-requests/{id}.
func (s *Server) getOpenRequest(ctx context.Context, in *struct {
	ID string `path:"id" format:"uuid"`
}) (*struct{ Body OpenRequestBody }, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, s.towerError(ctx, "locker-open request", errNotFound("locker-open request: not found"))
	}
	p := principal(ctx)
	r, err := s.deps.Store.GetOpenRequest(ctx, p.OrgID, p.ClientID, id)
	if err != nil {
		return nil, s.towerError(ctx, "locker-open request", err)
	}
	// A link made before tokens were sealed has no stored copy: linkToken is empty.
	var token string
	if len(r.LinkTokenSealed) > 0 {
		plain, err := s.deps.Keyring.Open(keyring.OpenLinkPurpose(r.ID), r.LinkTokenSealed)
		if err != nil {
			return nil, s.towerError(ctx, "locker-open request", err)
		}
		token = string(plain)
	}
	return &struct{ Body OpenRequestBody }{Body: openRequestBody(r, token)}, nil
}

// dropoffLink answers POST /api/v1/locker-open-requests/dropoff-locker-request.
func (s *Server) dropoffLink(ctx context.Context, in *struct{ Body DropoffLinkRequest }) (*struct{ Body OpenRequestBody }, error) {
	req := in.Body
	p := principal(ctx)
	if ok, err := s.deps.Store.LocationExists(ctx, p.OrgID, int64(req.LocationID)); err != nil || !ok {
		if err == nil {
			err = store.ErrNotFound
		}
		return nil, s.towerError(ctx, "location", err)
	}
	if ok, err := s.deps.Store.LockerTypeExists(ctx, p.OrgID, int64(req.LockerTypeID)); err != nil || !ok {
		if err == nil {
			return nil, s.towerError(ctx, "locker type", invalidInput(fmt.Sprintf("unknown locker type %d", req.LockerTypeID)))
		}
		return nil, s.towerError(ctx, "locker type", err)
	}
	// Concurrent callers may take the first candidates; move on to the next ones.
	for attempt := 0; attempt < 3; attempt++ {
		candidates, err := s.deps.Store.AvailableLockers(ctx, p.OrgID, int64(req.LocationID), int64(req.LockerTypeID), req.RequireLowLocker, 8)
		if err != nil {
			return nil, s.towerError(ctx, "locker", err)
		}
		for _, c := range candidates {
			out, err := s.createLink(ctx, store.TokenDropoff, c.TowerID, c.ID, req.OpenRequestCommon, int64(req.LocationID))
			if isConflict(err) {
				continue
			}
			if err != nil {
				return nil, s.towerError(ctx, "locker", err)
			}
			return out, nil
		}
		if len(candidates) == 0 {
			break
		}
	}
	return nil, s.towerError(ctx, "locker", errConflict("no available locker of that type at the location"))
}

// pickupLink answers POST /api/v1/locker-open-requests/pickup-locker-request.
func (s *Server) pickupLink(ctx context.Context, in *struct{ Body PickupLinkRequest }) (*struct{ Body OpenRequestBody }, error) {
	req := in.Body
	k, err := s.deps.Store.LockerByID(ctx, principal(ctx).OrgID, int64(req.LockerID))
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	out, err := s.createLink(ctx, store.TokenPickup, k.TowerID, k.ID, req.OpenRequestCommon, k.LocationID)
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	return out, nil
}

// isConflict reports whether the locker was in a state that refused the token, so the next
// candidate may be tried.
func isConflict(err error) bool {
	var sc *store.StatusConflictError
	var cf *conflictError
	return errors.As(err, &sc) || errors.As(err, &cf) || errors.Is(err, store.ErrConflict)
}

// createLink issues the link's token and records the link in the same transaction. Its
// errors are the store's: the caller maps them.
func (s *Server) createLink(ctx context.Context, typ, towerID string, lockerID int64, c OpenRequestCommon, locationID int64) (*struct{ Body OpenRequestBody }, error) {
	p := principal(ctx)
	duration := c.Duration
	if duration == 0 {
		duration = DefaultLinkSeconds
	}
	var payload json.RawMessage
	if c.Payload != nil {
		payload, _ = json.Marshal(c.Payload)
	}
	var created store.OpenRequest
	var linkToken string
	_, err := s.issueToken(ctx, towerID, lockerID, typ, LockerTokenRequest{Duration: duration, ClientInfo: c.ClientInfo},
		func(tx *store.Store, t store.LockerToken, tokPayload, auth string) ([]store.OutboxItem, error) {
			var err error
			id := uuid.New()
			linkToken = tokPayload + "." + auth
			created, err = tx.CreateOpenRequest(ctx, store.OpenRequest{
				ID: id, OrgID: p.OrgID, ClientID: p.ClientID, Type: typ, TokenID: t.ID, LockerID: t.LockerID,
				TowerID: t.TowerID, LocationID: locationID, ReturnURL: c.ReturnURL, ClientInfo: c.ClientInfo,
				Payload: payload, LinkTokenSealed: s.deps.Keyring.Seal(keyring.OpenLinkPurpose(id), []byte(linkToken)), ExpiresAt: t.ExpiresAt,
			})
			return nil, err
		})
	if err != nil {
		return nil, err
	}
	return &struct{ Body OpenRequestBody }{Body: openRequestBody(created, linkToken)}, nil
}

func openRequestBody(r store.OpenRequest, linkToken string) OpenRequestBody {
	return OpenRequestBody{ID: r.ID, Type: r.Type, LockerID: r.LockerID, TowerID: r.TowerID, LocationID: r.LocationID,
		LinkToken: linkToken, ExpiresAt: ts(r.ExpiresAt), CreatedAt: ts(r.CreatedAt), ReturnURL: r.ReturnURL,
		ClientInfo: r.ClientInfo, Payload: r.Payload}
}
