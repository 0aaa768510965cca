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
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// The gateway cloud API (DESIGN §6): customers' backends drive their gateways through the
// cloud, server to server, with an API key. The local operations live here; the proxied ones
// (gateway requests) in customer_requests.go.

// Security scheme names of the gateway cloud API: the key in X-API-Key or as a bearer.
const (
	schemeGatewayKey    = "gatewayApiKey"
	schemeGatewayBearer = "gatewayKeyBearer"
)

// customerSecurity is the Security of every operation that needs a key.
var customerSecurity = []map[string][]string{{schemeGatewayKey: {}}, {schemeGatewayBearer: {}}}

// CustomerSettings configure the gateway cloud API. Zero values take DESIGN §6's defaults.
type CustomerSettings struct {
	// TaskQueue runs the gateway-request workflows (default: Deps.TaskQueue).
	TaskQueue string
	// RateLimit is the default requests per minute per key (120).
	RateLimit int
	// ReadWait, WriteWait and HardwareWait are the default waits by class (5, 10, 15 s);
	// MaxWait clamps Prefer: wait (30 s).
	ReadWait, WriteWait, HardwareWait, MaxWait time.Duration
	// Policy is the dispatch policy and the deadlines of gateway requests.
	Policy gatewayreq.Policy
	// IdempotencyTTL is how long an Idempotency-Key and its outcome are kept (30 days).
	IdempotencyTTL time.Duration
	// OnlineWithin is how recent a gateway's last answer must be to count as online (2 min).
	OnlineWithin time.Duration
	// Deprecation, when set, marks v1 deprecated: every v1 response carries Deprecation,
	// Sunset and Link headers (RFC 9745, RFC 8594).
	Deprecation *Deprecation
	// DisableEagerStart starts gateway-request workflows without eager dispatch (to measure
	// what eager start brings; it only matters with a worker on the apiserver's own client).
	DisableEagerStart bool
	// Environment names the deployment (sandbox, production) in the version probe
	// (LOCKERNET_ENVIRONMENT; "development").
	Environment string
	// MaxWaiters bounds the requests this instance holds open waiting for a gateway
	// (LOCKERNET_MAX_WAITERS, 1000); one more answers 503 with Retry-After, before anything
	// is stored.
	MaxWaiters int
}

// Deprecation is the announcement that v1 is deprecated in favour of a v2.
type Deprecation struct {
	// At is when v1 was (or will be) deprecated.
	At time.Time
	// Sunset is when v1 stops answering (zero: not scheduled).
	Sunset time.Time
	// Link is the migration guide.
	Link string
}

// CustomerSettingsFromConfig takes the gateway cloud API's settings from the service's.
func CustomerSettingsFromConfig(cfg config.Config) CustomerSettings {
	c := CustomerSettings{
		TaskQueue: cfg.GatewayTaskQueue, RateLimit: cfg.GatewayRateLimit, IdempotencyTTL: cfg.IdempotencyTTL, Environment: cfg.Environment,
		MaxWaiters: cfg.MaxWaiters,
		Policy:     cfg.GatewayPolicy(),
	}
	if cfg.V1DeprecatedAt != nil {
		c.Deprecation = &Deprecation{At: *cfg.V1DeprecatedAt, Link: cfg.V1SunsetLink}
		if cfg.V1SunsetAt != nil {
			c.Deprecation.Sunset = *cfg.V1SunsetAt
		}
	}
	return c
}

func (c CustomerSettings) withDefaults(taskQueue string) CustomerSettings {
	if c.TaskQueue == "" {
		c.TaskQueue = taskQueue
	}
	if c.RateLimit <= 0 {
		c.RateLimit = 120
	}
	if c.Environment == "" {
		c.Environment = "development"
	}
	if c.MaxWaiters <= 0 {
		c.MaxWaiters = 1000
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReadWait, 5*time.Second)
	def(&c.WriteWait, 10*time.Second)
	def(&c.HardwareWait, 15*time.Second)
	def(&c.MaxWait, 30*time.Second)
	def(&c.IdempotencyTTL, 30*24*time.Hour)
	def(&c.OnlineWithin, 2*time.Minute)
	c.Policy = c.Policy.WithDefaults()
	return c
}

// customer is the gateway cloud API's state within a Server.
type customer struct {
	settings    CustomerSettings
	outcomes    *outcomeWaiters
	waiters     chan struct{} // one slot per request held open waiting (MaxWaiters)
	responses   *prometheus.CounterVec
	rateLimited prometheus.Counter
}

