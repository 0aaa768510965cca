package apiserver

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/lockernet/lockernet/internal/store"
)

// The mobile SDK API's error table (DESIGN §4.8): every error its handlers return, and the
// problem+json a caller sees.
func TestSDKErrors(t *testing.T) {
	t.Parallel()
	s := quietServer()
	runMapperCases(t, func(err error) error { return s.sdkError(context.Background(), "tower", err) }, []mapperCase{
		{name: "unknown client or wrong password", err: errBadCredentials,
			status: http.StatusUnauthorized, body: `{"title":"Unauthorized","status":401,"detail":"unknown username or wrong password"}`},
		{name: "credentials missing", err: errUnauthenticated("username and password are required"),
			status: http.StatusUnauthorized, body: `{"title":"Unauthorized","status":401,"detail":"username and password are required"}`},
		{name: "claim not allowed", err: errForbidden("this client may not open admin sessions (allowed: user)"),
			status: http.StatusForbidden, body: `{"title":"Forbidden","status":403,"detail":"this client may not open admin sessions (allowed: user)"}`},
		{name: "no configuration yet", err: errNotFound("tower T1 has no configuration yet: it has no lockers"),
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"tower T1 has no configuration yet: it has no lockers"}`},
		{name: "NUL in a text field", err: invalidField("reason must not contain NUL characters", "body.reason", nil, "contains a NUL character"),
			status: http.StatusUnprocessableEntity, body: `{"title":"Unprocessable Entity","status":422,"detail":"reason must not contain NUL characters",
				"errors":[{"message":"contains a NUL character","location":"body.reason"}]}`},
		{name: "unknown tower", err: store.ErrNotFound,
			status: http.StatusNotFound, body: `{"title":"Not Found","status":404,"detail":"tower: not found"}`},
		{name: "unexpected errors are not echoed", err: errors.New("sign: no key"),
			status: http.StatusInternalServerError, body: `{"title":"Internal Server Error","status":500,"detail":"internal error"}`},
	})
}
