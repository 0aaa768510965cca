package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asAPIError is the local API's one error mapper: each error a handler returns, and the
// status, code, message and details its caller sees (DESIGN §7).
func TestAsAPIError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		err     error
		known   bool
		status  int
		code    string
		message string
		details map[string]any
	}{
		{name: "api error as is", err: newAPIError(CodeLockerNotFound, "no locker 7", nil),
			known: true, status: http.StatusNotFound, code: CodeLockerNotFound, message: "no locker 7", details: map[string]any{}},
		{name: "wrapped api error", err: fmt.Errorf("open locker: %w", newAPIError(CodeLockerOutOfService, "locker 3 is out of service", map[string]any{"lockerId": 3})),
			known: true, status: http.StatusConflict, code: CodeLockerOutOfService, message: "locker 3 is out of service", details: map[string]any{"lockerId": 3}},
		{name: "validation names the field", err: validationError("lockerTypeId", "must be a positive integer"),
			known: true, status: http.StatusUnprocessableEntity, code: CodeValidation, message: "lockerTypeId: must be a positive integer",
			details: map[string]any{"field": "lockerTypeId", "reason": "must be a positive integer"}},
		{name: "body too large", err: tooLarge(),
			known: true, status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge, message: "the request body is larger than 65536 bytes",
			details: map[string]any{"limit": maxBody}},
		{name: "unknown error is not echoed", err: errors.New("open /var/lib/gateway/state.db: permission denied"),
			known: false, status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", details: map[string]any{}},
		{name: "cancelled context is internal", err: context.Canceled,
			known: false, status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", details: map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ae, known := asAPIError(tc.err)
			assert.Equal(t, tc.known, known)
			assert.Equal(t, tc.status, ae.status())
			assert.Equal(t, tc.code, ae.code)
			assert.Equal(t, tc.message, ae.message)
			assert.Equal(t, tc.details, ae.details)
		})
	}
}

// errorAnswer is what a client sees when a handler of the local API fails with code: the
// handler's error goes through the one writer (Server.serve) over HTTP.
func errorAnswer(t *testing.T, code string) (status int, contentType string, body ErrorBody) {
	t.Helper()
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(s.serve(func(http.ResponseWriter, *http.Request) error {
		return newAPIError(code, "what went wrong", map[string]any{"lockerId": 7})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// TestErrorAnswersAsDocumented: every error code the published OpenAPI document names under
// a response ("CODE: meaning" in its description) is answered with that response's status,
// and every answer is the Error body with the code, the message and the details. The
// requests that reach each code are driven over HTTP by the API's own tests (lockers_test,
// transactions_test, idempotency_test, system_test, open_test).
func TestErrorAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	raw, err := OpenAPIJSON()
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string `json:"description"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	named := regexp.MustCompile(`(?:^|; )([A-Z][A-Z_]+):`)
	documented := map[string]int{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for st, resp := range op.Responses {
				for _, m := range named.FindAllStringSubmatch(resp.Description, -1) {
					status, err := strconv.Atoi(st)
					require.NoError(t, err, "%s %s: response %q names %s", method, path, st, m[1])
					if prev, ok := documented[m[1]]; ok {
						require.Equal(t, prev, status, "%s is documented under two statuses", m[1])
					}
					documented[m[1]] = status
				}
			}
		}
	}
	require.NotEmpty(t, documented)
	for code, want := range documented {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, codeStatus, code, "the document names a code the API does not declare")
			status, ct, body := errorAnswer(t, code)
			assert.Equal(t, want, status)
			assert.Equal(t, "application/json", ct)
			assert.Equal(t, ErrorBody{Error: code, Message: "what went wrong", Timestamp: body.Timestamp,
				Details: map[string]any{"lockerId": float64(7)}}, body)
			assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, body.Timestamp)
		})
	}
}

// TestErrorAnswersAreErrors: every declared code answers a client error (4xx) or a server
// error (5xx), never a success; a code the API does not declare answers 500 with its code.
func TestErrorAnswersAreErrors(t *testing.T) {
	t.Parallel()
	for code := range codeStatus {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			status, _, body := errorAnswer(t, code)
			assert.GreaterOrEqual(t, status, 400)
			assert.Less(t, status, 600)
			assert.Equal(t, code, body.Error)
		})
	}
	status, _, body := errorAnswer(t, "SOMETHING_NEW")
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.Equal(t, "SOMETHING_NEW", body.Error)
}
