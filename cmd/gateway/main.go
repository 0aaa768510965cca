// Command gateway runs a Locker Network gateway: the gateway local API over the lock
// controllers of its banks, with its state in an embedded SQLite file. A bank's
// controller is named in the layout: kind "kerong-cu16" (or "kerong-cu48", with
// model=cu48 in the address) with a kerong+serial:// or kerong+tcp:// address drives
// Kerong CU16 (CU48) boards (package kerong; docs/hardware.md).
// Simulated controllers (kind "simulated"), the simulator's control API (/sim/*, on
// -sim-addr) and the Kerong bus emulator (-kerong-emulator) are only compiled into
// binaries built with "-tags simcontrol".
//
// Flags, each also read from an environment variable (a flag given on the
// command line wins):
//
//	-id                    LOCKERNET_GATEWAY_ID                    gateway serial (default: the layout's, GW-0001 for two-banks)
//	-addr                  LOCKERNET_GATEWAY_ADDR                  local API address (default 127.0.0.1:8101)
//	-secret                LOCKERNET_GATEWAY_SECRET                bearer secret of the local API
//	-secret-file           LOCKERNET_GATEWAY_SECRET_FILE           file holding the secret (surrounding whitespace trimmed)
//	-tls-cert, -tls-key    LOCKERNET_GATEWAY_TLS_CERT, _TLS_KEY    PEM certificate and key: the local API serves HTTPS (default: plain HTTP)
//	-db                    LOCKERNET_GATEWAY_DB                    SQLite file (default $LOCKERNET_DATA_DIR/gateway-<id>.db, data dir default .data)
//	-layout                LOCKERNET_GATEWAY_LAYOUT                preset (two-banks, one-bank) or layout JSON file (default two-banks)
//	-open-attempt-timeout  LOCKERNET_GATEWAY_OPEN_ATTEMPT_TIMEOUT  timeout of one door-open attempt (default 20s)
//	-open-attempts         LOCKERNET_GATEWAY_OPEN_ATTEMPTS         door-open attempts (default 3)
//	-open-retry-delay      LOCKERNET_GATEWAY_OPEN_RETRY_DELAY      pause between attempts (default 1s)
//	-sensor-timeout        LOCKERNET_GATEWAY_SENSOR_TIMEOUT        timeout of a door-sensor or status read (default 2s)
//	-stop-grace            LOCKERNET_GATEWAY_STOP_GRACE            how long a stop waits for the requests in flight (default: the open policy's longest open + 5s, 67s)
//	-door-close-after      LOCKERNET_GATEWAY_DOOR_CLOSE_AFTER      simulated doors close this long after opening; 0 = never (default 10s)
//	-controller-latency    LOCKERNET_GATEWAY_CONTROLLER_LATENCY    latency of every simulated controller command (default 50ms)
//	-log-format            LOCKERNET_LOG_FORMAT                    json or text (default json)
//	-log-level             LOCKERNET_LOG_LEVEL                     debug, info, warn or error (default info)
//	-sim-addr              LOCKERNET_GATEWAY_SIM_ADDR              simulator control address (simcontrol builds only; empty = off)
//	-kerong-emulator       LOCKERNET_GATEWAY_KERONG_EMULATOR       simulated banks are driven by the Kerong driver over a pty to an emulated bus (simcontrol builds only)
//
// -simulated (LOCKERNET_GATEWAY_SIMULATED=true) is required to run a layout with simulated
// controllers, so a production site never opens pretend doors by accident; a production
// build refuses such a layout.
//
// One of -secret and -secret-file is required: at least 32 random bytes, as hex (64+ digits)
// or base64.
//
// SIGINT or SIGTERM stops the gateway gracefully: it stops taking requests, lets those in
// flight finish and record their results (a door open its event-log line and, with an
// Idempotency-Key, its answer) for at most -stop-grace, and only then closes its database.
// An idle gateway stops at once; give the service manager's stop timeout (systemd's
// TimeoutStopSec, compose's stop_grace_period) more than -stop-grace.
package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	lnconfig "github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad command line or environment (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

type config struct {
	id, addr, secret, secretFile, db, layout string
	tlsCert, tlsKey                          string
	simulated                                bool
	openAttemptTimeout, openRetryDelay       time.Duration
	openAttempts                             int
	sensorTimeout, stopGrace                 time.Duration
	watch                                    gateway.WatchConfig
	doorCloseAfter, controllerLatency        time.Duration
	logFormat, logLevel                      string
	sim                                      simOptions
}