func newCustomer(d Deps) *customer {
	taskQueue := d.TaskQueue
	if taskQueue == "" {
		taskQueue = workflows.DefaultTaskQueue
	}
	c := &customer{
		settings: d.Customer.withDefaults(taskQueue),
		outcomes: newOutcomeWaiters(),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_customer_gateway_request_responses_total",
			Help: "Answers of the gateway cloud API about gateway requests, by class and request state (pending = 202 or pending poll).",
		}, []string{"class", "state"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockernet_customer_rate_limited_total",
			Help: "Gateway cloud API requests refused with 429 because their key exceeded its rate limit.",
		}),
	}
	c.waiters = make(chan struct{}, c.settings.MaxWaiters)
	d.Registry.MustRegister(c.responses, c.rateLimited)
	return c
}

// customerError builds the surface's error body with a code of our own.
func customerError(status int, code, msg string, details map[string]any) *CustomerError {
	if details == nil {
		details = map[string]any{}
	}
	return &CustomerError{status: status, Code: code, Message: msg, Timestamp: ts(time.Now()), Details: details}
}

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

func (c *customer) deprecationHeaders(h http.Header) {
	d := c.settings.Deprecation
	if d == nil {
		return
	}
	h.Set("Deprecation", "@"+strconv.FormatInt(d.At.Unix(), 10))
	if !d.Sunset.IsZero() {
		h.Set("Sunset", d.Sunset.UTC().Format(http.TimeFormat))
	}
	if d.Link != "" {
		h.Add("Link", "<"+d.Link+`>; rel="sunset"`)
		h.Add("Link", "<"+d.Link+`>; rel="deprecation"`)
	}
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

// writeCustomerError writes an error body from a middleware (handlers return the error).
func writeCustomerError(ctx huma.Context, e *CustomerError) {
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(e)
}

// ApiMeta is the version probe's answer.
type ApiMeta struct {
	Name        string           `json:"name"`
	Version     string           `json:"version" enum:"v1"`
	ServerTime  Timestamp        `json:"serverTime"`
	Deprecation *DeprecationBody `json:"deprecation" doc:"null unless v1 is deprecated"`
	Environment string           `json:"environment" doc:"The deployment answering (LOCKERNET_ENVIRONMENT), e.g. sandbox or production" example:"sandbox"`
}

// DeprecationBody announces the deprecation of v1.
type DeprecationBody struct {
	DeprecatedAt Timestamp  `json:"deprecatedAt"`
	SunsetAt     *Timestamp `json:"sunsetAt"`
	Link         *string    `json:"link" doc:"Migration guide"`
}

// MeResponse identifies the caller's key.
type MeResponse struct {
	KeyID        string          `json:"keyId" format:"uuid"`
	KeyPrefix    string          `json:"keyPrefix" example:"lnk_1a2b3c4d"`
	Organization OrganizationRef `json:"organization"`
	RateLimit    RateLimitBody   `json:"rateLimit"`
}

// OrganizationRef names an organization.
type OrganizationRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// RateLimitBody is a key's rate limit.
type RateLimitBody struct {
	Limit         int `json:"limit" example:"120"`
	WindowSeconds int `json:"windowSeconds" example:"60"`
}

// LocationSummary is a gateway location of the caller's organization.
type LocationSummary struct {
	ID            int64      `json:"id"`
	Name          string     `json:"name"`
	Timezone      *string    `json:"timezone"`
	GatewayID     string     `json:"gatewayId" doc:"Serial of the location's gateway" example:"GW-0001"`
	GatewayOnline bool       `json:"gatewayOnline"`
	LastSeenAt    *Timestamp `json:"lastSeenAt" doc:"When the gateway last answered the cloud"`
}

// LocationList is the list of accessible locations.
type LocationList struct {
	Data []LocationSummary `json:"data"`
}

func (s *Server) registerCustomer(api huma.API) {
	s.customer = newCustomer(s.deps)
	api.OpenAPI().Components.SecuritySchemes[schemeGatewayKey] = &huma.SecurityScheme{Type: "apiKey", In: "header", Name: "X-API-Key",
		Description: "Gateway cloud API key: lnk_ followed by 64 lower-case hex digits."}
	api.OpenAPI().Components.SecuritySchemes[schemeGatewayBearer] = &huma.SecurityScheme{Type: "http", Scheme: "bearer",
		Description: "The gateway cloud API key as a bearer token (Authorization: Bearer lnk_...)."}
	grp := huma.NewGroup(api, customerPrefix)
	grp.UseMiddleware(s.authenticateKey(api))
	tags := []string{"Gateway cloud API"}

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-get-meta", Method: http.MethodGet, Path: "/", Tags: tags,
		Summary: "API version probe", Description: "Needs no key.",
	}), func(ctx context.Context, _ *struct{}) (*struct{ Body ApiMeta }, error) {
		return &struct{ Body ApiMeta }{Body: s.customer.meta()}, nil
	})

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-get-me", Method: http.MethodGet, Path: "/me", Tags: tags,
		Summary: "Identify the key", Security: customerSecurity,
	}), func(ctx context.Context, _ *struct{}) (*struct{ Body MeResponse }, error) {
		k := customerKey(ctx)
		return &struct{ Body MeResponse }{Body: MeResponse{
			KeyID: k.KeyID.String(), KeyPrefix: k.KeyPrefix,
			Organization: OrganizationRef{ID: k.OrganizationID, Name: k.OrganizationName},
			RateLimit:    RateLimitBody{Limit: k.Limit, WindowSeconds: int(store.RateWindow.Seconds())},
		}}, nil
	})

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-list-locations", Method: http.MethodGet, Path: "/locations", Tags: tags,
		Summary:     "Accessible locations",
		Description: "The key's organization's locations that have a gateway, with the gateway's health: online when it answered the cloud within the last two minutes (health checks every 30 s and every request outcome).",
		Security:    customerSecurity,
	}), func(ctx context.Context, _ *struct{}) (*struct{ Body LocationList }, error) {
		k := customerKey(ctx)
		ls, err := s.deps.Store.GatewayLocations(ctx, k.OrganizationID, s.customer.settings.OnlineWithin)
		if err != nil {
			return nil, s.customerInternal(ctx, "list gateway locations", err)
		}
		out := LocationList{Data: make([]LocationSummary, 0, len(ls))}
		for _, l := range ls {
			sum := LocationSummary{ID: l.ID, Name: l.Name, Timezone: l.Timezone, GatewayID: l.GatewaySerial, GatewayOnline: l.Online}
			if l.LastSeenAt != nil {
				t := ts(*l.LastSeenAt)
				sum.LastSeenAt = &t
			}
			out.Data = append(out.Data, sum)
		}
		return &struct{ Body LocationList }{Body: out}, nil
	})

	s.registerGatewayRequests(grp, tags)
}

