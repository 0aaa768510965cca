package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/lockernet/lockernet/internal/store"
)

// The tower API's error table (DESIGN §4): every error its handlers return, and the
// problem+json a caller sees.
func TestTowerErrors(t *testing.T) {
	t.Parallel()
	s := quietServer()
	runMapperCases(t, func(err error) error { return s.towerError(context.Background(), "reservation", err) }, []mapperCase{
		{name: "store not found names the operation", err: fmt.Errorf("get reservation: %w", store.ErrNotFound),
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"reservation: not found"}`},
		{name: "store conflict names the operation", err: store.ErrConflict,
			status: http.StatusConflict, body: `{"title":"Conflict","status":409,"detail":"reservation: conflict"}`},
		{name: "locker status conflict says why", err: &store.StatusConflictError{Msg: "locker 3 is occupied"},
			status: http.StatusConflict, body: `{"title":"Conflict","status":409,"detail":"locker 3 is occupied"}`},
		{name: "text Postgres cannot store", err: store.ErrInvalidInput,
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"reservation: text with a NUL character or bytes that are not UTF-8"}`},
		{name: "overloaded", err: store.ErrOverloaded,
			status: http.StatusServiceUnavailable, body: `{"title":"Service Unavailable","status":503,"detail":"the service is overloaded: try again shortly"}`,
			header: map[string]string{"Retry-After": "1"}},
		{name: "client went away", err: context.Canceled,
			status: 499, body: `{"status":499,"detail":"client closed the request"}`},
		{name: "unexpected errors are not echoed", err: errors.New("dial tcp 10.0.0.5:5432: connection refused"),
			status: http.StatusInternalServerError, body: `{"title":"Internal Server Error","status":500,"detail":"internal error"}`},
		{name: "not found", err: errNotFound("no location within 20 km"),
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"no location within 20 km"}`},
		{name: "conflict", err: errConflict("no available locker of that type at the location"),
			status: http.StatusConflict, body: `{"title":"Conflict","status":409,"detail":"no available locker of that type at the location"}`},
		{name: "forbidden", err: errForbidden("the client is not granted the scope tower_access"),
			status: http.StatusForbidden, body: `{"title":"Forbidden","status":403,"detail":"the client is not granted the scope tower_access"}`},
		{name: "token missing", err: errUnauthenticated("missing bearer token"),
			status: http.StatusUnauthorized, body: `{"title":"Unauthorized","status":401,"detail":"missing bearer token"}`},
		{name: "credentials cannot be checked now", err: errAuthUnavailable,
			status: http.StatusServiceUnavailable, body: `{"title":"Service Unavailable","status":503,"detail":"try again later"}`,
			header: map[string]string{"Retry-After": "1"}},
		{name: "past the client's rate limit", err: rateLimited(7),
			status: http.StatusTooManyRequests, body: `{"title":"Too Many Requests","status":429,"detail":"rate limit exceeded: try again in 7 s"}`,
			header: map[string]string{"Retry-After": "7"}},
		{name: "invalid input", err: invalidInput("unknown locker type 9"),
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"unknown locker type 9"}`},
		{name: "invalid field echoes the value", err: invalidField("malformed point", "query.start", "91,0", "latitude must be within [-90, 90]"),
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"malformed point",
				"errors":[{"message":"latitude must be within [-90, 90]","location":"query.start","value":"91,0"}]}`},
		{name: "invalid field without a value", err: invalidField("batch 0: malformed", "body[0]", nil, "short payload"),
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"batch 0: malformed",
				"errors":[{"message":"short payload","location":"body[0]"}]}`},
	})
}
