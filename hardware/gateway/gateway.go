// Package gateway is the on-site gateway of a locker installation: the gateway
// local API of the design (§7) over a set of lock controllers (package lockctl),
// with its state — transactions, locker service states, an event log and device
// heartbeats — in an embedded SQLite file, so it survives restarts.
//
// Every local-API operation needs "Authorization: Bearer <secret>"; failures
// answer the Error body {error, message, timestamp, details}. The admin page at
// GET / also accepts a session cookie obtained through its login form. /healthz
// and /readyz are unauthenticated; /metrics is Prometheus behind the bearer.
//
// Door opens follow the open policy (OpenPolicy): a per-attempt timeout, a
// number of attempts and a delay between them, retrying only communication
// failures, never a reported hardware fault. A reported fault answers 500
// HARDWARE_FAULT after one attempt; a controller that stays unreachable 503
// CONTROLLER_UNAVAILABLE; both carry lockerId and attempts in details.
//
// Decisions the design left open:
//   - A transaction id is unique forever: creating it again answers 409
//     TRANSACTION_EXISTS whose body is the Error fields plus, at the top level,
//     the existing transaction's transactionId, lockerId and createdAt (details
//     repeats them with "released"). A released transaction is gone for GET,
//     DELETE and open (404 TRANSACTION_NOT_FOUND).
//   - Assignment takes the first free, in-service locker on a controller not
//     known to be offline, matching lockerTypeId and bankTypeId; when
//     requireLowLocker is not set, low lockers are handed out last. An unknown
//     lockerTypeId or bankTypeId is 422 VALIDATION_ERROR; no match is 404
//     NO_AVAILABLE_LOCKERS; losing SQLite's write lock twice is 503
//     LOCKER_ASSIGNMENT_CONFLICT.
//   - Opening by transaction refuses an out-of-service locker (409
//     LOCKER_OUT_OF_SERVICE); the maintenance open does not.
//   - Malformed JSON is 400 INVALID_JSON; wrong types, ranges and unknown
//     references are 422 VALIDATION_ERROR with details {field, reason}; unknown
//     path ids are 404; bodies over 64 KiB are 413 PAYLOAD_TOO_LARGE.
//   - GET /system/logs takes limit 1..1000 (default 100), newest first.
//   - The watch of the lock controllers (watch.go, WatchConfig) raises alerts — door_ajar,
//     forced_open (the locker out of service, reason code FORCED_OPEN), item_left,
//     controller_offline, controller_online — numbered per gateway and read with GET
//     /alerts?after=&limit=1..1000&wait=0..25, a long poll; bad parameters are 422
//     VALIDATION_ERROR as for every query.
//   - Once a stop has begun (Server.Serve, Close), a request that would begin new work
//     answers 503 GATEWAY_STOPPING, having done nothing; a repeat of an Idempotency-Key is
//     still answered from its record, and once the database is closing a keyed request that
//     cannot be looked up answers 500 REQUEST_OUTCOME_UNKNOWN.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// DefaultVersion is reported by /system when Config.Version is empty.
const DefaultVersion = "dev"

// OpenPolicy is how the gateway drives a door open (§7).
type OpenPolicy struct {
	// AttemptTimeout bounds one open command.
	AttemptTimeout time.Duration
	// Attempts is how many commands at most; only communication errors and
	// per-attempt timeouts are retried.
	Attempts int
	// RetryDelay is the pause between attempts.
	RetryDelay time.Duration
}

// DefaultOpenPolicy is the policy of the design: 20 s per attempt, 3 attempts,
// 1 s apart.
func DefaultOpenPolicy() OpenPolicy {
	return OpenPolicy{AttemptTimeout: 20 * time.Second, Attempts: 3, RetryDelay: time.Second}
}

// Longest is the most one door open can take under the policy: every attempt timing out,
// with the pauses between them (62 s for DefaultOpenPolicy).
func (p OpenPolicy) Longest() time.Duration {
	return time.Duration(p.Attempts)*p.AttemptTimeout + time.Duration(max(p.Attempts-1, 0))*p.RetryDelay
}

// resultWriteAllowance is what the default stop grace adds to the open policy's longest open:
// the time writing the open's event-log line and result may wait for SQLite's write lock
// (busy_timeout, store.go).
const resultWriteAllowance = 5 * time.Second

// DefaultStopGrace is the stop grace of a gateway with the open policy p: its longest open
// plus the time to record it, so a graceful stop lets every open in flight finish.
func DefaultStopGrace(p OpenPolicy) time.Duration { return p.Longest() + resultWriteAllowance }

// Config configures a gateway Server.
type Config struct {
	// GatewayID is the gateway's serial, e.g. "GW-0001"; empty takes the
	// layout's.
	GatewayID string
	// Secret is the bearer secret every local-API call must present.
	Secret string
	// DBPath is the SQLite file (created if missing).
	DBPath string
	// Layout is the installation (see Preset and LoadLayout).
	Layout Layout
	// Open is the door-open policy; zero fields take DefaultOpenPolicy's.
	Open OpenPolicy
	// SensorTimeout bounds a read of a controller's door sensors or status
	// (default 2 s); on timeout the last known state is shown.
	SensorTimeout time.Duration
	// SessionTTL is how long an admin-page login lasts (default 12 h).
	SessionTTL time.Duration
	// StopGrace bounds a graceful stop (Server.Serve, Close): how long the requests in
	// flight get to finish and record their results before the database closes (default
	// DefaultStopGrace of Open: 67 s for the design's policy).
	StopGrace time.Duration
	// Watch is the watch of the lock controllers (WatchConfig): alerts for GET /alerts.
	// A zero Interval runs none.
	Watch WatchConfig
	// Version is reported by GET /system.
	Version string
	// Logger receives one line per request and the gateway's events
	// (default slog.Default()).
	Logger *slog.Logger
}

