// Package apiserver is the HTTP API: huma v2 operations on a chi router for the token
// service (token_*.go), the tower API (/api/v1, tower_*.go), the mobile SDK API (/sdk/v1,
// sdk_*.go), the app engine API (app_*.go) and the gateway cloud API (/api/customer/v1,
// cloud_*.go). One file per resource. Handlers return domain errors; each surface maps
// them in its *_errors.go, and errors.go picks the error body by path for huma's own errors.
package apiserver

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/gatewayexec"
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
	// TaskQueue is the workflows' Temporal task queue (default contract.DefaultTaskQueue).
	TaskQueue string
	// Cloud configures the gateway cloud API (zero: DESIGN §6's defaults).
	Cloud CloudSettings
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
	cloud     *cloud
	requests  *gatewayexec.Executor
	clients   clientStates

	rates RateLimits
	// trustedProxies are the peers whose forwarded client address is believed (clientaddr.go).
	trustedProxies []netip.Prefix
	rateLimited    *prometheus.CounterVec

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
		draining: make(chan struct{}),
		rates:    d.RateLimits.withDefaults(), rateLimited: newRateLimitedCounter(d.Registry),
		trustedProxies: trustedProxiesOf(d.RateLimits.TrustedProxies)}
	s.cloud = newCloud(d)
	s.requests = newGatewayRequests(d, s.cloud.settings, s.draining)

	r := chi.NewRouter()
	r.Use(telemetry.Middleware, s.recoverer, s.clientAddress, s.observe, s.cloudEdgeMiddleware, storableInput, liftBodyDeadline)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeRouterError(w, r, http.StatusNotFound, "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeRouterError(w, r, http.StatusMethodNotAllowed, "method not allowed")
	})
	registerDocs(r)

	cfg := huma.DefaultConfig("Locker Network Service", d.Version)
	cfg.Info.Description = "Tower API, mobile SDK API, token service, app engine API and gateway cloud API of the Locker Network Service. " +
		"Request bodies of the mobile SDK API (/sdk/v1) accept and ignore properties they do not know (the SDK is not ours to version); " +
		"every other surface refuses them with its 4xx error body."
	cfg.CreateHooks = nil // no $schema fields or schema Link headers: bodies stay wire-compatible
	cfg.DocsPath = ""     // served from the binary instead (docs.go)
	cfg.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaName)
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
	s.registerPickupWindows(api)
	s.registerEvents(api)
	s.registerSDK(api)
	s.registerAssigned(api)
	s.registerOpenRequests(api)
	s.registerAppKeys(api)
	s.registerTransactions(api)
	s.registerAccessCodes(api)
	s.registerCloud(api)
	s.registerWebhooks(api)
	s.registerPickupPolicies(api)
	finishOpenAPI(api.OpenAPI())
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
