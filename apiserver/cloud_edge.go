package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's edge: what runs before its handlers (OPTIONS refused, deprecation
// headers, the raw body kept for the Idempotency-Key hash, the key checked and counted) and
// the error bodies of this surface.

type customerEdgeKey struct{}

// customerEdge holds what the edge middleware learned about a request of this surface.
type customerEdge struct {
	start   time.Time
	rawBody []byte
	bodyOK  bool // rawBody is the whole body (it was within the limit)
	prefer  []string
	uri     string
}

func edgeOf(ctx context.Context) *customerEdge {
	e, _ := ctx.Value(customerEdgeKey{}).(*customerEdge)
	if e == nil {
		return &customerEdge{start: time.Now()}
	}
	return e
}

// bufferBody reads a body of up to MaxBodyBytes into memory and puts it back on r for huma
// to read again. The body gets BodyReadTimeout to arrive, like huma's own read; the deadline
// is lifted afterwards so the handler may wait on a gateway for longer than that. ok is false
// without a body, or when it is too large or unreadable (huma then reads the rest and
// answers 413 or 400).
func bufferBody(w http.ResponseWriter, r *http.Request) (buf []byte, ok bool) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength > MaxBodyBytes {
		return nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(BodyReadTimeout))
	buf, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	_ = rc.SetReadDeadline(time.Time{})
	if err == nil && len(buf) <= MaxBodyBytes {
		r.Body = io.NopCloser(bytes.NewReader(buf))
		return buf, true
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	return nil, false
}

// customerEdgeMiddleware runs before routing for every request under /api/customer/v1: it
// answers OPTIONS with 405 before anything else (no CORS, ever), adds the deprecation
// headers when configured, notes when the exchange started (X-Request-Duration-Ms), and
// keeps a copy of the raw body for the Idempotency-Key hash.
func (s *Server) customerEdgeMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if surfaceOf(r.URL.Path) != surfaceCustomer {
			next.ServeHTTP(w, r)
			return
		}
		e := &customerEdge{start: time.Now(), prefer: r.Header.Values("Prefer"), uri: r.URL.RequestURI()}
		s.customer.deprecationHeaders(w.Header())
		if r.Method == http.MethodOptions {
			writeRouterError(w, r, http.StatusMethodNotAllowed, "method not allowed: the gateway cloud API is for server-to-server calls and has no CORS")
			return
		}
		e.rawBody, e.bodyOK = bufferBody(w, r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), customerEdgeKey{}, e)))
	})
}

type customerKeyCtx struct{}

// customerKey returns the authorized key of an operation that needs one.
func customerKey(ctx context.Context) store.KeyAuthorization {
	k, _ := ctx.Value(customerKeyCtx{}).(store.KeyAuthorization)
	return k
}

func needsGatewayKey(op *huma.Operation) bool {
	for _, req := range op.Security {
		if _, ok := req[schemeGatewayKey]; ok {
			return true
		}
	}
	return false
}

// presentedKey reads the key from X-API-Key, else from Authorization: Bearer.
func presentedKey(ctx huma.Context) (string, bool) {
	if k := strings.TrimSpace(ctx.Header("X-API-Key")); k != "" {
		return k, true
	}
	return bearerToken(ctx.Header("Authorization"))
}

// authenticateKey checks the key of every operation that needs one and counts the request
// against the key's rate limit, in one Postgres statement (store.AuthorizeGatewayKey). No
// cache: a revoked key fails on its next request on every instance, far within the 5 s the
// design allows, and the rate limit is shared by all instances.
func (s *Server) authenticateKey(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if !needsGatewayKey(ctx.Operation()) {
			next(ctx)
			return
		}
		if conflictingCredentials(ctx) {
			writeCustomerError(ctx, customerError(http.StatusUnauthorized, "UNAUTHORIZED",
				"conflicting credentials: present the API key once, in X-API-Key or Authorization: Bearer", nil))
			return
		}
		key, ok := presentedKey(ctx)
		if !ok {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet-gateway-cloud"`)
			writeCustomerError(ctx, customerError(http.StatusUnauthorized, "UNAUTHORIZED",
				"an API key is required in X-API-Key or Authorization: Bearer", nil))
			return
		}
		invalid := customerError(http.StatusUnauthorized, "UNAUTHORIZED", "the API key is not valid", nil)
		if !credential.IsGatewayKey(key) {
			writeCustomerError(ctx, invalid)
			return
		}
		began := time.Now()
		auth, err := s.deps.Store.AuthorizeGatewayKey(ctx.Context(), credential.Hash(key), s.customer.settings.RateLimit)
		markTiming(ctx.Context(), "auth", began)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeCustomerError(ctx, invalid)
			return
		case errors.Is(err, context.Canceled):
			// The client went away; nobody reads the answer.
			writeCustomerError(ctx, errClientClosed())
			return
		case err != nil:
			s.logger.ErrorContext(ctx.Context(), "authorize gateway key", "err", err)
			ctx.SetHeader("Retry-After", "1")
			writeCustomerError(ctx, customerError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "try again shortly", nil))
			return
		}
		ctx.SetHeader("X-RateLimit-Limit", strconv.Itoa(auth.Limit))
		ctx.SetHeader("X-RateLimit-Remaining", strconv.Itoa(auth.Remaining()))
		ctx.SetHeader("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(auth.ResetAt()), 10))
		if !auth.Allowed {
			s.customer.rateLimited.Inc()
			wait := int64((auth.RetryAfter() + time.Second - 1) / time.Second)
			wait = max(wait, 1)
			ctx.SetHeader("Retry-After", strconv.FormatInt(wait, 10))
			writeCustomerError(ctx, customerError(http.StatusTooManyRequests, "RATE_LIMITED",
				"the API key exceeded its rate limit", map[string]any{"limit": auth.Limit, "windowSeconds": int(store.RateWindow.Seconds()), "retryAfterSeconds": wait}))
			return
		}
		next(huma.WithValue(ctx, customerKeyCtx{}, auth))
	}
}

func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}

// customerError builds the surface's error body with a code of our own.
func customerError(status int, code, msg string, details map[string]any) *CustomerError {
	if details == nil {
		details = map[string]any{}
	}
	return &CustomerError{status: status, Code: code, Message: msg, Timestamp: ts(time.Now()), Details: details}
}

// writeCustomerError writes an error body from a middleware (handlers return the error).
func writeCustomerError(ctx huma.Context, e *CustomerError) {
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(e)
}

// errClientClosed answers a request whose client went away (nginx's 499; nobody reads it).
func errClientClosed() *CustomerError {
	return customerError(499, "CLIENT_CLOSED_REQUEST", "client closed the request", nil)
}

// customerInternal logs an unexpected error and answers 500 without its text.
func (s *Server) customerInternal(ctx context.Context, op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return errClientClosed()
	}
	if errors.Is(err, store.ErrOverloaded) {
		s.logger.WarnContext(ctx, "overloaded", "op", op, "err", err)
		return huma.ErrorWithHeaders(customerError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE",
			"the service is overloaded: try again shortly", nil), http.Header{"Retry-After": {"1"}})
	}
	s.logger.ErrorContext(ctx, "gateway cloud request failed", "op", op, "err", err)
	return customerError(http.StatusInternalServerError, "INTERNAL_ERROR", "internal error", nil)
}
