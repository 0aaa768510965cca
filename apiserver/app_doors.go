package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// Opening and closing a locker through the app engine (DESIGN §5): each is a gateway request
// run by the gateway-request executor (internal/gatewayexec) and answered in the app
// engine's shape: 200 within the wait, else 202 and a request to poll.

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

// holdDoorWaiter takes one of the instance's MaxWaiters slots for a door call that will wait for
// its gateway, before anything is judged or stored: a 503 then changes nothing (no code used,
// no attempt counted, no request stored).
func (s *Server) holdDoorWaiter() (func(), error) {
	release, ok := s.requests.HoldWaiter()
	if !ok {
		return nil, errGatewaysBusy
	}
	return release, nil
}

// keyLocation is the gateway location id of the app key's scope; its error is the answer.
func (s *Server) keyLocation(ctx context.Context, id int64) (store.Gateway, error) {
	k := appKey(ctx)
	gw, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, id)
	if err != nil {
		return store.Gateway{}, s.appError(ctx, "location", err)
	}
	return gw, nil
}

// lockerNamed is the gateway locker named name at gw's location; its error is the answer.
func (s *Server) lockerNamed(ctx context.Context, gw store.Gateway, name string) (store.GatewayLocker, error) {
	_, locker, err := s.deps.Store.GatewayLockerByName(ctx, appKey(ctx).OrganizationID, gw.LocationID, name)
	if err != nil {
		return store.GatewayLocker{}, s.appError(ctx, "locker", noLockerNamed(err, name, gw.LocationID))
	}
	return locker, nil
}

// doorAt begins a door call of the app engine at a location of the key's scope: a place
// among the instance's door waiters (leave gives it back) and the location's gateway; its
// error is the answer.
func (s *Server) doorAt(ctx context.Context, locationID FlexID) (gw store.Gateway, leave func(), err error) {
	if leave, err = s.holdDoorWaiter(); err != nil {
		return gw, nil, s.appError(ctx, "door", err)
	}
	if gw, err = s.keyLocation(ctx, int64(locationID)); err != nil {
		leave()
		return gw, nil, err
	}
	return gw, leave, nil
}

// gatewayCall runs one of the app engine's gateway requests (kind, class, paths, body and
// subject of r) at gw: it stores the request, starts its workflow and waits up to wait for
// its outcome; it returns the request as it stands then (terminal, or still pending).
func (s *Server) gatewayCall(ctx context.Context, gw store.Gateway, r store.NewGatewayRequest, wait time.Duration) (store.GatewayRequest, error) {
	r.ID, r.OrganizationID, r.LocationID, r.GatewayID, r.GatewaySerial = uuid.New(), gw.OrganizationID, gw.LocationID, gw.ID, gw.Serial
	row, _, err := s.requests.Submit(ctx, r, nil)
	if err != nil {
		return store.GatewayRequest{}, err
	}
	return s.requests.Await(ctx, row, wait, false)
}

// openWithCode answers POST /locker/open.
func (s *Server) openWithCode(ctx context.Context, in *struct{ Body OpenWithCodeRequest }) (*doorOutput, error) {
	req := in.Body
	gw, leave, err := s.doorAt(ctx, req.LocationID)
	if err != nil {
		return nil, err
	}
	defer leave()
	k := appKey(ctx)
	// The attempt is counted before the code is judged (atomically: of simultaneous guesses at
	// most the limit are judged), and uncounted when it was not a wrong guess.
	var endUser *string
	if u := strings.TrimSpace(req.EndUserID); u != "" {
		endUser = &u
	}
	att, err := s.deps.Store.ClaimCodeAttempt(ctx, k.ID, gw.LocationID, endUser,
		store.CodeLimits{Window: CodeGuessWindow, PerEndUser: CodeGuessLimit, Ceiling: CodeGuessCeiling})
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	if !att.Allowed {
		retry := max(int(time.Until(att.RetryAt).Seconds())+1, 1)
		who := "at this location"
		if att.PerEndUser && endUser != nil {
			who = "by this end user at this location"
		}
		return nil, s.appError(ctx, "access code", &attemptsLimitedError{retryAfter: retry,
			msg: fmt.Sprintf("%d wrong access codes %s within %s: try again in %d s", att.Count, who, CodeGuessWindow, retry)})
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
		return s.appError(ctx, "access code", errCodeInvalid)
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
		return nil, s.appError(ctx, "access code", err)
	}
	release() // a code that exists is not a wrong guess, even if a concurrent open wins it
	if code.SingleUse {
		// Consumed before the door is asked to open: of concurrent opens, one wins.
		won, err := s.deps.Store.UseSingleUseCode(ctx, code.ID)
		if err != nil {
			return nil, s.appError(ctx, "access code", err)
		}
		if !won {
			return nil, invalid(false)
		}
	} else if err := s.deps.Store.TouchAccessCode(ctx, code.ID); err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	r, err := s.gatewayCall(ctx, gw, store.NewGatewayRequest{Kind: gatewayreq.KindAccessCodeOpen, Class: gatewayreq.ClassHardware,
		Method: http.MethodPost, Path: "/locker/open", GatewayPath: "/transactions/" + code.ID.String() + "/open",
		Subject: code.ID.String()}, codeOpenWait)
	if err != nil {
		return nil, s.appError(ctx, "open", err)
	}
	return s.doorAnswer(ctx, r, code.LockerName, true)
}