// envDefault is a flag's default taken from the environment variable env: the
// value parse makes of it, or def when env is unset. A value parse refuses is
// added to errs (and the flag defaults to what parse returned with the error).
func envDefault[T any](getenv func(string) string, env string, def T, parse func(string) (T, error), errs *[]error) T {
	v := getenv(env)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %w", env, err))
	}
	return x
}

// parseConfig reads flags over environment variables over defaults.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var envErrs []error
	str := func(p *string, name, env, def, usage string) {
		if v := getenv(env); v != "" {
			def = v
		}
		fs.StringVar(p, name, def, usage+" (env "+env+")")
	}
	dur := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		fs.DurationVar(p, name, envDefault(getenv, env, def, time.ParseDuration, &envErrs), usage+" (env "+env+")")
	}
	integer := func(p *int, name, env string, def int, usage string) {
		fs.IntVar(p, name, envDefault(getenv, env, def, strconv.Atoi, &envErrs), usage+" (env "+env+")")
	}
	simDef := envDefault(getenv, "LOCKERNET_GATEWAY_SIMULATED", false, strconv.ParseBool, &envErrs)
	fs.BoolVar(&c.simulated, "simulated", simDef,
		"run a layout with simulated lock controllers (simcontrol builds); required, so a production gateway never opens pretend doors by accident (env LOCKERNET_GATEWAY_SIMULATED)")
	pol := gateway.DefaultOpenPolicy()
	str(&c.id, "id", "LOCKERNET_GATEWAY_ID", "", "gateway serial (default: the layout's)")
	str(&c.addr, "addr", "LOCKERNET_GATEWAY_ADDR", "127.0.0.1:8101", "local API listen address")
	str(&c.secret, "secret", "LOCKERNET_GATEWAY_SECRET", "", "bearer secret of the local API")
	str(&c.secretFile, "secret-file", "LOCKERNET_GATEWAY_SECRET_FILE", "", "file holding the bearer secret")
	str(&c.tlsCert, "tls-cert", "LOCKERNET_GATEWAY_TLS_CERT", "", "PEM certificate (chain) of the local API; with -tls-key it serves HTTPS")
	str(&c.tlsKey, "tls-key", "LOCKERNET_GATEWAY_TLS_KEY", "", "PEM private key of -tls-cert")
	str(&c.db, "db", "LOCKERNET_GATEWAY_DB", "", "SQLite file (default $LOCKERNET_DATA_DIR/gateway-<id>.db)")
	str(&c.layout, "layout", "LOCKERNET_GATEWAY_LAYOUT", gateway.PresetTwoBanks,
		"layout preset ("+strings.Join(gateway.PresetNames(), ", ")+") or JSON file")
	dur(&c.openAttemptTimeout, "open-attempt-timeout", "LOCKERNET_GATEWAY_OPEN_ATTEMPT_TIMEOUT", pol.AttemptTimeout, "timeout of one door-open attempt")
	integer(&c.openAttempts, "open-attempts", "LOCKERNET_GATEWAY_OPEN_ATTEMPTS", pol.Attempts, "door-open attempts")
	dur(&c.openRetryDelay, "open-retry-delay", "LOCKERNET_GATEWAY_OPEN_RETRY_DELAY", pol.RetryDelay, "pause between door-open attempts")
	dur(&c.sensorTimeout, "sensor-timeout", "LOCKERNET_GATEWAY_SENSOR_TIMEOUT", 2*time.Second, "timeout of a door-sensor or status read")
	dur(&c.stopGrace, "stop-grace", "LOCKERNET_GATEWAY_STOP_GRACE", 0,
		"how long a stop (SIGTERM, SIGINT) waits for the requests in flight to finish and record their results (0: the open policy's longest open + 5s)")
	dur(&c.watch.Interval, "watch-interval", "LOCKERNET_GATEWAY_WATCH_INTERVAL", gateway.DefaultWatchInterval,
		"how often the watch reads every lock controller's door sensors for alerts (GET /alerts; 0 = no watch)")
	dur(&c.watch.DoorAjarAfter, "door-ajar-after", "LOCKERNET_GATEWAY_DOOR_AJAR_AFTER", gateway.DefaultDoorAjarAfter,
		"a door open this long raises a door_ajar alert")
	dur(&c.watch.ForcedOpenGrace, "forced-open-grace", "LOCKERNET_GATEWAY_FORCED_OPEN_GRACE", gateway.DefaultForcedOpenGrace,
		"a door seen opening with no open sent by the gateway this long before raises forced_open and goes out of service")
	integer(&c.watch.OfflineAfter, "offline-after", "LOCKERNET_GATEWAY_OFFLINE_AFTER", gateway.DefaultOfflineAfter,
		"failed sensor reads in a row that raise controller_offline")
	dur(&c.doorCloseAfter, "door-close-after", "LOCKERNET_GATEWAY_DOOR_CLOSE_AFTER", 10*time.Second, "simulated doors close this long after opening (0 = never)")
	dur(&c.controllerLatency, "controller-latency", "LOCKERNET_GATEWAY_CONTROLLER_LATENCY", 50*time.Millisecond, "latency of every simulated controller command")
	str(&c.logFormat, "log-format", "LOCKERNET_LOG_FORMAT", "json", "log format: json or text")
	str(&c.logLevel, "log-level", "LOCKERNET_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	c.sim.register(fs, getenv)
	if err := errors.Join(envErrs...); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case c.openAttempts < 1:
		return c, errors.New("-open-attempts must be at least 1")
	case c.openAttemptTimeout <= 0:
		return c, errors.New("-open-attempt-timeout must be positive")
	case c.openRetryDelay < 0, c.doorCloseAfter < 0, c.controllerLatency < 0, c.stopGrace < 0:
		return c, errors.New("durations must not be negative")
	case c.sensorTimeout <= 0:
		return c, errors.New("-sensor-timeout must be positive")
	case c.watch.Interval < 0:
		return c, errors.New("-watch-interval must not be negative (0 runs no watch)")
	case c.watch.DoorAjarAfter <= 0, c.watch.ForcedOpenGrace <= 0:
		return c, errors.New("-door-ajar-after and -forced-open-grace must be positive")
	case c.watch.OfflineAfter < 1:
		return c, errors.New("-offline-after must be at least 1")
	}
	return c, nil
}

