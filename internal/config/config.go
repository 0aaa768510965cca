// Package config reads the service's settings from the environment: one typed struct, the
// variable names and their defaults in one place.
//
// Variables (defaults in brackets):
//
//	LOCKERNET_API_ADDR        apiserver listen address [127.0.0.1:8080]
//	LOCKERNET_WORKER_ADDR     worker health and metrics address [127.0.0.1:8081]
//	LOCKERNET_PUBLIC_URL      base URL clients use, also the token issuer [http://<api addr>]
//	DATABASE_URL              PostgreSQL connection string [postgres://postgres@127.0.0.1:5432/lockernet]
//	LOCKERNET_DATA_DIR        local state of the dev stack [.data]
//	LOCKERNET_MASTER_KEY      64 hex chars (32 bytes) encrypting server-side secrets at rest
//	LOCKERNET_MASTER_KEY_FILE file holding the master key when LOCKERNET_MASTER_KEY is empty
//	TEMPORAL_ADDRESS          Temporal frontend host:port [127.0.0.1:7233]
//	TEMPORAL_NAMESPACE        Temporal namespace [default]
//	LOCKERNET_TASK_QUEUE      Temporal task queue of the workflows [lockernet]
//	LOCKERNET_LOG_FORMAT      json or text [json]
//	LOCKERNET_LOG_LEVEL       debug, info, warn or error [info]
//	LOCKERNET_DB_MAX_CONNS    pgxpool size [20]
//	LOCKERNET_DB_ACQUIRE_TIMEOUT
//	                          how long a query waits for a free pool connection; past it the
//	                          request is answered 503 + Retry-After (overload) [2s]
//	LOCKERNET_DEBUG_ADDR      where the apiserver and the worker serve Go's pprof profiles; empty:
//	                          nowhere [empty] (each process needs its own address)
//	LOCKERNET_ADMIN_ADDR      the apiserver's internal listener for /metrics (never the API port);
//	                          empty: metrics not served [empty; make run: 127.0.0.1:8090, compose:
//	                          0.0.0.0:8090]; the worker serves its metrics on LOCKERNET_WORKER_ADDR
//	LOCKERNET_OUTBOX_WORKERS  workflow starts the apiserver dispatches at once [8]
//	LOCKERNET_ENVIRONMENT     this deployment's name (lower-case letters, digits, '-'), e.g. sandbox
//	                          or production; GET /api/customer/v1/ reports it [development]
//	LOCKERNET_TOWER_ID_PREFIX two hex digits that begin the ids of the towers the demo seed makes,
//	                          so each environment's towers are told apart [01]
//	LOCKERNET_TRUSTED_PROXIES comma-separated addresses or CIDR prefixes of the reverse proxies
//	                          whose X-Forwarded-For / X-Real-IP name the client's address (the
//	                          address wrong credentials are counted against); "none" trusts
//	                          none [127.0.0.0/8,::1/128: loopback only]
//
// The gateway cloud API (/api/customer/v1):
//
//	LOCKERNET_GATEWAY_TASK_QUEUE        task queue of the gateway-request workflows; the worker polls it
//	                                    too [<LOCKERNET_TASK_QUEUE>-gateway]
//	LOCKERNET_API_GATEWAY_WORKER        true: the apiserver also runs a worker for gateway requests on
//	                                    its own Temporal client, so their workflows start eagerly [false]
//	LOCKERNET_API_WORKER                true: the apiserver also runs a worker for LOCKERNET_TASK_QUEUE
//	                                    (reservations, tokens, access codes, webhook deliveries) on its
//	                                    own Temporal client, so the workflows its outbox starts start
//	                                    eagerly [false]
//	LOCKERNET_GATEWAY_RATE_LIMIT        requests per minute per key, unless the key overrides it [120]
//	LOCKERNET_TOWER_RATE_LIMIT          tower API requests per minute per client [600]
//	LOCKERNET_APP_RATE_LIMIT            app engine API requests per minute per key [300]
//	LOCKERNET_TOKEN_RATE_LIMIT          token requests per minute per client id [60]
//	                                    (overrides per client/key: api_clients.rate_limit,
//	                                    api_clients.token_rate_limit, app_api_keys.rate_limit)
//	LOCKERNET_MAX_WAITERS               requests one apiserver holds open waiting for a gateway
//	                                    (Prefer: wait, access-code opens); more answer 503 [1000]
//	LOCKERNET_GATEWAY_CALL_TIMEOUT      deadline for a gateway's answer to a read or write [10s]
//	LOCKERNET_GATEWAY_HARDWARE_TIMEOUT  deadline for a gateway's answer to a door open [65s]
//	LOCKERNET_GATEWAY_DISPATCH_ATTEMPTS deliveries tried before a request fails to dispatch [3]
//	LOCKERNET_IDEMPOTENCY_TTL           how long Idempotency-Keys and their outcomes are kept [720h]
//	LOCKERNET_GATEWAY_SYNC_INTERVAL     health check and locker mirror refresh of each gateway [30s]
//	LOCKERNET_CUSTOMER_V1_DEPRECATED_AT RFC 3339 time v1 is (or will be) deprecated; set, every v1
//	                                    response carries Deprecation (RFC 9745) [empty: not deprecated]
//	LOCKERNET_CUSTOMER_V1_SUNSET_AT     RFC 3339 time v1 stops answering: the Sunset header (RFC 8594) []
//	LOCKERNET_CUSTOMER_V1_SUNSET_LINK   migration guide, sent as Link: <url>; rel="sunset" []
//
// Worker versioning: LOCKERNET_WORKER_VERSIONING, LOCKERNET_DEPLOYMENT_NAME,
// LOCKERNET_BUILD_ID, described in deployment.go.
//
// Webhooks: LOCKERNET_WEBHOOK_RETRY_SCHEDULE, LOCKERNET_WEBHOOK_TIMEOUT, described in
// webhooks.go.
//
// The mobile SDK API (/sdk/v1): LOCKERNET_SDK_DEFAULT_CLAIMS, LOCKERNET_SDK_BLE_SERVICES,
// LOCKERNET_SDK_COMMAND_TTL, described in sdk.go.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config holds every setting of the service processes. Each process reads the fields it needs.
type Config struct {
	APIAddr          string
	WorkerAddr       string
	PublicURL        string
	DatabaseURL      string
	DataDir          string
	MasterKey        string
	MasterKeyFile    string
	TemporalAddress  string
	TemporalNS       string
	TaskQueue        string
	LogFormat        string
	LogLevel         string
	DBMaxConns       int32
	DBAcquireTimeout time.Duration
	DebugAddr        string
	AdminAddr        string
	OutboxWorkers    int
	Environment      string
	TowerIDPrefix    string
	DatabaseURLIsSet bool
	TemporalIsSet    bool

	// The gateway cloud API's settings (see the package comment).
	GatewayTaskQueue        string
	APIGatewayWorker        bool
	APIWorker               bool
	GatewayRateLimit        int
	MaxWaiters              int
	TowerRateLimit          int
	AppRateLimit            int
	TokenRateLimit          int
	TrustedProxies          string // as set; ParseTrustedProxies reads it
	GatewayCallTimeout      time.Duration
	GatewayHardwareTimeout  time.Duration
	GatewayDispatchAttempts int
	IdempotencyTTL          time.Duration
	GatewaySyncInterval     time.Duration
	V1DeprecatedAt          *time.Time
	V1SunsetAt              *time.Time
	V1SunsetLink            string

	// Worker versioning (deployment.go).
	WorkerVersioning bool
	DeploymentName   string
	BuildID          string // as set; empty: derived from the build (worker.BuildID)

	// The mobile SDK API's settings (sdk.go).
	SDKDefaultClaims []string
	SDKBLEServices   []BLEService
	SDKCommandTTL    time.Duration

	// Webhook deliveries (webhooks.go).
	WebhookSchedule []time.Duration // as set; nil: webhook.DefaultRetrySchedule
	WebhookTimeout  time.Duration

	// The background loops' intervals (internal/maintenance).
	OutboxSweepInterval      time.Duration // the apiserver's sweep of outbox items not yet dispatched
	GatewayReconcileInterval time.Duration // the apiserver's start of stalled gateway requests
	GatewaySyncTick          time.Duration // how often the worker claims the gateways due a sync
	GatewayPruneInterval     time.Duration // the worker's prune of old gateway requests and keys
	ExpirySweepInterval      time.Duration // the worker's write-back of lapsed holds
	PickupDueInterval        time.Duration // the worker's overdue marks of pickup windows past their end
	HistoryInterval          time.Duration // the worker's pass over the partitioned history (retention.go)
	HistoryMoveInterval      time.Duration // the worker's move of closed reservations and tokens to the history (retention.go)
	HistoryMoveAfter         time.Duration // how long a closed reservation or token stays live before it moves (retention.go)

	// How long each kind of history is kept (retention.go).
	Retention Retention
}

