package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// Access-code limits (DESIGN §5).
const (
	MaxCodeLifetime = 365 * 24 * time.Hour
	CodeGuessLimit  = 10
	// CodeGuessCeiling bounds the wrong codes of one key at one location across all its end
	// users (calls naming end_user_id).
	CodeGuessCeiling  = 100
	CodeGuessWindow   = 15 * time.Minute
	codeHoldWait      = 10 * time.Second
	codeOpenWait      = 15 * time.Second
	codeCloseWait     = 5 * time.Second
	problemCodeInvald = "urn:lockernet:problem:ACCESS_CODE_INVALID"
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

// OpenRequestBody is the body of POST /locker/open.
type OpenWithCodeRequest struct {
	LocationID FlexID `json:"location_id"`
	AccessCode string `json:"access_code" maxLength:"32"`
	EndUserID  string `json:"end_user_id,omitempty" maxLength:"128" doc:"Optional: the caller's own id for the person typing the code. The wrong-code limit then counts per end user (10 per 15 minutes), with a ceiling of 100 per key and location across all of them; without it the limit is 10 per key and location."`
}

// CloseRequestBody is the body of POST /locker/close.
type CloseLockerRequest struct {
	LocationID FlexID `json:"location_id"`
	LockerName string `json:"locker_name" minLength:"1" maxLength:"64"`
}

// DoorResult answers an open or a close the gateway settled within the wait.
type DoorResult struct {
	Success    *bool     `json:"success,omitempty" doc:"Open only: whether the gateway opened the door"`
	LockerName string    `json:"locker_name"`
	DoorOpen   bool      `json:"door_open"`
	RequestID  uuid.UUID `json:"request_id"`
	Message    string    `json:"message,omitempty"`
}

// PendingDoor answers an open or a close still pending after the wait.
type PendingDoor struct {
	RequestID uuid.UUID `json:"request_id"`
	Status    string    `json:"status" enum:"pending,dispatched"`
}

type doorOutput struct {
	Status     int
	Location   string `header:"Location"`
	RetryAfter string `header:"Retry-After"`
	Body       any
}

func (s *Server) registerAccessCodes(api huma.API) {
	tags := []string{"App engine: access codes"}
	listOut := func(ctx context.Context, codes []store.AccessCode) (*struct{ Body []AccessCodeBody }, error) {
		out := make([]AccessCodeBody, 0, len(codes))
		for _, c := range codes {
			b, err := s.accessCodeBody(appKey(ctx), c)
			if err != nil {
				return nil, s.mapError(ctx, "access codes", err)
			}
			out = append(out, b)
		}
		return &struct{ Body []AccessCodeBody }{Body: out}, nil
	}

	huma.Register(api, op(huma.Operation{
		OperationID: "list-sub-organization-access-codes", Method: http.MethodGet, Path: "/sub-organization/{sub_organization_id}/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of A Sub-Organization", Description: "Active codes at the sub-organization's locations.", Security: needsAppKey,
	}), func(ctx context.Context, in *struct {
		SubOrganizationID int64 `path:"sub_organization_id"`
	}) (*struct{ Body []AccessCodeBody }, error) {
		k := appKey(ctx)
		ok, err := s.deps.Store.SubOrganizationOf(ctx, k.OrganizationID, in.SubOrganizationID)
		if err != nil {
			return nil, s.mapError(ctx, "sub-organization", err)
		}
		if !ok || (!k.OrgWide() && *k.SubOrganizationID != in.SubOrganizationID) {
			return nil, huma.Error404NotFound("sub-organization: not found")
		}
		codes, err := s.deps.Store.ListAccessCodes(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: &in.SubOrganizationID})
		if err != nil {
			return nil, s.mapError(ctx, "access codes", err)
		}
		return listOut(ctx, codes)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "list-location-access-codes", Method: http.MethodGet, Path: "/locker/all/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of All Lockers", Description: "Active codes of the lockers at a location within the key's scope.", Security: needsAppKey,
	}), func(ctx context.Context, in *struct {
		LocationID string `query:"location_id" required:"true" maxLength:"20"`
	}) (*struct{ Body []AccessCodeBody }, error) {
		k := appKey(ctx)
		loc, err := s.codeLocation(ctx, k, in.LocationID)
		if err != nil {
			return nil, err
		}
		codes, err := s.deps.Store.ListAccessCodes(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: k.SubOrganizationID, LocationID: loc.LocationID})
		if err != nil {
			return nil, s.mapError(ctx, "access codes", err)
		}
		return listOut(ctx, codes)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "list-locker-access-codes", Method: http.MethodGet, Path: "/locker/access-codes", Tags: tags,
		Summary: "Get All Access Codes Of A Locker", Security: needsAppKey,
	}), func(ctx context.Context, in *struct {
		LocationID string `query:"location_id" required:"true" maxLength:"20"`
		LockerName string `query:"locker_name" required:"true" minLength:"1" maxLength:"64"`
	}) (*struct{ Body []AccessCodeBody }, error) {
		k := appKey(ctx)
		loc, err := s.codeLocation(ctx, k, in.LocationID)
		if err != nil {
			return nil, err
		}
		codes, err := s.deps.Store.ListAccessCodes(ctx, store.AccessCodeFilter{OrgID: k.OrganizationID, ScopeSubOrg: k.SubOrganizationID,
			LocationID: loc.LocationID, LockerName: in.LockerName})
		if err != nil {
			return nil, s.mapError(ctx, "access codes", err)
		}
		return listOut(ctx, codes)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "create-access-code", Method: http.MethodPost, Path: "/locker", Tags: tags,
		Summary: "Create Access Code For A Locker",
		Description: "Six random digits, unique among the location's active codes. The code holds its locker through a gateway transaction " +
			"(its id is the code's) until it expires, is removed or (single-use) is used; one active code per locker.",
		Security: needsAppKey,
	}), func(ctx context.Context, in *struct{ Body CreateAccessCodeRequest }) (*struct{ Body AccessCodeBody }, error) {
		return s.createAccessCode(ctx, in.Body)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "open-locker-with-code", Method: http.MethodPost, Path: "/locker/open", Tags: tags,
		Summary: "Open Locker With Access Code",
		Description: fmt.Sprintf("Opens the code's locker through its gateway (a durable gateway request). 200 when the gateway answered within %s; "+
			"202 with request_id while pending (poll GET /locker/requests/{request_id}); 502/503/504 when the gateway rejected it, could not be reached, "+
			"or did not answer. Unknown, used, expired and removed codes all answer 403 ACCESS_CODE_INVALID and touch no door; "+
			"%d wrong codes per key and location (per end user when end_user_id is given, with a ceiling of %d per key and location) within %s answer 429 until the window passes; "+
			"attempts are counted before the code is judged, so simultaneous guesses cannot pass the limit.", codeOpenWait, CodeGuessLimit, CodeGuessCeiling, CodeGuessWindow),
		Security: needsAppKey,
	}), func(ctx context.Context, in *struct{ Body OpenWithCodeRequest }) (*doorOutput, error) {
		return s.openWithCode(ctx, in.Body)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "close-locker", Method: http.MethodPost, Path: "/locker/close", Tags: tags,
		Summary:     "Close Locker",
		Description: "Reads the door sensor through the gateway and records the close; a door still open is reported, not an error.",
		Security:    needsAppKey,
	}), func(ctx context.Context, in *struct{ Body CloseLockerRequest }) (*doorOutput, error) {
		return s.closeLocker(ctx, in.Body)
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "poll-locker-request", Method: http.MethodGet, Path: "/locker/requests/{request_id}", Tags: tags,
		Summary: "The outcome of a pending open or close", Security: needsAppKey,
	}), func(ctx context.Context, in *struct {
		RequestID string `path:"request_id" format:"uuid"`
	}) (*doorOutput, error) {
		id, err := uuid.Parse(in.RequestID)
		if err != nil {
			return nil, huma.Error404NotFound("request: not found")
		}
		k := appKey(ctx)
		r, err := s.deps.Store.GatewayRequest(ctx, k.OrganizationID, id)
		if err != nil || (r.Kind != gatewayreq.KindAccessCodeOpen && r.Kind != gatewayreq.KindAccessCodeClose) {
			return nil, huma.Error404NotFound("request: not found")
		}
		// A sub-organization key sees the requests at its own locations only.
		if k.SubOrganizationID != nil {
			if _, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, r.LocationID); err != nil {
				return nil, huma.Error404NotFound("request: not found")
			}
		}
		name := ""
		if r.Kind == gatewayreq.KindAccessCodeOpen {
			if c, err := s.deps.Store.AccessCode(ctx, r.OrganizationID, codeOfOpen(r)); err == nil {
				name = c.LockerName
			}
		}
		out, err := s.doorAnswer(r, name, r.Kind == gatewayreq.KindAccessCodeOpen)
		if out != nil && out.Status == http.StatusAccepted {
			out.Status = http.StatusOK
		}
		return out, err
	})

	huma.Register(api, op(huma.Operation{
		OperationID: "remove-access-code", Method: http.MethodPatch, Path: "/locker/access-code/{id}", Tags: tags,
		Summary: "Remove Access Code", Description: "The code stops working at once and its locker's hold is released.", Security: needsAppKey,
	}), func(ctx context.Context, in *struct {
		ID   string `path:"id" format:"uuid"`
		Body struct {
			Status string `json:"status" enum:"removed"`
		}
	}) (*struct{ Body AccessCodeBody }, error) {
		k := appKey(ctx)
		id, err := uuid.Parse(in.ID)
		if err != nil {
			return nil, huma.Error404NotFound("access code: not found")
		}
		c, err := s.deps.Store.AccessCode(ctx, k.OrganizationID, id)
		if err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		if _, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, c.LocationID); err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		var changed bool
		var item store.OutboxItem
		err = s.deps.Store.WithTx(ctx, func(tx *store.Store) error {
			var err error
			if c, changed, err = tx.RemoveAccessCode(ctx, k.OrganizationID, id); err != nil || !changed {
				return err
			}
			item, err = enqueue(ctx, tx, outbox.AccessCodeItem(c, workflows.SignalCodeEnded, "removed"))
			return err
		})
		if err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		if changed {
			s.deps.Workflows.Dispatch(item)
		}
		if c.Status != store.CodeRemoved {
			return nil, huma.Error409Conflict("the access code is " + c.Status)
		}
		b, err := s.accessCodeBody(k, c)
		if err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		return &struct{ Body AccessCodeBody }{Body: b}, nil
	})
}

