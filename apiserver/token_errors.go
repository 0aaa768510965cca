package apiserver

import (
	"context"
	"errors"
	"net/http"
)

// OAuthError is an RFC 6749 §5.2 error body.
type OAuthError struct {
	status           int
	Code             string `json:"error" enum:"invalid_request,invalid_client,invalid_grant,unauthorized_client,unsupported_grant_type,invalid_scope,server_error,slow_down"`
	ErrorDescription string `json:"error_description,omitempty"`
}

func (e *OAuthError) Error() string  { return e.Code + ": " + e.ErrorDescription }
func (e *OAuthError) GetStatus() int { return e.status }

// ContentType keeps OAuth errors plain JSON.
func (e *OAuthError) ContentType(string) string { return "application/json" }

var oauthCodes = map[int]string{
	http.StatusUnauthorized:        "invalid_client",
	http.StatusInternalServerError: "server_error",
	http.StatusServiceUnavailable:  "server_error",
}

// tokenRefusal is a refused token request in RFC 6749 §5.2's terms: code is the error
// code (invalid_request, invalid_client, unsupported_grant_type, invalid_scope, slow_down).
type tokenRefusal struct {
	code string
	desc string
	// rateLimit carries slow_down's headers (Retry-After, X-RateLimit-*).
	rateLimit map[string]string
}

func (e *tokenRefusal) Error() string { return e.code + ": " + e.desc }

func refuseToken(code, desc string) error { return &tokenRefusal{code: code, desc: desc} }

// tokenStatuses are the statuses of the codes that are not 400 (RFC 6749 §5.2, DESIGN §3).
var tokenStatuses = map[string]int{
	"invalid_client": http.StatusUnauthorized,
	"slow_down":      http.StatusTooManyRequests,
	"server_error":   http.StatusServiceUnavailable,
}

// tokenFailure is the token service's error mapper (DESIGN §3, /oauth and /realms): an
// RFC 6749 body, never cached; invalid_client is 401 with WWW-Authenticate, slow_down 429
// with the rate-limit headers, anything unexpected is logged and answered 503
// server_error with Retry-After.
func (s *Server) tokenFailure(ctx context.Context, err error) *tokenOutput {
	var r *tokenRefusal
	if !errors.As(err, &r) {
		s.logger.ErrorContext(ctx, "token request failed", "err", err)
		r = &tokenRefusal{code: "server_error", desc: "try again later"}
	}
	status, ok := tokenStatuses[r.code]
	if !ok {
		status = http.StatusBadRequest
	}
	out := &tokenOutput{Status: status, CacheControl: "no-store", Pragma: "no-cache",
		Body: &OAuthError{status: status, Code: r.code, ErrorDescription: r.desc}}
	switch status {
	case http.StatusUnauthorized:
		out.WWWAuthenticate = `Basic realm="lockernet"`
	case http.StatusServiceUnavailable:
		out.RetryAfter = "1"
	}
	if rl := r.rateLimit; rl != nil {
		out.RetryAfter = rl["Retry-After"]
		out.RateLimitLimit, out.RateLimitRemaining, out.RateLimitReset = rl["X-RateLimit-Limit"], rl["X-RateLimit-Remaining"], rl["X-RateLimit-Reset"]
	}
	return out
}
