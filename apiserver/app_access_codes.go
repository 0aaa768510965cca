package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// The app engine's access codes (DESIGN §5): their routes, their bodies and who may see
// them. A code holds its locker through a gateway transaction (app_code_holds.go); opening
// and closing go through the gateway too (app_doors.go).

// Access-code limits (DESIGN §5).
const (
	MaxCodeLifetime = 365 * 24 * time.Hour
	CodeGuessLimit  = 10
	// CodeGuessCeiling bounds the wrong codes of one key at one location across all its end
	// users (calls naming end_user_id).
	CodeGuessCeiling   = 100
	CodeGuessWindow    = 15 * time.Minute
	codeHoldWait       = 10 * time.Second
	codeOpenWait       = 15 * time.Second
	codeCloseWait      = 5 * time.Second
	problemCodeInvalid = "urn:lockernet:problem:ACCESS_CODE_INVALID"
)

// AccessCodeBody is an access code. access_code is shown only to keys of the scope that
// made it (the same sub-organization, or organization-wide for an org-wide key's code);
// others see it masked to its last two digits.
type AccessCodeBody struct {
	ID         uuid.UUID `json:"id"`
	AccessCode string    `json:"access_code" doc:"Six digits; masked (****12) outside the scope that made the code"`
	LocationID string    `json:"location_id"`
	LockerName string    `json:"locker_name"`
	SingleUse  bool      `json:"single_use"`
	Expiry     Timestamp `json:"expiry"`
	Status     string    `json:"status" enum:"active,used,removed,expired"`
	CreatedAt  Timestamp `json:"created_at"`
}

// CreateAccessCodeRequest is the body of POST /locker.
type CreateAccessCodeRequest struct {
	LocationID FlexID `json:"location_id" doc:"A gateway location of the key's scope"`
	LockerName string `json:"locker_name" minLength:"1" maxLength:"64" doc:"The locker's name (label) at the location"`
	SingleUse  bool   `json:"single_use"`
	Expiry     string `json:"expiry" doc:"RFC 3339, in the future, at most one year ahead" example:"2026-12-01T18:00:00Z"`
}

// OpenWithCodeRequest is the body of POST /locker/open.
type OpenWithCodeRequest struct {
	LocationID FlexID `json:"location_id"`
	AccessCode string `json:"access_code" maxLength:"32"`
	EndUserID  string `json:"end_user_id,omitempty" maxLength:"128" doc:"Optional: the caller's own id for the person typing the code. The wrong-code limit then counts per end user (10 per 15 minutes), with a ceiling of 100 per key and location across all of them; without it the limit is 10 per key and location."`
}

// CloseLockerRequest is the body of POST /locker/close.
type CloseLockerRequest struct {
	LocationID FlexID `json:"location_id"`
	LockerName string `json:"locker_name" minLength:"1" maxLength:"64"`
}

