// Package apiserver is the HTTP API: huma v2 operations on a chi router for the token
// service, the tower API (/api/v1), the app engine API and the gateway cloud API
// (/api/customer/v1). One file per resource; errors are mapped in errors.go.
package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/telemetry"
)

// MaxBodyBytes is the largest request body accepted (DESIGN §8); larger ones get 413.
const MaxBodyBytes = 64 << 10

// WorkflowDispatcher starts the workflows recorded in the outbox right after the
// transaction that recorded them commits.
type WorkflowDispatcher interface {
	Dispatch(items ...store.OutboxItem)
}

// Deps are the apiserver's collaborators. Only the OpenAPI generator builds a server
// without them.
type Deps struct {
	Store     *store.Store
	Auth      *jwtauth.Authority
	Keyring   *keyring.Keyring
	Temporal  client.Client
	Workflows WorkflowDispatcher
	Logger    *slog.Logger
	Registry  *prometheus.Registry
	PublicURL string
	Version   string
	// TaskQueue is the workflows' Temporal task queue (default workflows.DefaultTaskQueue).
	TaskQueue string
	// Customer configures the gateway cloud API (zero: DESIGN §6's defaults).
	Customer CustomerSettings
	// SDK configures the mobile SDK API (zero: the defaults of internal/config).
	SDK SDKSettings
	// RateLimits are the tower API, app engine API and token endpoint limits (zero: DESIGN
	// §8's defaults).
	RateLimits RateLimits
	// Webhooks says where webhook endpoints may point (strict in production).
	Webhooks WebhookSettings
}

// Server is one apiserver instance.
type Server struct {
	deps    Deps
	logger  *slog.Logger
	router  chi.Router
	api     huma.API
	metrics *httpMetrics

	towerKeys *towerKeys

	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
	customer  *customer
	requests  *gatewayRequests
	appKeys   appKeys
	clients   clientStates

	rates       RateLimits
	rateLimited *prometheus.CounterVec

	sdk        SDKSettings
	sdkMetrics *sdkMetrics
}

// New builds the HTTP handler with every operation registered.
func New(d Deps) *Server {
	installErrorConstructor()
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Version == "" {
		d.Version = "1.0.0"
	}
	s := &Server{deps: d, logger: d.Logger, metrics: newHTTPMetrics(d.Registry), towerKeys: newTowerKeys(d.Keyring),
		appKeys: appKeys{cache: map[string]cachedKey{}}, draining: make(chan struct{}),
		rates: d.RateLimits.withDefaults(), rateLimited: newRateLimitedCounter(d.Registry)}
	s.customer = newCustomer(d)
	s.requests = newGatewayRequests(d, s.customer.settings, s.draining)

	r := chi.NewRouter()
	r.Use(telemetry.Middleware, s.recoverer, s.observe, s.customerEdgeMiddleware, storableInput, liftBodyDeadline)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeRouterError(w, r, http.StatusNotFound, "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeRouterError(w, r, http.StatusMethodNotAllowed, "method not allowed")
	})
	registerDocs(r)

	cfg := huma.DefaultConfig("Locker Network Service", d.Version)
	cfg.Info.Description = "Tower API, mobile SDK API, token service, app engine API and gateway cloud API of the Locker Network Service."
	cfg.CreateHooks = nil // no $schema fields or schema Link headers: bodies stay wire-compatible
	cfg.DocsPath = ""     // served from the binary instead (docs.go)
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		schemeBearer: {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "Access token from POST /oauth/token (client credentials)."},
		schemeAppKey: {Type: "apiKey", In: "header", Name: "x-api-key",
			Description: "App engine API key (POST /auth/api-key; the seed prints a bootstrap admin key)."},
	}
	api := humachi.New(r, cfg)
	api.UseMiddleware(s.authenticate(api))
	s.router, s.api = r, api

	s.registerHealth(api)
	s.registerOAuth(api)
	s.registerLocations(api)
	s.registerTowers(api)
	s.registerReservations(api)
	s.registerTokens(api)
	s.registerEvents(api)
	s.registerSDK(api)
	s.registerAssigned(api)
	s.registerOpenRequests(api)
	s.registerAppKeys(api)
	s.registerTransactions(api)
	s.registerAccessCodes(api)
	s.registerCustomer(api)
	s.registerWebhooks(api)
	return s
}

// Drain tells requests that wait for a gateway's answer that the server is stopping: they
// answer at once with what is known (a 202 and the request to poll), so a graceful shutdown
// does not have to wait out their waits. Call it when shutdown begins.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Handler is the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// API exposes the huma API (the OpenAPI generator reads it).
func (s *Server) API() huma.API { return s.api }

// op fills the defaults every operation shares.
func op(o huma.Operation) huma.Operation {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = MaxBodyBytes + 1 // huma refuses a body that reaches the limit
	}
	if o.BodyReadTimeout == 0 {
		o.BodyReadTimeout = BodyReadTimeout
	}
	return o
}

// BodyReadTimeout is how long a client may take to send a request body.
const BodyReadTimeout = 5 * time.Second

