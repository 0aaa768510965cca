package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The token service's error table (DESIGN §3): every refusal of POST /oauth/token, and the
// status, RFC 6749 body and headers a client sees.
func TestTokenErrors(t *testing.T) {
	t.Parallel()
	s := quietServer()
	cases := []struct {
		name    string
		err     error
		status  int
		body    string
		headers map[string]string
	}{
		{name: "malformed request", err: refuseToken("invalid_request", "grant_type is required"),
			status: http.StatusBadRequest, body: `{"error":"invalid_request","error_description":"grant_type is required"}`},
		{name: "unsupported grant", err: refuseToken("unsupported_grant_type", "only client_credentials is supported"),
			status: http.StatusBadRequest, body: `{"error":"unsupported_grant_type","error_description":"only client_credentials is supported"}`},
		{name: "scope not granted", err: refuseToken("invalid_scope", "scope admin is not granted to this client"),
			status: http.StatusBadRequest, body: `{"error":"invalid_scope","error_description":"scope admin is not granted to this client"}`},
		{name: "unknown client", err: refuseToken("invalid_client", "unknown client or wrong secret"),
			status: http.StatusUnauthorized, body: `{"error":"invalid_client","error_description":"unknown client or wrong secret"}`,
			headers: map[string]string{"WWWAuthenticate": `Basic realm="lockernet"`}},
		{name: "rate limited", err: &tokenRefusal{code: "slow_down", desc: "too many token requests for this client: try again in 7 s",
			rateLimit: map[string]string{"Retry-After": "7", "X-RateLimit-Limit": "30", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000000"}},
			status: http.StatusTooManyRequests, body: `{"error":"slow_down","error_description":"too many token requests for this client: try again in 7 s"}`,
			headers: map[string]string{"RetryAfter": "7", "RateLimitLimit": "30", "RateLimitRemaining": "0", "RateLimitReset": "1700000000"}},
		{name: "store failure is a retryable server_error, never echoed", err: fmt.Errorf("load client: %w", errors.New("dial tcp: refused")),
			status: http.StatusServiceUnavailable, body: `{"error":"server_error","error_description":"try again later"}`,
			headers: map[string]string{"RetryAfter": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := s.tokenFailure(context.Background(), tc.err)
			assert.Equal(t, tc.status, out.Status)
			b, err := json.Marshal(out.Body)
			require.NoError(t, err)
			assert.JSONEq(t, tc.body, string(b))
			assert.Equal(t, "no-store", out.CacheControl)
			assert.Equal(t, "no-cache", out.Pragma)
			got := map[string]string{"WWWAuthenticate": out.WWWAuthenticate, "RetryAfter": out.RetryAfter,
				"RateLimitLimit": out.RateLimitLimit, "RateLimitRemaining": out.RateLimitRemaining, "RateLimitReset": out.RateLimitReset}
			for k, v := range got {
				assert.Equal(t, tc.headers[k], v, k)
			}
		})
	}
}