func (s *Server) registerAccessCodes(api huma.API) {
	tags := []string{"App engine: access codes"}
	huma.Register(api, op(huma.Operation{
		OperationID: "list-sub-organization-access-codes", Method: http.MethodGet, Path: "/sub-organization/{sub_organization_id}/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of A Sub-Organization", Description: "Active codes at the sub-organization's locations.", Security: needsAppKey,
	}), s.listSubOrganizationAccessCodes)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-location-access-codes", Method: http.MethodGet, Path: "/locker/all/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of All Lockers",
		Description: "Active codes of the lockers at every location the key may see: its organization's for an organization-wide key, " +
			"its sub-organization's otherwise. location_id narrows the list to one of those locations.",
		Security: needsAppKey,
	}), s.listLocationAccessCodes)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-locker-access-codes", Method: http.MethodGet, Path: "/locker/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of A Locker", Security: needsAppKey,
	}), s.listLockerAccessCodes)

	huma.Register(api, op(huma.Operation{
		OperationID: "create-access-code", Method: http.MethodPost, Path: "/locker", Tags: tags,
		Summary: "Create Access Code For A Locker",
		Description: "Six random digits, unique among the location's active codes. The code holds its locker through a gateway transaction " +
			"(its id is the code's) until it expires, is removed or (single-use) is used; one active code per locker.",
		Security: needsAppKey,
	}), s.createAccessCode)

	huma.Register(api, op(huma.Operation{
		OperationID: "open-locker-with-code", Method: http.MethodPost, Path: "/locker/open", Tags: tags,
		Summary: "Open Locker With Access Code",
		Description: fmt.Sprintf("Opens the code's locker through its gateway (a durable gateway request). 200 when the gateway answered within %s; "+
			"202 with request_id while pending (poll GET /locker/requests/{request_id}); 502/503/504 when the gateway rejected it, could not be reached, "+
			"or did not answer. Unknown, used, expired and removed codes all answer 403 ACCESS_CODE_INVALID and touch no door; "+
			"%d wrong codes per key and location (per end user when end_user_id is given, with a ceiling of %d per key and location) within %s answer 429 until the window passes; "+
			"attempts are counted before the code is judged, so simultaneous guesses cannot pass the limit.", codeOpenWait, CodeGuessLimit, CodeGuessCeiling, CodeGuessWindow),
		Security: needsAppKey, Responses: doorResponses(api),
	}), s.openWithCode)

	huma.Register(api, op(huma.Operation{
		OperationID: "close-locker", Method: http.MethodPost, Path: "/locker/close", Tags: tags,
		Summary:     "Close Locker",
		Description: "Reads the door sensor through the gateway and records the close; a door still open is reported, not an error.",
		Security:    needsAppKey,
		Responses:   doorResponses(api),
	}), s.closeLocker)

	huma.Register(api, op(huma.Operation{
		OperationID: "poll-locker-request", Method: http.MethodGet, Path: "/locker/requests/{request_id}", Tags: tags,
		Summary: "The outcome of a pending open or close", Security: needsAppKey, Responses: doorPollResponses(api),
	}), s.pollDoorRequest)

	huma.Register(api, op(huma.Operation{
		OperationID: "remove-access-code", Method: http.MethodPatch, Path: "/locker/access-code/{id}", Tags: tags,
		Summary: "Remove Access Code", Description: "The code stops working at once and its locker's hold is released.", Security: needsAppKey,
	}), s.removeAccessCode)
}

// listSubOrganizationAccessCodes answers GET /sub-organization/{sub_organization_id}/access-codes.
func (s *Server) listSubOrganizationAccessCodes(ctx context.Context, in *struct {
	SubOrganizationID int64 `path:"sub_organization_id"`
}) (*struct{ Body []AccessCodeBody }, error) {
	k := appKey(ctx)
	ok, err := s.deps.Store.SubOrganizationOf(ctx, k.OrganizationID, in.SubOrganizationID)
	if err != nil {
		return nil, s.appError(ctx, "sub-organization", err)
	}
	if !ok || (!k.OrgWide() && *k.SubOrganizationID != in.SubOrganizationID) {
		return nil, s.appError(ctx, "sub-organization", errNotFound("sub-organization: not found"))
	}
	return s.accessCodeList(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: &in.SubOrganizationID})
}

// listLocationAccessCodes answers GET /locker/all/access-codes.
func (s *Server) listLocationAccessCodes(ctx context.Context, in *struct {
	LocationID string `query:"location_id" maxLength:"20" doc:"Optional: only the codes at this location (one of the key's scope); absent or empty lists every location"`
}) (*struct{ Body []AccessCodeBody }, error) {
	k := appKey(ctx)
	var locationID int64
	if strings.TrimSpace(in.LocationID) != "" {
		loc, err := s.codeLocation(ctx, k, in.LocationID)
		if err != nil {
			return nil, s.appError(ctx, "location", err)
		}
		locationID = loc.LocationID
	}
	return s.accessCodeList(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: k.SubOrganizationID, LocationID: locationID})
}

// listLockerAccessCodes answers GET /locker/access-codes.
func (s *Server) listLockerAccessCodes(ctx context.Context, in *struct {
	LocationID string `query:"location_id" required:"true" maxLength:"20"`
	LockerName string `query:"locker_name" required:"true" minLength:"1" maxLength:"64"`
}) (*struct{ Body []AccessCodeBody }, error) {
	k := appKey(ctx)
	loc, err := s.codeLocation(ctx, k, in.LocationID)
	if err != nil {
		return nil, s.appError(ctx, "location", err)
	}
	return s.accessCodeList(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: k.SubOrganizationID,
		LocationID: loc.LocationID, LockerName: in.LockerName})
}

// accessCodeList answers the access codes f selects, as the calling key may see them.
func (s *Server) accessCodeList(ctx context.Context, f store.AccessCodeFilter) (*struct{ Body []AccessCodeBody }, error) {
	codes, err := s.deps.Store.ListAccessCodes(ctx, f)
	if err != nil {
		return nil, s.appError(ctx, "access codes", err)
	}
	out := make([]AccessCodeBody, 0, len(codes))
	for _, c := range codes {
		b, err := s.accessCodeBody(appKey(ctx), c)
		if err != nil {
			return nil, s.appError(ctx, "access codes", err)
		}
		out = append(out, b)
	}
	return &struct{ Body []AccessCodeBody }{Body: out}, nil
}