// liftBodyDeadline clears the connection's read deadline once the request body has been
// read. It is the innermost middleware, so it wraps the body huma reads. huma gives a body
// BodyReadTimeout by setting that deadline and never clears it: a handler that outlives it
// (Prefer: wait up to 30 s) would have its connection's context canceled when the server's
// background read times out, for that request and for every later one on the keep-alive
// connection.
func liftBodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Without a body too: huma sets the deadline before it reads an empty body, and the
		// server's background read is already waiting on the connection.
		if r.Body != nil {
			rc := http.NewResponseController(w)
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	if !b.lifted {
		b.lifted = true
		b.lift()
	}
	return b.ReadCloser.Close()
}

type healthBody struct {
	Status string            `json:"status" enum:"ok,unavailable"`
	Checks map[string]string `json:"checks"`
}

type healthOutput struct {
	Status int
	Body   healthBody
}

func (s *Server) registerHealth(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "get-healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"Health"},
		Summary: "Process liveness",
	}), func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok", Checks: map[string]string{}}}, nil
	})
	huma.Register(api, op(huma.Operation{
		OperationID: "get-readyz", Method: http.MethodGet, Path: "/readyz", Tags: []string{"Health"},
		Summary: "Readiness: Postgres and Temporal reachable",
	}), func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return s.readiness(ctx), nil
	})
}

func (s *Server) readiness(ctx context.Context) *healthOutput {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out := &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok", Checks: map[string]string{}}}
	// Status only: the error names hosts and databases, so it goes to the log (DESIGN §8).
	fail := func(name string, err error) {
		out.Status, out.Body.Status = http.StatusServiceUnavailable, "unavailable"
		out.Body.Checks[name] = "unavailable"
		s.logger.WarnContext(ctx, "not ready", "check", name, "err", err)
	}
	if err := s.deps.Store.Ping(ctx); err != nil {
		fail("postgres", err)
	} else {
		out.Body.Checks["postgres"] = "ok"
	}
	if _, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		fail("temporal", err)
	} else {
		out.Body.Checks["temporal"] = "ok"
	}
	return out
}

type httpMetrics struct {
	duration  *prometheus.HistogramVec
	tokenUses *prometheus.CounterVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockernet_http_request_duration_seconds",
			Help:    "HTTP request latency by route, method and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15, 30},
		}, []string{"route", "method", "status"}),
		tokenUses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_tower_token_uses_total",
			Help: "Token uses reported by towers, by outcome (anomaly: stale generation, unknown token, use after expiry).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.duration, m.tokenUses)
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

type requestIDKey struct{}

// RequestID returns the id the request was logged under.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// observe logs one line per request and records its latency.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := uuid.NewString()
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		tw := &timingWriter{ResponseWriter: w, start: start}
		ctx = context.WithValue(ctx, timingKey{}, tw)
		ww := middleware.NewWrapResponseWriter(tw, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(ctx))
		route := chi.RouteContext(ctx).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		s.metrics.duration.WithLabelValues(route, r.Method, strconv.Itoa(status)).Observe(elapsed.Seconds())
		s.logger.LogAttrs(ctx, slog.LevelInfo, "http request",
			slog.String("request_id", id), slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("bytes", ww.BytesWritten()))
	})
}

// timingWriter adds Server-Timing (W3C, read by browsers and the load tool): first app, the
// time the server spent before it started answering, then the phases a handler marked
// (markTiming), so an operator sees where a slow answer spent its time.
type timingWriter struct {
	http.ResponseWriter
	start   time.Time
	written bool

	mu     sync.Mutex
	phases []timingPhase
}

type timingPhase struct {
	name string
	dur  time.Duration
}

type timingKey struct{}

// markTiming records that the request spent time since since in the named phase; it
// appears in the answer's Server-Timing after app. Outside a request it does nothing.
func markTiming(ctx context.Context, name string, since time.Time) {
	w, _ := ctx.Value(timingKey{}).(*timingWriter)
	if w == nil {
		return
	}
	d := time.Since(since)
	w.mu.Lock()
	w.phases = append(w.phases, timingPhase{name, d})
	w.mu.Unlock()
}

func (w *timingWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		var b strings.Builder
		fmt.Fprintf(&b, "app;dur=%.3f", msec(time.Since(w.start)))
		w.mu.Lock()
		for _, p := range w.phases {
			fmt.Fprintf(&b, ", %s;dur=%.3f", p.name, msec(p.dur))
		}
		w.mu.Unlock()
		w.Header().Set("Server-Timing", b.String())
	}
	w.ResponseWriter.WriteHeader(status)
}

func msec(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (w *timingWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streamed answers through.
func (w *timingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if !w.written {
			w.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *timingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverer turns a panic into a logged 500 in the surface's error format.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.ErrorContext(r.Context(), "panic in handler", slog.Any("panic", v), slog.String("path", r.URL.Path))
				writeRouterError(w, r, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func jsonEncode(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// MetricsHandler serves the server's Prometheus registry. It belongs on the internal
// listener (LOCKERNET_ADMIN_ADDR), never on the API's router.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.deps.Registry, promhttp.HandlerOpts{})
}