// closeLocker answers POST /locker/close.
func (s *Server) closeLocker(ctx context.Context, in *struct{ Body CloseLockerRequest }) (*doorOutput, error) {
	req := in.Body
	gw, leave, err := s.doorAt(ctx, req.LocationID)
	if err != nil {
		return nil, err
	}
	defer leave()
	locker, err := s.lockerNamed(ctx, gw, req.LockerName)
	if err != nil {
		return nil, err
	}
	r, err := s.gatewayCall(ctx, gw, store.NewGatewayRequest{Kind: gatewayreq.KindAccessCodeClose, Class: gatewayreq.ClassRead,
		Method: http.MethodGet, Path: "/locker/close", GatewayPath: "/lockers/" + strconv.Itoa(locker.LockerID),
		Subject: strconv.Itoa(locker.LockerID)}, codeCloseWait)
	if err != nil {
		return nil, s.appError(ctx, "close", err)
	}
	return s.doorAnswer(ctx, r, locker.Name, false)
}

// pollDoorRequest answers GET /locker/requests/{request_id}: the outcome of an open or a
// close that was still pending after its wait.
func (s *Server) pollDoorRequest(ctx context.Context, in *struct {
	RequestID string `path:"request_id" format:"uuid"`
}) (*doorOutput, error) {
	id, err := uuid.Parse(in.RequestID)
	if err != nil {
		return nil, s.appError(ctx, "request", errNotFound("request: not found"))
	}
	k := appKey(ctx)
	r, err := s.requests.State(ctx, k.OrganizationID, id)
	if err != nil || (r.Kind != gatewayreq.KindAccessCodeOpen && r.Kind != gatewayreq.KindAccessCodeClose) {
		return nil, s.appError(ctx, "request", errNotFound("request: not found"))
	}
	// A sub-organization key sees the requests at its own locations only.
	if k.SubOrganizationID != nil {
		if _, err := s.deps.Store.GatewayLocationInScope(ctx, k.OrganizationID, k.SubOrganizationID, r.LocationID); err != nil {
			return nil, s.appError(ctx, "request", errNotFound("request: not found"))
		}
	}
	// Still pending: the workflow's query says where it stands (bounded), else the row.
	r = s.requests.Live(ctx, r).GatewayRequest
	name := ""
	if r.Kind == gatewayreq.KindAccessCodeOpen {
		// The open's subject is its code, whose hold it opened.
		if codeID, err := uuid.Parse(r.Subject); err == nil {
			if c, err := s.deps.Store.AccessCode(ctx, r.OrganizationID, codeID); err == nil {
				name = c.LockerName
			}
		}
	}
	out, err := s.doorAnswer(ctx, r, name, r.Kind == gatewayreq.KindAccessCodeOpen)
	if out != nil && out.Status == http.StatusAccepted {
		out.Status = http.StatusOK
	}
	return out, err
}

// doorAnswer turns a gateway request of an open or close into the app engine's answer.
func (s *Server) doorAnswer(ctx context.Context, r store.GatewayRequest, lockerName string, open bool) (*doorOutput, error) {
	if !r.Terminal() {
		return &doorOutput{Status: http.StatusAccepted, Location: "/locker/requests/" + r.ID.String(), RetryAfter: "1",
			Body: PendingDoor{RequestID: r.ID, Status: r.Status}}, nil
	}
	if r.Status != gatewayreq.StateCompleted {
		return nil, s.appError(ctx, "door", &gatewayFailedError{r: r})
	}
	door := gatewayreq.ReadDoor(r.Outcome)
	res := DoorResult{LockerName: lockerName, DoorOpen: door.DoorOpen, RequestID: r.ID, Message: door.Message}
	if open {
		ok := gatewayreq.Opened(r.Outcome)
		res.Success = &ok
	} else if r.Outcome.HTTPStatus != http.StatusOK {
		return nil, s.appError(ctx, "door", errConflict(fmt.Sprintf("the gateway answered %d reading locker %s", r.Outcome.HTTPStatus, lockerName)))
	}
	return &doorOutput{Status: http.StatusOK, Body: res}, nil
}