// DefaultDatabaseURL is the local server's database the dev stack uses when DATABASE_URL is empty.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/lockernet?sslmode=disable"

// Load reads the settings from the environment.
func Load() (Config, error) {
	c := Config{
		APIAddr:         env("LOCKERNET_API_ADDR", "127.0.0.1:8080"),
		WorkerAddr:      env("LOCKERNET_WORKER_ADDR", "127.0.0.1:8081"),
		DatabaseURL:     env("DATABASE_URL", DefaultDatabaseURL),
		DataDir:         env("LOCKERNET_DATA_DIR", ".data"),
		MasterKey:       os.Getenv("LOCKERNET_MASTER_KEY"),
		MasterKeyFile:   os.Getenv("LOCKERNET_MASTER_KEY_FILE"),
		TemporalAddress: env("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		TemporalNS:      env("TEMPORAL_NAMESPACE", "default"),
		TaskQueue:       env("LOCKERNET_TASK_QUEUE", "lockernet"),
		LogFormat:       env("LOCKERNET_LOG_FORMAT", "json"),
		LogLevel:        env("LOCKERNET_LOG_LEVEL", "info"),
	}
	c.DatabaseURLIsSet = os.Getenv("DATABASE_URL") != ""
	c.TemporalIsSet = os.Getenv("TEMPORAL_ADDRESS") != ""
	c.PublicURL = strings.TrimRight(env("LOCKERNET_PUBLIC_URL", "http://"+c.APIAddr), "/")
	n, err := strconv.ParseInt(env("LOCKERNET_DB_MAX_CONNS", "20"), 10, 32)
	if err != nil || n < 1 {
		return Config{}, fmt.Errorf("parse LOCKERNET_DB_MAX_CONNS: must be a positive integer")
	}
	c.DBMaxConns = int32(n)
	if c.DBAcquireTimeout, err = time.ParseDuration(env("LOCKERNET_DB_ACQUIRE_TIMEOUT", "2s")); err != nil || c.DBAcquireTimeout <= 0 {
		return Config{}, fmt.Errorf("parse LOCKERNET_DB_ACQUIRE_TIMEOUT: must be a positive duration such as 2s")
	}
	c.DebugAddr = os.Getenv("LOCKERNET_DEBUG_ADDR")
	c.AdminAddr = os.Getenv("LOCKERNET_ADMIN_ADDR")
	w, err := strconv.Atoi(env("LOCKERNET_OUTBOX_WORKERS", "8"))
	if err != nil || w < 1 {
		return Config{}, fmt.Errorf("parse LOCKERNET_OUTBOX_WORKERS: must be a positive integer")
	}
	c.OutboxWorkers = w
	if err := c.loadEnvironment(); err != nil {
		return Config{}, err
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return Config{}, fmt.Errorf("parse LOCKERNET_LOG_FORMAT: %q is not json or text", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return Config{}, err
	}
	if err := c.loadGateway(); err != nil {
		return Config{}, err
	}
	if err := c.loadDeployment(); err != nil {
		return Config{}, err
	}
	if err := c.loadProxies(); err != nil {
		return Config{}, err
	}
	if err := c.loadSDK(); err != nil {
		return Config{}, err
	}
	if err := c.loadWebhooks(); err != nil {
		return Config{}, err
	}
	if err := c.loadRetention(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var (
	environmentName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	towerIDPrefix   = regexp.MustCompile(`^[0-9a-f]{2}$`)
)

// loadEnvironment reads what tells one deployment (sandbox, production) from another.
func (c *Config) loadEnvironment() error {
	c.Environment = env("LOCKERNET_ENVIRONMENT", "development")
	if !environmentName.MatchString(c.Environment) {
		return fmt.Errorf("parse LOCKERNET_ENVIRONMENT: %q is not 1-32 lower-case letters, digits or '-'", c.Environment)
	}
	c.TowerIDPrefix = strings.ToLower(env("LOCKERNET_TOWER_ID_PREFIX", "01"))
	if !towerIDPrefix.MatchString(c.TowerIDPrefix) {
		return fmt.Errorf("parse LOCKERNET_TOWER_ID_PREFIX: %q is not two hex digits", c.TowerIDPrefix)
	}
	return nil
}

// loadGateway reads the gateway cloud API's settings.
func (c *Config) loadGateway() error {
	c.GatewayTaskQueue = env("LOCKERNET_GATEWAY_TASK_QUEUE", c.TaskQueue+"-gateway")
	c.V1SunsetLink = os.Getenv("LOCKERNET_CUSTOMER_V1_SUNSET_LINK")
	var err error
	if c.APIGatewayWorker, err = strconv.ParseBool(env("LOCKERNET_API_GATEWAY_WORKER", "false")); err != nil {
		return fmt.Errorf("parse LOCKERNET_API_GATEWAY_WORKER: %w", err)
	}
	if c.APIWorker, err = strconv.ParseBool(env("LOCKERNET_API_WORKER", "false")); err != nil {
		return fmt.Errorf("parse LOCKERNET_API_WORKER: %w", err)
	}
	if c.APIGatewayWorker && c.GatewayTaskQueue == c.TaskQueue {
		return errors.New("LOCKERNET_API_GATEWAY_WORKER needs LOCKERNET_GATEWAY_TASK_QUEUE to differ from LOCKERNET_TASK_QUEUE")
	}
	if err := loadSettings([]setting[int]{
		{"LOCKERNET_GATEWAY_RATE_LIMIT", "120", &c.GatewayRateLimit},
		{"LOCKERNET_GATEWAY_DISPATCH_ATTEMPTS", "3", &c.GatewayDispatchAttempts},
		{"LOCKERNET_MAX_WAITERS", "1000", &c.MaxWaiters},
		{"LOCKERNET_TOWER_RATE_LIMIT", "600", &c.TowerRateLimit},
		{"LOCKERNET_APP_RATE_LIMIT", "300", &c.AppRateLimit},
		{"LOCKERNET_TOKEN_RATE_LIMIT", "60", &c.TokenRateLimit},
	}, strconv.Atoi, func(n int) bool { return n >= 1 }, "a positive integer"); err != nil {
		return err
	}
	if err := loadSettings([]setting[time.Duration]{
		{"LOCKERNET_GATEWAY_CALL_TIMEOUT", "10s", &c.GatewayCallTimeout},
		{"LOCKERNET_GATEWAY_HARDWARE_TIMEOUT", "65s", &c.GatewayHardwareTimeout},
		{"LOCKERNET_IDEMPOTENCY_TTL", "720h", &c.IdempotencyTTL},
		{"LOCKERNET_GATEWAY_SYNC_INTERVAL", "30s", &c.GatewaySyncInterval},
		{"LOCKERNET_OUTBOX_SWEEP_INTERVAL", "1s", &c.OutboxSweepInterval},
		{"LOCKERNET_GATEWAY_RECONCILE_INTERVAL", "10s", &c.GatewayReconcileInterval},
		{"LOCKERNET_GATEWAY_SYNC_TICK", "1s", &c.GatewaySyncTick},
		{"LOCKERNET_GATEWAY_PRUNE_INTERVAL", "10m", &c.GatewayPruneInterval},
		{"LOCKERNET_EXPIRY_SWEEP_INTERVAL", "30s", &c.ExpirySweepInterval},
		{"LOCKERNET_PICKUP_DUE_INTERVAL", "250ms", &c.PickupDueInterval},
	}, time.ParseDuration, func(d time.Duration) bool { return d > 0 }, "a positive duration such as 10s"); err != nil {
		return err
	}
	times := []struct {
		name string
		dst  **time.Time
	}{
		{"LOCKERNET_CUSTOMER_V1_DEPRECATED_AT", &c.V1DeprecatedAt},
		{"LOCKERNET_CUSTOMER_V1_SUNSET_AT", &c.V1SunsetAt},
	}
	for _, v := range times {
		raw := os.Getenv(v.name)
		if raw == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return fmt.Errorf("parse %s: must be an RFC 3339 time: %w", v.name, err)
		}
		*v.dst = &t
	}
	if c.V1DeprecatedAt == nil && (c.V1SunsetAt != nil || c.V1SunsetLink != "") {
		return errors.New("LOCKERNET_CUSTOMER_V1_SUNSET_AT and _SUNSET_LINK need LOCKERNET_CUSTOMER_V1_DEPRECATED_AT")
	}
	return nil
}

// Logger builds the process logger from the settings.
func (c Config) Logger() *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// NewLogger builds the logger of a command that takes its log format ("json" or
// "text") and level as flags: it writes to w, through the handler wrap makes of
// the format's handler when wrap is not nil.
func NewLogger(format, level string, w io.Writer, wrap func(slog.Handler) slog.Handler) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want json or text", format)
	}
	if wrap != nil {
		h = wrap(h)
	}
	return slog.New(h), nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("parse LOCKERNET_LOG_LEVEL: %w", err)
	}
	return l, nil
}

// setting is an environment variable read into dst, def when it is unset.
type setting[T any] struct {
	name string
	def  string
	dst  *T
}

// loadSettings reads each setting with parse; a value parse refuses or valid rejects
// is an error saying the variable must be what.
func loadSettings[T any](settings []setting[T], parse func(string) (T, error), valid func(T) bool, what string) error {
	for _, v := range settings {
		x, err := parse(env(v.name, v.def))
		if err != nil || !valid(x) {
			return fmt.Errorf("parse %s: must be %s", v.name, what)
		}
		*v.dst = x
	}
	return nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