// codeLocation resolves a location id of the key's scope that has a gateway.
func (s *Server) codeLocation(ctx context.Context, k store.AppKey, raw string) (store.Gateway, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || id < 1 {
		return store.Gateway{}, huma.Error422UnprocessableEntity("location_id must be a positive integer",
			&huma.ErrorDetail{Location: "query.location_id", Value: raw, Message: "expected a positive integer"})
	}
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, id)
	if err != nil {
		return store.Gateway{}, s.mapError(ctx, "location", err)
	}
	return gw, nil
}

func (s *Server) codeKeyring() (*keyring.Keyring, error) {
	return keyring.New(s.deps.Keyring.Derive("access-code-encryption"))
}

func codePurpose(id uuid.UUID) string { return "access-code:" + id.String() }

// accessCodeBody shows the code to keys of the scope that made it, masked to others.
func (s *Server) accessCodeBody(k store.AppKey, c store.AccessCode) (AccessCodeBody, error) {
	code := "****" + c.CodeLast2
	if sameScope(k.SubOrganizationID, c.SubOrganizationID) {
		ring, err := s.codeKeyring()
		if err != nil {
			return AccessCodeBody{}, err
		}
		plain, err := ring.Open(codePurpose(c.ID), c.CodeSealed)
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

func newCodeDigits() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

func (s *Server) createAccessCode(ctx context.Context, req CreateAccessCodeRequest) (*struct{ Body AccessCodeBody }, error) {
	k := appKey(ctx)
	expiry, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(req.Expiry))
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("expiry must be an RFC 3339 timestamp",
			&huma.ErrorDetail{Location: "body.expiry", Value: req.Expiry, Message: "expected e.g. 2026-12-01T18:00:00Z"})
	}
	now := time.Now()
	if !expiry.After(now) || expiry.After(now.Add(MaxCodeLifetime)) {
		return nil, huma.Error422UnprocessableEntity("expiry must be in the future and at most one year ahead",
			&huma.ErrorDetail{Location: "body.expiry", Value: req.Expiry})
	}
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, int64(req.LocationID))
	if err != nil {
		return nil, s.mapError(ctx, "location", err)
	}
	_, locker, err := s.deps.Store.GatewayLockerByName(ctx, k.OrganizationID, gw.LocationID, req.LockerName)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, huma.Error404NotFound(fmt.Sprintf("no locker named %q at location %d", req.LockerName, gw.LocationID))
		}
		return nil, s.mapError(ctx, "locker", err)
	}
	if _, err := s.deps.Store.ReleaseLapsedCode(ctx, gw.ID, locker.LockerID); err != nil {
		return nil, s.mapError(ctx, "locker", err)
	}
	if has, err := s.deps.Store.LockerHasActiveCode(ctx, gw.ID, locker.LockerID); err != nil {
		return nil, s.mapError(ctx, "locker", err)
	} else if has {
		return nil, huma.Error409Conflict(fmt.Sprintf("locker %s already has an active access code", locker.Name))
	}

	// Hold the locker first: its gateway transaction carries the code's id.
	codeID := uuid.New()
	body, _ := json.Marshal(map[string]any{"transactionId": codeID.String(), "lockerId": locker.LockerID})
	hold, err := s.gatewayCall(ctx, gw, gatewayreq.KindAccessCodeHold, gatewayreq.ClassWrite, http.MethodPost, "/locker",
		"/transactions", body, codeHoldWait)
	if err != nil {
		return nil, s.mapError(ctx, "locker hold", err)
	}
	held := hold.Terminal() && hold.Status == gatewayreq.StateCompleted && hold.Outcome.HTTPStatus == http.StatusCreated
	code := store.AccessCode{ID: codeID, OrganizationID: k.OrganizationID, SubOrganizationID: k.SubOrganizationID,
		LocationID: gw.LocationID, GatewayID: gw.ID, LockerID: locker.LockerID, LockerName: locker.Name,
		SingleUse: req.SingleUse, ExpiresAt: expiry.UTC(), CreatedByKey: &k.ID, Status: store.CodeActive}
	ring, err := s.codeKeyring()
	if err != nil {
		return nil, s.mapError(ctx, "access code", err)
	}
	var item store.OutboxItem
	for attempt := 0; ; attempt++ {
		digits, err := newCodeDigits()
		if err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		code.CodeSealed, code.CodeHash, code.CodeLast2 = ring.Seal(codePurpose(codeID), []byte(digits)), s.pickupCodeHash(digits), digits[4:]
		if !held {
			// Only the clean-up of a hold that may still land remains: the workflow waits for
			// the hold request to settle and releases whatever it left.
			code.Status = store.CodeRemoved
		}
		err = s.deps.Store.WithTx(ctx, func(tx *store.Store) error {
			created, err := tx.CreateAccessCode(ctx, code)
			if err != nil {
				return err
			}
			code = created
			it := outbox.AccessCodeItem(code, "", nil)
			if !held {
				it = outbox.AccessCodeCleanupItem(code, hold.ID)
			}
			item, err = enqueue(ctx, tx, it)
			return err
		})
		if errors.Is(err, store.ErrCodeTaken) && attempt < 20 {
			continue
		}
		break
	}
	if err != nil {
		if errors.Is(err, store.ErrLockerHasCode) {
			return nil, huma.Error409Conflict(fmt.Sprintf("locker %s already has an active access code", locker.Name))
		}
		return nil, s.mapError(ctx, "access code", err)
	}
	s.deps.Workflows.Dispatch(item)
	if !held {
		return nil, holdFailure(hold, locker.Name)
	}
	b, err := s.accessCodeBody(k, code)
	if err != nil {
		return nil, s.mapError(ctx, "access code", err)
	}
	return &struct{ Body AccessCodeBody }{Body: b}, nil
}

