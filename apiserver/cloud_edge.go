package apiserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's edge: what runs before its handlers (OPTIONS refused, deprecation
// headers, the raw body kept for the Idempotency-Key hash, the key checked and counted). Its
// refusals are mapped in cloud_errors.go.

type cloudEdgeKey struct{}

// cloudEdge holds what the edge middleware learned about a request of this surface.
type cloudEdge struct {
	start   time.Time
	rawBody []byte
	bodyOK  bool // rawBody is the whole body (it was within the limit)
	prefer  []string
	uri     string
}

func edgeOf(ctx context.Context) *cloudEdge {
	e, _ := ctx.Value(cloudEdgeKey{}).(*cloudEdge)
	if e == nil {
		return &cloudEdge{start: time.Now()}
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

// cloudEdgeMiddleware runs before routing for every request under /api/customer/v1: it
// answers OPTIONS with 405 before anything else (no CORS, ever), adds the deprecation
// headers when configured, notes when the exchange started (X-Request-Duration-Ms), and
// keeps a copy of the raw body for the Idempotency-Key hash.
func (s *Server) cloudEdgeMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if surfaceOf(r.URL.Path) != surfaceCloud {
			next.ServeHTTP(w, r)
			return
		}
		e := &cloudEdge{start: time.Now(), prefer: r.Header.Values("Prefer"), uri: r.URL.RequestURI()}
		s.cloud.deprecationHeaders(w.Header())
		if r.Method == http.MethodOptions {
			writeRouterError(w, r, http.StatusMethodNotAllowed, "method not allowed: the gateway cloud API is for server-to-server calls and has no CORS")
			return
		}
		e.rawBody, e.bodyOK = bufferBody(w, r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cloudEdgeKey{}, e)))
	})
}

type cloudKeyCtx struct{}

// cloudKey returns the authorized key of an operation that needs one.
func cloudKey(ctx context.Context) store.KeyAuthorization {
	k, _ := ctx.Value(cloudKeyCtx{}).(store.KeyAuthorization)
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
// against the key's rate limit, in one Postgres statement (store.AuthorizeGatewayKey); a
// proxied operation does both in the round trip that stores its request instead
// (cloud_key_with_store.go). No cache: a revoked key fails on its next request on every
// instance, far within the 5 s the design allows, and the rate limit is shared by all
// instances.
func (s *Server) authenticateKey(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if !needsGatewayKey(ctx.Operation()) {
			next(ctx)
			return
		}
		if conflictingCredentials(ctx) {
			s.writeCloudFailure(ctx, "authenticate",
				errUnauthenticated("conflicting credentials: present the API key once, in X-API-Key or Authorization: Bearer"))
			return
		}
		key, ok := presentedKey(ctx)
		if !ok {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet-gateway-cloud"`)
			s.writeCloudFailure(ctx, "authenticate", errUnauthenticated("an API key is required in X-API-Key or Authorization: Bearer"))
			return
		}
		if !credential.IsGatewayKey(key) {
			s.writeCloudFailure(ctx, "authenticate", s.gatewayKeyFailure(ctx.Context()))
			return
		}
		if checksKeyWithStore(ctx.Operation()) {
			s.withKeyPending(ctx, credential.Hash(key), next)
			return
		}
		began := time.Now()
		auth, err := s.deps.Store.AuthorizeGatewayKey(ctx.Context(), credential.Hash(key), s.cloud.settings.RateLimit)
		markTiming(ctx.Context(), "auth", began)
		if err == nil {
			setRateLimitHeaders(ctx, auth)
		}
		if verdict := s.keyVerdict(ctx.Context(), auth, err); verdict != nil {
			s.writeCloudFailure(ctx, "authenticate", verdict)
			return
		}
		next(huma.WithValue(ctx, cloudKeyCtx{}, auth))
	}
}

func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}