// doorResponses documents the answers of an open or a close (and of their poll): the door's
// result once the gateway settled it, else the request to poll.
func doorResponses(api huma.API) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	return map[string]*huma.Response{
		"200": {Description: "The gateway settled it", Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(reflectTypeOf[DoorResult](), true, "")}}},
		"202": {Description: "Still pending after the wait: poll Location", Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(reflectTypeOf[PendingDoor](), true, "")}},
			Headers: map[string]*huma.Param{
				"Location":    {Description: "/locker/requests/{request_id}", Schema: &huma.Schema{Type: "string"}},
				"Retry-After": {Description: "Seconds before polling", Schema: &huma.Schema{Type: "integer"}},
			}},
	}
}

// doorPollResponses documents the poll of an open or a close: 200 with the door's result once
// the gateway settled it, 200 with the pending request until then.
func doorPollResponses(api huma.API) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	return map[string]*huma.Response{
		"200": {Description: "The door's result once the gateway settled it (DoorResult), else the request still pending (PendingDoor)",
			Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{OneOf: []*huma.Schema{
				reg.Schema(reflectTypeOf[DoorResult](), true, ""), reg.Schema(reflectTypeOf[PendingDoor](), true, "")}}}}},
	}
}

// removeAccessCode ends a code at once (PATCH /locker/access-code/{id}); its workflow
// releases the locker's hold.
func (s *Server) removeAccessCode(ctx context.Context, in *struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		Status string `json:"status" enum:"removed"`
	}
}) (*struct{ Body AccessCodeBody }, error) {
	k := appKey(ctx)
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, s.appError(ctx, "access code", errNotFound("access code: not found"))
	}
	c, err := s.deps.Store.AccessCode(ctx, k.OrganizationID, id)
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	if _, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, c.LocationID); err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var changed bool
		var err error
		if c, changed, err = tx.RemoveAccessCode(ctx, k.OrganizationID, id); err != nil || !changed {
			return nil, err
		}
		return []store.OutboxItem{outbox.AccessCodeItem(c, contract.SignalCodeEnded, contract.CodeOutcomeRemoved)}, nil
	})
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	if c.Status != store.CodeRemoved {
		return nil, s.appError(ctx, "access code", errConflict("the access code is "+c.Status))
	}
	b, err := s.accessCodeBody(k, c)
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	return &struct{ Body AccessCodeBody }{Body: b}, nil
}

// codeLocation resolves a location id of the key's scope that has a gateway; the caller maps
// its errors.
func (s *Server) codeLocation(ctx context.Context, k store.AppKey, raw string) (store.Gateway, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || id < 1 {
		return store.Gateway{}, invalidField("location_id must be a positive integer", "query.location_id", raw, "expected a positive integer")
	}
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, id)
	if err != nil {
		return store.Gateway{}, err
	}
	return gw, nil
}

func (s *Server) codeKeyring() (*keyring.Keyring, error) {
	return keyring.New(s.deps.Keyring.Derive("access-code-encryption"))
}

// accessCodeBody shows the code to keys of the scope that made it, masked to others.
func (s *Server) accessCodeBody(k store.AppKey, c store.AccessCode) (AccessCodeBody, error) {
	code := "****" + c.CodeLast2
	if sameScope(k.SubOrganizationID, c.SubOrganizationID) {
		ring, err := s.codeKeyring()
		if err != nil {
			return AccessCodeBody{}, err
		}
		plain, err := ring.Open(keyring.AccessCodePurpose(c.ID), c.CodeSealed)
		if err != nil {
			return AccessCodeBody{}, err
		}
		code = string(plain)
	}
	return AccessCodeBody{ID: c.ID, AccessCode: code, LocationID: strconv.FormatInt(c.LocationID, 10), LockerName: c.LockerName,
		SingleUse: c.SingleUse, Expiry: ts(c.ExpiresAt), Status: c.Status, CreatedAt: ts(c.CreatedAt)}, nil
}

func sameScope(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// parseAccessCode returns the digits of an access code as typed: six ASCII digits (DESIGN §5),
// surrounding white space ignored. Anything else is no code.
func parseAccessCode(s string) (string, bool) {
	digits := strings.TrimSpace(s)
	if len(digits) != accessCodeLen || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	return digits, true
}

// accessCodeLen is the number of digits of an access code.
const accessCodeLen = 6