func readSecret(c config) (string, error) {
	switch {
	case c.secret != "" && c.secretFile != "":
		return "", errors.New("give -secret or -secret-file, not both")
	case c.secret != "":
		return c.secret, nil
	case c.secretFile != "":
		data, err := os.ReadFile(c.secretFile)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		s := strings.TrimSpace(string(data))
		if s == "" {
			return "", fmt.Errorf("secret file %s is empty", c.secretFile)
		}
		return s, nil
	}
	return "", errors.New("a secret is required: -secret, -secret-file, LOCKERNET_GATEWAY_SECRET or LOCKERNET_GATEWAY_SECRET_FILE")
}

// run starts the gateway and serves until ctx ends. ready, if not nil, is
// called with the local API's address once it listens.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return &usageError{err: err}
	}
	logger, err := lnconfig.NewLogger(c.logFormat, c.logLevel, stderr, telemetry.LogHandler)
	if err != nil {
		return err
	}
	// OTEL_* (package telemetry): the local API continues the cloud's traces.
	stopTracing, err := telemetry.Setup(ctx, "gateway", logger)
	if err != nil {
		return &usageError{err: err}
	}
	defer func() {
		if err := stopTracing(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("flush traces", "err", err)
		}
	}()
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return &usageError{err: errors.New("give -tls-cert and -tls-key together")}
	}
	secret, err := readSecret(c)
	if err != nil {
		return err
	}
	if err := checkSecret(secret); err != nil {
		return &usageError{err: err}
	}
	layout, err := gateway.LoadLayout(c.layout)
	if err != nil {
		return err
	}
	id := c.id
	if id == "" {
		id = layout.GatewayID
	}
	if id == "" {
		return errors.New("a gateway id is required (-id): the layout names none")
	}
	dbPath := c.db
	if dbPath == "" {
		dir := getenv("LOCKERNET_DATA_DIR")
		if dir == "" {
			dir = ".data"
		}
		dbPath = filepath.Join(dir, "gateway-"+id+".db")
	}
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}

	buses := kerong.NewBuses()
	defer buses.Close()
	defer c.sim.close()
	layout, ctls, err := controllers(&c, layout, buses)
	if err != nil {
		return &usageError{err: err}
	}
	for _, ctl := range ctls {
		if k, ok := ctl.(*kerong.Controller); ok {
			logger.Info("lock controller", "controllerId", k.ID(), "driver", k.Describe())
		}
	}
	srv, err := gateway.New(ctx, gateway.Config{
		GatewayID: id,
		Secret:    secret,
		DBPath:    dbPath,
		Layout:    layout,
		Open: gateway.OpenPolicy{
			AttemptTimeout: c.openAttemptTimeout, Attempts: c.openAttempts, RetryDelay: c.openRetryDelay,
		},
		SensorTimeout: c.sensorTimeout,
		StopGrace:     c.stopGrace,
		Watch:         c.watch,
		Version:       version,
		Logger:        logger,
	}, ctls...)
	if err != nil {
		return err
	}
	// Serve closes the gateway itself once the requests in flight are done; this is for the
	// ways out before it.
	defer func() {
		if err := srv.Close(); err != nil {
			logger.Error("close gateway", "err", err)
		}
	}()

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s for the local API: %w", c.addr, err)
	}
	ln, handler, simDone, err := c.sim.start(ctx, ln, srv.Handler(), logger)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			_ = ln.Close()
			return &usageError{err: fmt.Errorf("load -tls-cert/-tls-key: %w", err)}
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	logger.Info("gateway listening", "gatewayId", id, "addr", ln.Addr().String(), "tls", c.tlsCert != "", "db", dbPath,
		"layout", c.layout, "version", version, "stopGraceMs", srv.StopGrace().Milliseconds())
	if ready != nil {
		ready(ln.Addr().String())
	}
	// The stop's order: no new requests, those in flight finish and record their results,
	// then the database closes (all in Serve); the simulator and the buses go after.
	err = srv.Serve(ctx, ln, handler)
	c.sim.close()
	if simDone != nil {
		<-simDone
	}
	logger.Info("gateway stopped", "gatewayId", id)
	return err
}

