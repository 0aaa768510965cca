package apiserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/workflows/contract"
)

// The gateway cloud API (DESIGN §6): customers' backends drive their gateways through the
// cloud, server to server, with an API key. Its settings and per-server state live here; the
// edge (cloud_edge.go), the operations answered here (cloud_answered_here.go), the proxied ones
// (cloud_routes.go, cloud_proxy.go) and their answers (cloud_render.go) beside it.

// Security scheme names of the gateway cloud API: the key in X-API-Key or as a bearer.
const (
	schemeGatewayKey    = "gatewayApiKey"
	schemeGatewayBearer = "gatewayKeyBearer"
)

// cloudSecurity is the Security of every operation that needs a key.
var cloudSecurity = []map[string][]string{{schemeGatewayKey: {}}, {schemeGatewayBearer: {}}}

// CloudSettings configure the gateway cloud API. Zero values take DESIGN §6's defaults.
type CloudSettings struct {
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

// CloudSettingsFromConfig takes the gateway cloud API's settings from the service's.
func CloudSettingsFromConfig(cfg config.Config) CloudSettings {
	c := CloudSettings{
		TaskQueue: cfg.GatewayTaskQueue, RateLimit: cfg.GatewayRateLimit, IdempotencyTTL: cfg.IdempotencyTTL, Environment: cfg.Environment,
		MaxWaiters: cfg.MaxWaiters,
		Policy: gatewayreq.Policy{CallTimeout: cfg.GatewayCallTimeout, HardwareTimeout: cfg.GatewayHardwareTimeout,
			DispatchAttempts: cfg.GatewayDispatchAttempts},
	}
	if cfg.V1DeprecatedAt != nil {
		c.Deprecation = &Deprecation{At: *cfg.V1DeprecatedAt, Link: cfg.V1SunsetLink}
		if cfg.V1SunsetAt != nil {
			c.Deprecation.Sunset = *cfg.V1SunsetAt
		}
	}
	return c
}

func (c CloudSettings) withDefaults(taskQueue string) CloudSettings {
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
type cloud struct {
	settings    CloudSettings
	responses   *prometheus.CounterVec
	rateLimited prometheus.Counter
}

func newCloud(d Deps) *cloud {
	taskQueue := d.TaskQueue
	if taskQueue == "" {
		taskQueue = contract.DefaultTaskQueue
	}
	c := &cloud{
		settings: d.Cloud.withDefaults(taskQueue),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_cloud_gateway_request_responses_total",
			Help: "Answers of the gateway cloud API about gateway requests, by class and request state (pending = 202 or pending poll).",
		}, []string{"class", "state"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockernet_cloud_rate_limited_total",
			Help: "Gateway cloud API requests refused with 429 because their key exceeded its rate limit.",
		}),
	}
	d.Registry.MustRegister(c.responses, c.rateLimited)
	return c
}

func (c *cloud) deprecationHeaders(h http.Header) {
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