// holdFailure explains why a code's locker could not be held.
func holdFailure(r store.GatewayRequest, lockerName string) error {
	switch {
	case !r.Terminal():
		return huma.Error504GatewayTimeout(fmt.Sprintf("the gateway did not confirm the hold of locker %s in time; no code was made", lockerName))
	case r.Status == gatewayreq.StateCompleted:
		return huma.Error409Conflict(fmt.Sprintf("locker %s cannot be held now (gateway answered %d: in use or out of service)", lockerName, r.Outcome.HTTPStatus))
	}
	return gatewayProblem(r)
}

// gatewayProblem is the problem+json of a gateway request that failed (§6.2 statuses).
func gatewayProblem(r store.GatewayRequest) error {
	status := r.Outcome.HTTPStatus
	if status < 500 {
		status = http.StatusBadGateway
	}
	e := huma.NewError(status, fmt.Sprintf("%s: %s", r.Outcome.ErrorCode, r.Outcome.ErrorMessage))
	if m, ok := e.(*huma.ErrorModel); ok {
		m.Type = "urn:lockernet:problem:" + r.Outcome.ErrorCode
		m.Instance = "urn:lockernet:request:" + r.ID.String()
	}
	return e
}

// gatewayCall records a gateway request, starts its workflow and waits up to wait for its
// outcome; it returns the request as stored (terminal, or still pending).
// holdDoorWaiter takes one of the instance's MaxWaiters slots for a door call that will wait for
// its gateway, before anything is judged or stored: a 503 then changes nothing (no code used,
// no attempt counted, no request stored).
func (s *Server) holdDoorWaiter() (func(), error) {
	release, ok := s.customer.holdWaiter()
	if !ok {
		return nil, huma.ErrorWithHeaders(huma.Error503ServiceUnavailable(
			"too many requests are waiting for gateways on this instance: try again shortly"), http.Header{"Retry-After": {"1"}})
	}
	return release, nil
}