// controllers builds the controller of every bank: the simulated ones as the build
// allows (simOptions), the others from their kind and address. It returns the layout
// as the gateway reports it (an emulated bank names its driver and pseudo-terminal).
func controllers(c *config, layout gateway.Layout, buses *kerong.Buses) (gateway.Layout, []lockctl.Controller, error) {
	layout, ctls, err := c.sim.controllers(*c, layout)
	if err != nil {
		return layout, nil, err
	}
	done := map[string]bool{}
	for _, ctl := range ctls {
		done[ctl.ID()] = true
	}
	for _, b := range layout.Banks {
		spec := b.Controller
		if done[spec.ID] {
			continue
		}
		if spec.Kind == simulatedKind {
			return layout, nil, fmt.Errorf("bank %d: controller %s is simulated: this gateway needs -simulated (LOCKERNET_GATEWAY_SIMULATED=true) "+
				"and a simcontrol build to run it, or a real controller in the layout (kind %q, address kerong+serial://... or kerong+tcp://...)",
				b.ID, spec.ID, kerong.Kind)
		}
		if !kerong.IsKind(spec.Kind) || !kerong.IsControllerURL(spec.Address) {
			return layout, nil, fmt.Errorf("bank %d: controller %s: kind %q at %q has no driver (want kind %q or %q with a kerong+serial:// or kerong+tcp:// address)",
				b.ID, spec.ID, spec.Kind, spec.Address, kerong.Kind, kerong.KindCU48)
		}
		ctl, err := buses.Controller(spec.ID, spec.Address)
		if err != nil {
			return layout, nil, fmt.Errorf("bank %d: %w", b.ID, err)
		}
		if ctl.Kind() != spec.Kind {
			return layout, nil, fmt.Errorf("bank %d: controller %s: kind %q and address %q name different models (model=%s; kind %q goes with it)",
				b.ID, spec.ID, spec.Kind, spec.Address, ctl.Settings().Model, ctl.Kind())
		}
		for _, lk := range b.Lockers {
			if lk.Channel > ctl.Settings().Channels() {
				return layout, nil, fmt.Errorf("bank %d: locker %d is on channel %d, and boards %v drive channels 1-%d",
					b.ID, lk.LockerID, lk.Channel, ctl.Settings().Boards, ctl.Settings().Channels())
			}
		}
		ctls = append(ctls, ctl)
	}
	return layout, ctls, nil
}

// simulatedKind is the controller kind of a simulated bank.
const simulatedKind = "simulated"

// checkSecret refuses a bearer secret that is not at least 32 random bytes, written as hex
// (64 digits or more) or base64: the local API opens doors, and a short or memorable secret
// can be guessed.
func checkSecret(s string) error {
	const short = "the secret must be at least 32 random bytes, as 64 or more hex digits or as base64 (e.g. `openssl rand -hex 32`)"
	if strings.Trim(s, "0123456789abcdefABCDEF") == "" {
		// Hex digits carry 4 bits each, whatever else they would decode as.
		if len(s) < 64 {
			return errors.New(short)
		}
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) >= 32 {
			return nil
		}
	}
	return errors.New(short)
}
