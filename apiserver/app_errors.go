package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// The app engine's own refusals (DESIGN §5); the shared ones are in errors.go.

// errCodeInvalid: an unknown, used, expired or removed access code, all alike.
var errCodeInvalid = errors.New("the access code is not valid at this location")

// noLockerNamed names the locker a lookup by name did not find.
func noLockerNamed(err error, name string, locationID int64) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound(fmt.Sprintf("no locker named %q at location %d", name, locationID))
	}
	return err
}

// errEndpointDisabled: a webhook endpoint that is disabled sends nothing, tests included.
var errEndpointDisabled = errConflict("the endpoint is disabled: enable it first")

// gatewayFailedError: the gateway request of an open or close ended without the gateway's
// answer (rejected, not dispatched, or unanswered).
type gatewayFailedError struct{ r store.GatewayRequest }

func (e *gatewayFailedError) Error() string {
	return fmt.Sprintf("gateway request %s: %s", e.r.ID, e.r.Outcome.ErrorCode)
}

// holdFailedError: the gateway transaction that holds an access code's locker was not made.
type holdFailedError struct {
	r      store.GatewayRequest
	locker string
}

func (e *holdFailedError) Error() string { return "hold locker " + e.locker + ": " + e.r.Status }

// appError is the app engine API's error mapper: RFC 9457 problem+json, with a type URN
// where a client tells refusals apart by it (ACCESS_CODE_INVALID, a gateway's error code).
func (s *Server) appError(ctx context.Context, op string, err error) error {
	var (
		failed *gatewayFailedError
		hold   *holdFailedError
	)
	switch {
	case errors.Is(err, errCodeInvalid):
		e := huma.Error403Forbidden("ACCESS_CODE_INVALID: " + errCodeInvalid.Error())
		if m, ok := e.(*huma.ErrorModel); ok {
			m.Type = problemCodeInvalid
		}
		return e
	case errors.Is(err, errGatewaysBusy):
		return tryAgainShortly(huma.Error503ServiceUnavailable(errGatewaysBusy.Error() + ": try again shortly"))
	case errors.As(err, &hold):
		return holdProblem(hold.r, hold.locker)
	case errors.As(err, &failed):
		return gatewayProblem(failed.r)
	}
	return s.problem(ctx, op, err)
}

// holdProblem explains why a code's locker could not be held.
func holdProblem(r store.GatewayRequest, lockerName string) error {
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