func (s *Server) gatewayCall(ctx context.Context, gw store.Gateway, kind, class, method, path, gatewayPath string, body []byte, wait time.Duration) (store.GatewayRequest, error) {
	row, _, err := s.deps.Store.CreateGatewayRequest(ctx, store.NewGatewayRequest{
		ID: uuid.New(), OrganizationID: gw.OrganizationID, LocationID: gw.LocationID, GatewayID: gw.ID, GatewaySerial: gw.Serial,
		Kind: kind, Class: class, Method: method, Path: path, GatewayPath: gatewayPath, Body: body,
	}, nil)
	if err != nil {
		return store.GatewayRequest{}, err
	}
	run, err := s.ensureGatewayWorkflow(ctx, row)
	if err != nil {
		// Stored: the reconciler starts it once Temporal answers again.
		s.logger.WarnContext(ctx, "start gateway request workflow", "requestId", row.ID, "err", err)
		return row, nil
	}
	if _, _, err := s.awaitGatewayResult(ctx, run, row, wait); err != nil {
		return store.GatewayRequest{}, err
	}
	return s.deps.Store.GatewayRequest(ctx, row.OrganizationID, row.ID)
}

func (s *Server) openWithCode(ctx context.Context, req OpenWithCodeRequest) (*doorOutput, error) {
	leave, err := s.holdDoorWaiter()
	if err != nil {
		return nil, err
	}
	defer leave()
	k := appKey(ctx)
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, int64(req.LocationID))
	if err != nil {
		return nil, s.mapError(ctx, "location", err)
	}
	// The attempt is counted before the code is judged (atomically: of simultaneous guesses at
	// most the limit are judged), and uncounted when it was not a wrong guess.
	var endUser *string
	if u := strings.TrimSpace(req.EndUserID); u != "" {
		endUser = &u
	}
	att, err := s.deps.Store.ClaimCodeAttempt(ctx, k.ID, gw.LocationID, endUser,
		store.CodeLimits{Window: CodeGuessWindow, PerEndUser: CodeGuessLimit, Ceiling: CodeGuessCeiling})
	if err != nil {
		return nil, s.mapError(ctx, "access code", err)
	}
	if !att.Allowed {
		retry := max(int(time.Until(att.RetryAt).Seconds())+1, 1)
		who := "at this location"
		if att.PerEndUser && endUser != nil {
			who = "by this end user at this location"
		}
		return nil, huma.ErrorWithHeaders(huma.Error429TooManyRequests(
			fmt.Sprintf("%d wrong access codes %s within %s: try again in %d s", att.Count, who, CodeGuessWindow, retry)),
			http.Header{"Retry-After": {strconv.Itoa(retry)}})
	}
	counted := true
	release := func() {
		if counted {
			counted = false
			if err := s.deps.Store.ReleaseCodeAttempt(context.WithoutCancel(ctx), att.ID); err != nil {
				s.logger.WarnContext(ctx, "release access code attempt", "err", err)
			}
		}
	}
	invalid := func(count bool) error {
		if !count {
			release()
		}
		e := huma.Error403Forbidden("ACCESS_CODE_INVALID: the access code is not valid at this location")
		if m, ok := e.(*huma.ErrorModel); ok {
			m.Type = problemCodeInvald
		}
		return e
	}
	digits, ok := parseAccessCode(req.AccessCode)
	if !ok {
		return nil, invalid(true)
	}
	code, err := s.deps.Store.ActiveAccessCodeByHash(ctx, gw.LocationID, s.pickupCodeHash(digits))
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid(true)
	}
	if err != nil {
		release()
		return nil, s.mapError(ctx, "access code", err)
	}
	release() // a code that exists is not a wrong guess, even if a concurrent open wins it
	if code.SingleUse {
		// Consumed before the door is asked to open: of concurrent opens, one wins.
		won, err := s.deps.Store.UseSingleUseCode(ctx, code.ID)
		if err != nil {
			return nil, s.mapError(ctx, "access code", err)
		}
		if !won {
			return nil, invalid(false)
		}
	} else if err := s.deps.Store.TouchAccessCode(ctx, code.ID); err != nil {
		return nil, s.mapError(ctx, "access code", err)
	}
	r, err := s.gatewayCall(ctx, gw, gatewayreq.KindAccessCodeOpen, gatewayreq.ClassHardware, http.MethodPost, "/locker/open",
		"/transactions/"+code.ID.String()+"/open", nil, codeOpenWait)
	if err != nil {
		return nil, s.mapError(ctx, "open", err)
	}
	return s.doorAnswer(r, code.LockerName, true)
}

