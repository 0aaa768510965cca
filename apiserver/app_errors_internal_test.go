package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// The app engine API's error table (DESIGN §5): every error its handlers return, and the
// problem+json a caller sees.
func TestAppErrors(t *testing.T) {
	t.Parallel()
	s := quietServer()
	id := uuid.MustParse("0193b0a4-8c1e-7c6a-9b1e-2f4d5a6b7c8d")
	done := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	finished := func(status string, httpStatus int, code, msg string) store.GatewayRequest {
		r := store.GatewayRequest{Status: status, CompletedAt: &done,
			Outcome: gatewayreq.Outcome{Status: status, HTTPStatus: httpStatus, ErrorCode: code, ErrorMessage: msg}}
		r.ID = id
		return r
	}
	pending := store.GatewayRequest{Status: gatewayreq.StateDispatched}
	pending.ID = id
	runMapperCases(t, func(err error) error { return s.appError(context.Background(), "access code", err) }, []mapperCase{
		{name: "invalid access code", err: errCodeInvalid,
			status: http.StatusForbidden, body: `{"type":"urn:lockernet:problem:ACCESS_CODE_INVALID","title":"Forbidden","status":403,
				"detail":"ACCESS_CODE_INVALID: the access code is not valid at this location"}`},
		{name: "too many wrong codes", err: &attemptsLimitedError{retryAfter: 42, msg: "10 wrong access codes at this location within 15m0s: try again in 42 s"},
			status: http.StatusTooManyRequests, body: `{"title":"Too Many Requests","status":429,"detail":"10 wrong access codes at this location within 15m0s: try again in 42 s"}`,
			header: map[string]string{"Retry-After": "42"}},
		{name: "wrong keys from the address", err: tooManyFailures("invalid API keys", 30),
			status: http.StatusTooManyRequests, body: `{"title":"Too Many Requests","status":429,"detail":"too many invalid API keys from this address: try again in 30 s"}`,
			header: map[string]string{"Retry-After": "30"}},
		{name: "key cannot be checked now", err: fmt.Errorf("%w: %w", errAuthUnavailable, errors.New("dial tcp: refused")),
			status: http.StatusServiceUnavailable, body: `{"title":"Service Unavailable","status":503,"detail":"try again later"}`,
			header: map[string]string{"Retry-After": "1"}},
		{name: "instance holds too many waiters", err: errGatewaysBusy,
			status: http.StatusServiceUnavailable, body: `{"title":"Service Unavailable","status":503,"detail":"too many requests are waiting for gateways on this instance: try again shortly"}`,
			header: map[string]string{"Retry-After": "1"}},
		{name: "gateway rejected the open", err: &gatewayFailedError{r: finished(gatewayreq.StateRejected, http.StatusBadGateway, gatewayreq.CodeGatewayRejected, "the gateway refused the request")},
			status: http.StatusBadGateway, body: `{"type":"urn:lockernet:problem:GATEWAY_REJECTED","title":"Bad Gateway","status":502,
				"detail":"GATEWAY_REJECTED: the gateway refused the request","instance":"urn:lockernet:request:` + id.String() + `"}`},
		{name: "gateway never answered", err: &gatewayFailedError{r: finished(gatewayreq.StateGatewayUnresponsive, http.StatusGatewayTimeout, gatewayreq.CodeGatewayUnresponsive, "no answer")},
			status: http.StatusGatewayTimeout, body: `{"type":"urn:lockernet:problem:GATEWAY_UNRESPONSIVE","title":"Gateway Timeout","status":504,
				"detail":"GATEWAY_UNRESPONSIVE: no answer","instance":"urn:lockernet:request:` + id.String() + `"}`},
		{name: "hold still pending", err: &holdFailedError{r: pending, locker: "A1"},
			status: http.StatusGatewayTimeout, body: `{"title":"Gateway Timeout","status":504,"detail":"the gateway did not confirm the hold of locker A1 in time; no code was made"}`},
		{name: "hold refused by the gateway", err: &holdFailedError{r: finished(gatewayreq.StateCompleted, http.StatusConflict, "", ""), locker: "A1"},
			status: http.StatusConflict, body: `{"title":"Conflict","status":409,"detail":"locker A1 cannot be held now (gateway answered 409: in use or out of service)"}`},
		{name: "hold not dispatched", err: &holdFailedError{r: finished(gatewayreq.StateDispatchFailed, http.StatusServiceUnavailable, gatewayreq.CodeDispatchFailed, "no route"), locker: "A1"},
			status: http.StatusServiceUnavailable, body: `{"type":"urn:lockernet:problem:DISPATCH_FAILED","title":"Service Unavailable","status":503,
				"detail":"DISPATCH_FAILED: no route","instance":"urn:lockernet:request:` + id.String() + `"}`},
		{name: "no locker of that name", err: noLockerNamed(fmt.Errorf("find locker: %w", store.ErrNotFound), "B7", 4),
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"no locker named \"B7\" at location 4"}`},
		{name: "webhook endpoint disabled", err: errEndpointDisabled,
			status: http.StatusConflict, body: `{"title":"Conflict","status":409,"detail":"the endpoint is disabled: enable it first"}`},
		{name: "admin key needed", err: errForbidden("only an organization admin key may create keys"),
			status: http.StatusForbidden, body: `{"title":"Forbidden","status":403,"detail":"only an organization admin key may create keys"}`},
		{name: "bad query value", err: invalidField("page_size must be an integer from 1 to 100", "query.page_size", "0", "expected an integer from 1 to 100"),
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"page_size must be an integer from 1 to 100",
				"errors":[{"message":"expected an integer from 1 to 100","location":"query.page_size","value":"0"}]}`},
		{name: "store not found names the operation", err: store.ErrNotFound,
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"access code: not found"}`},
		{name: "overloaded", err: store.ErrOverloaded,
			status: http.StatusServiceUnavailable, body: `{"title":"Service Unavailable","status":503,"detail":"the service is overloaded: try again shortly"}`,
			header: map[string]string{"Retry-After": "1"}},
		{name: "unexpected errors are not echoed", err: errors.New("keyring: no key"),
			status: http.StatusInternalServerError, body: `{"title":"Internal Server Error","status":500,"detail":"internal error"}`},
	})
}