func (c *customer) meta() ApiMeta {
	m := ApiMeta{Name: "Locker Network Service gateway cloud API", Version: "v1", ServerTime: ts(time.Now()),
		Environment: c.settings.Environment}
	if d := c.settings.Deprecation; d != nil {
		m.Deprecation = &DeprecationBody{DeprecatedAt: ts(d.At)}
		if !d.Sunset.IsZero() {
			t := ts(d.Sunset)
			m.Deprecation.SunsetAt = &t
		}
		if d.Link != "" {
			link := d.Link
			m.Deprecation.Link = &link
		}
	}
	return m
}

// customerInternal logs an unexpected error and answers 500 without its text.
// errClientClosed answers a request whose client went away (nginx's 499; nobody reads it).
func errClientClosed() *CustomerError {
	return customerError(499, "CLIENT_CLOSED_REQUEST", "client closed the request", nil)
}

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

// parseRequestID reads a request id from the path; anything else is a request that does
// not exist.
func parseRequestID(raw string) (uuid.UUID, bool) {
	id, err := uuid.Parse(raw)
	return id, err == nil
}

// holdWaiter takes one of the instance's MaxWaiters slots for a request that will wait for a
// gateway; ok is false when all are taken (the caller answers 503 before storing anything).
func (c *customer) holdWaiter() (release func(), ok bool) {
	select {
	case c.waiters <- struct{}{}:
		return func() { <-c.waiters }, true
	default:
		return nil, false
	}
}

// tooManyWaiters is the gateway cloud API's answer when the instance holds MaxWaiters
// requests open already.
func tooManyWaiters() error {
	return huma.ErrorWithHeaders(customerError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE",
		"too many requests are waiting for gateways on this instance: try again shortly, or send Prefer: respond-async", nil),
		http.Header{"Retry-After": {"1"}})
}
