package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's error table (DESIGN §6): every error its handlers and its key
// middleware return, and the status, code, message, details and headers a caller sees.
func TestCloudErrors(t *testing.T) {
	t.Parallel()
	s := quietServer()
	cases := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
		details map[string]any
		headers map[string]string
	}{
		{name: "no such location", err: &locationNotFoundError{locationID: 42},
			status: http.StatusNotFound, code: "LOCATION_NOT_FOUND", message: "no location with a gateway has this id",
			details: map[string]any{"locationId": float64(42)}},
		{name: "no such request", err: errRequestNotFound,
			status: http.StatusNotFound, code: "REQUEST_NOT_FOUND", message: "no request with this id", details: map[string]any{}},
		{name: "idempotency key reused", err: &idempotencyKeyReusedError{key: "k-1"},
			status: http.StatusUnprocessableEntity, code: "IDEMPOTENCY_KEY_REUSED",
			message: "this Idempotency-Key was used for a request with another method, path or body",
			details: map[string]any{"idempotencyKey": "k-1"}},
		{name: "body that does not decode", err: errBodyInvalid,
			status: http.StatusUnprocessableEntity, code: "VALIDATION_FAILED", message: "the request body is not valid", details: map[string]any{}},
		{name: "key missing or not valid", err: errUnauthenticated("the API key is not valid"),
			status: http.StatusUnauthorized, code: "UNAUTHORIZED", message: "the API key is not valid", details: map[string]any{}},
		{name: "rate limited", err: &rateLimitedError{limit: 600, retryAfterSeconds: 3},
			status: http.StatusTooManyRequests, code: "RATE_LIMITED", message: "the API key exceeded its rate limit",
			details: map[string]any{"limit": float64(600), "windowSeconds": float64(60), "retryAfterSeconds": float64(3)},
			headers: map[string]string{"Retry-After": "3"}},
		{name: "instance holds too many waiters", err: errGatewaysBusy,
			status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE",
			message: "too many requests are waiting for gateways on this instance: try again shortly, or send Prefer: respond-async",
			details: map[string]any{}, headers: map[string]string{"Retry-After": "1"}},
		{name: "key check unavailable", err: fmt.Errorf("%w: %w", errAuthUnavailable, errors.New("dial tcp: refused")),
			status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "try again shortly",
			details: map[string]any{}, headers: map[string]string{"Retry-After": "1"}},
		{name: "overloaded", err: fmt.Errorf("create gateway request: %w", store.ErrOverloaded),
			status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "the service is overloaded: try again shortly",
			details: map[string]any{}, headers: map[string]string{"Retry-After": "1"}},
		{name: "client went away", err: context.Canceled,
			status: 499, code: "CLIENT_CLOSED_REQUEST", message: "client closed the request", details: map[string]any{}},
		{name: "unexpected errors are not echoed", err: errors.New("scan gateway: column missing"),
			status: http.StatusInternalServerError, code: "INTERNAL_ERROR", message: "internal error", details: map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := s.cloudFailure(context.Background(), "op", tc.err)
			var ce *CloudError
			require.ErrorAs(t, got, &ce)
			assert.Equal(t, tc.status, ce.GetStatus())
			b, err := json.Marshal(ce)
			require.NoError(t, err)
			var body map[string]any
			require.NoError(t, json.Unmarshal(b, &body))
			assert.Equal(t, tc.code, body["error"])
			assert.Equal(t, tc.message, body["message"])
			assert.Nil(t, body["requestId"])
			assert.NotEmpty(t, body["timestamp"])
			assert.Equal(t, tc.details, body["details"])
			h := http.Header{}
			var he huma.HeadersError
			if errors.As(got, &he) {
				h = he.GetHeaders()
			}
			for k, v := range tc.headers {
				assert.Equal(t, v, h.Get(k), k)
			}
		})
	}
}