// Server is a gateway: its local API handler over its controllers and database.
type Server struct {
	cfg      Config
	logger   *slog.Logger
	store    *store
	hw       *hardware
	lockers  map[int]lockerInfo
	order    []int // locker ids in layout order (bank, then channel)
	started  time.Time
	hostname string
	metrics  *metrics
	watch    *watch
	sessions *sessions
	logins   *loginThrottle
	handler  http.Handler
	// keyed are the calls with an Idempotency-Key in flight here (idempotency.go).
	keyed idempotentCalls
	// work is what is in flight, which a stop waits for (serve.go).
	work      work
	closeOnce sync.Once
	closeErr  error
}

// lockerInfo is a locker of the layout with its bank.
type lockerInfo struct {
	LockerSpec
	BankID     int
	BankTypeID int
	Controller string
}

// New opens (or creates) the gateway's database and builds its handler. There
// must be exactly one controller per bank of the layout, matched by id.
func New(ctx context.Context, cfg Config, controllers ...lockctl.Controller) (*Server, error) {
	if cfg.Secret == "" {
		return nil, errors.New("new gateway: a secret is required")
	}
	if cfg.DBPath == "" {
		return nil, errors.New("new gateway: a database path is required")
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("new gateway: check layout: %w", err)
	}
	if cfg.GatewayID == "" {
		cfg.GatewayID = cfg.Layout.GatewayID
	}
	if cfg.GatewayID == "" {
		return nil, errors.New("new gateway: a gateway id is required")
	}
	def := DefaultOpenPolicy()
	if cfg.Open.AttemptTimeout <= 0 {
		cfg.Open.AttemptTimeout = def.AttemptTimeout
	}
	if cfg.Open.Attempts <= 0 {
		cfg.Open.Attempts = def.Attempts
	}
	if cfg.Open.RetryDelay < 0 {
		cfg.Open.RetryDelay = def.RetryDelay
	}
	if cfg.SensorTimeout <= 0 {
		cfg.SensorTimeout = 2 * time.Second
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace(cfg.Open)
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}

	hw, err := newHardware(cfg.Layout, controllers, cfg.SensorTimeout)
	if err != nil {
		return nil, fmt.Errorf("new gateway: %w", err)
	}
	st, err := openStore(ctx, cfg.DBPath)
	if err != nil {
		return nil, fmt.Errorf("new gateway: %w", err)
	}
	hostname, _ := os.Hostname()
	s := &Server{
		cfg:      cfg,
		logger:   cfg.Logger.With("gatewayId", cfg.GatewayID),
		store:    st,
		hw:       hw,
		lockers:  map[int]lockerInfo{},
		started:  time.Now(),
		hostname: hostname,
		metrics:  newMetrics(),
		watch:    newWatch(cfg.Watch),
		sessions: newSessions(cfg.SessionTTL),
		logins:   newLoginThrottle(),
	}
	for _, b := range cfg.Layout.Banks {
		for _, lk := range b.Lockers {
			s.lockers[lk.LockerID] = lockerInfo{LockerSpec: lk, BankID: b.ID, BankTypeID: b.BankTypeID, Controller: b.Controller.ID}
			s.order = append(s.order, lk.LockerID)
		}
	}
	s.handler = s.routes()
	s.event(ctx, slog.LevelInfo, "gateway started", map[string]any{
		"version": cfg.Version, "lockers": len(s.lockers), "banks": len(cfg.Layout.Banks),
	})
	s.startWatch()
	return s, nil
}

// Handler is the local API, admin page, probes and metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// ID returns the gateway's serial.
func (s *Server) ID() string { return s.cfg.GatewayID }

// Registry is the gateway's private Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// Close stops the gateway: it refuses new requests, waits for those in flight to finish and
// record their results (at most the stop grace, counted from the stop's start: Serve's or
// this call's), and then closes the database. Serve calls it; later calls do nothing.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.awaitWork()
		s.stopWatch()
		if err := s.store.close(); err != nil {
			s.closeErr = fmt.Errorf("close gateway database: %w", err)
			return
		}
		s.logger.Info("gateway database closed")
	})
	return s.closeErr
}

// StopGrace is how long a stop waits for the requests in flight (Config.StopGrace).
func (s *Server) StopGrace() time.Duration { return s.cfg.StopGrace }

// event records a gateway event in the event log (GET /system/logs) and in the
// process log. It never fails the caller: the log is best effort.
func (s *Server) event(ctx context.Context, level slog.Level, msg string, fields map[string]any) {
	attrs := make([]any, 0, 2*len(fields))
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, k, fields[k])
	}
	s.logger.Log(ctx, level, msg, attrs...)
	// The entry is written even when the caller has given up.
	if err := s.store.appendLog(context.WithoutCancel(ctx), logEntry{
		Timestamp: time.Now(), Level: levelName(level), Message: msg, Fields: fields,
	}); err != nil {
		s.logger.WarnContext(ctx, "write event log", "err", err)
	}
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}