func (s *Server) closeLocker(ctx context.Context, req CloseLockerRequest) (*doorOutput, error) {
	leave, err := s.holdDoorWaiter()
	if err != nil {
		return nil, err
	}
	defer leave()
	k := appKey(ctx)
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, int64(req.LocationID))
	if err != nil {
		return nil, s.mapError(ctx, "location", err)
	}
	_, locker, err := s.deps.Store.GatewayLockerByName(ctx, k.OrganizationID, gw.LocationID, req.LockerName)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, huma.Error404NotFound(fmt.Sprintf("no locker named %q at location %d", req.LockerName, gw.LocationID))
		}
		return nil, s.mapError(ctx, "locker", err)
	}
	r, err := s.gatewayCall(ctx, gw, gatewayreq.KindAccessCodeClose, gatewayreq.ClassRead, http.MethodGet, "/locker/close",
		"/lockers/"+strconv.Itoa(locker.LockerID), nil, codeCloseWait)
	if err != nil {
		return nil, s.mapError(ctx, "close", err)
	}
	return s.doorAnswer(r, locker.Name, false)
}

// doorAnswer turns a gateway request of an open or close into the app engine's answer.
func (s *Server) doorAnswer(r store.GatewayRequest, lockerName string, open bool) (*doorOutput, error) {
	if !r.Terminal() {
		return &doorOutput{Status: http.StatusAccepted, Location: "/locker/requests/" + r.ID.String(), RetryAfter: "1",
			Body: PendingDoor{RequestID: r.ID, Status: r.Status}}, nil
	}
	if r.Status != gatewayreq.StateCompleted {
		return nil, gatewayProblem(r)
	}
	var op struct {
		Success  *bool  `json:"success"`
		DoorOpen bool   `json:"doorOpen"`
		Message  string `json:"message"`
	}
	_ = json.Unmarshal(r.Outcome.Body, &op)
	res := DoorResult{LockerName: lockerName, DoorOpen: op.DoorOpen, RequestID: r.ID, Message: op.Message}
	if open {
		ok := r.Outcome.HTTPStatus/100 == 2 && (op.Success == nil || *op.Success)
		res.Success = &ok
	} else if r.Outcome.HTTPStatus != http.StatusOK {
		return nil, huma.Error409Conflict(fmt.Sprintf("the gateway answered %d reading locker %s", r.Outcome.HTTPStatus, lockerName))
	}
	return &doorOutput{Status: http.StatusOK, Body: res}, nil
}

// codeOfOpen is the code whose hold an access-code open request opens.
func codeOfOpen(r store.GatewayRequest) uuid.UUID {
	parts := strings.Split(strings.Trim(r.GatewayPath, "/"), "/")
	if len(parts) < 2 {
		return uuid.Nil
	}
	id, _ := uuid.Parse(parts[1])
	return id
}
