// Package gatewayd is the gateway process behind cmd/gateway: its settings, read from flags
// over environment variables over defaults (Load), and Run, which builds the lock controllers
// of the layout's banks, opens the gateway local API (package gateway) and serves it until
// its context ends. The flags and variables are listed in cmd/gateway's comment.
//
// Simulated controllers, the simulator's control API and the Kerong bus emulator are only
// compiled in with "-tags simcontrol" (sim_on.go); a production build links the real
// drivers only (sim_off.go).
package gatewayd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lockernet/lockernet/hardware/gateway"
)

// Config is the gateway process's settings.
type Config struct {
	ID, Addr, Secret, SecretFile, DB, Layout string
	TLSCert, TLSKey                          string
	// DataDir holds the database when DB is empty (LOCKERNET_DATA_DIR, default .data).
	DataDir                            string
	Simulated                          bool
	OpenAttemptTimeout, OpenRetryDelay time.Duration
	OpenAttempts                       int
	SensorTimeout, StopGrace           time.Duration
	Watch                              gateway.WatchConfig
	DoorCloseAfter, ControllerLatency  time.Duration
	LogFormat, LogLevel                string
	// Version is the build's, reported by GET /system and logged at start.
	Version string

	sim simOptions
}

// UsageError is a bad command line or environment: the command exits with status 2 for it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

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

// Load reads the settings: flags (args) over environment variables (getenv) over defaults.
// Flag errors and usage go to stderr. Every error it returns is a *UsageError.
func Load(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return c, &UsageError{Err: err}
	}
	return c, nil
}

// parse binds every flag to its environment variable and default, parses args and checks
// the values.
func parse(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	var c Config
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
	fs.BoolVar(&c.Simulated, "simulated", simDef,
		"run a layout with simulated lock controllers (simcontrol builds); required, so a production gateway never opens pretend doors by accident (env LOCKERNET_GATEWAY_SIMULATED)")
	pol := gateway.DefaultOpenPolicy()
	str(&c.ID, "id", "LOCKERNET_GATEWAY_ID", "", "gateway serial (default: the layout's)")
	str(&c.Addr, "addr", "LOCKERNET_GATEWAY_ADDR", "127.0.0.1:8101", "local API listen address")
	str(&c.Secret, "secret", "LOCKERNET_GATEWAY_SECRET", "", "bearer secret of the local API")
	str(&c.SecretFile, "secret-file", "LOCKERNET_GATEWAY_SECRET_FILE", "", "file holding the bearer secret")
	str(&c.TLSCert, "tls-cert", "LOCKERNET_GATEWAY_TLS_CERT", "", "PEM certificate (chain) of the local API; with -tls-key it serves HTTPS")
	str(&c.TLSKey, "tls-key", "LOCKERNET_GATEWAY_TLS_KEY", "", "PEM private key of -tls-cert")
	str(&c.DB, "db", "LOCKERNET_GATEWAY_DB", "", "SQLite file (default $LOCKERNET_DATA_DIR/gateway-<id>.db)")
	str(&c.Layout, "layout", "LOCKERNET_GATEWAY_LAYOUT", gateway.PresetTwoBanks,
		"layout preset ("+strings.Join(gateway.PresetNames(), ", ")+") or JSON file")
	dur(&c.OpenAttemptTimeout, "open-attempt-timeout", "LOCKERNET_GATEWAY_OPEN_ATTEMPT_TIMEOUT", pol.AttemptTimeout, "timeout of one door-open attempt")
	integer(&c.OpenAttempts, "open-attempts", "LOCKERNET_GATEWAY_OPEN_ATTEMPTS", pol.Attempts, "door-open attempts")
	dur(&c.OpenRetryDelay, "open-retry-delay", "LOCKERNET_GATEWAY_OPEN_RETRY_DELAY", pol.RetryDelay, "pause between door-open attempts")
	dur(&c.SensorTimeout, "sensor-timeout", "LOCKERNET_GATEWAY_SENSOR_TIMEOUT", 2*time.Second, "timeout of a door-sensor or status read")
	dur(&c.StopGrace, "stop-grace", "LOCKERNET_GATEWAY_STOP_GRACE", 0,
		"how long a stop (SIGTERM, SIGINT) waits for the requests in flight to finish and record their results (0: the open policy's longest open + 5s)")
	dur(&c.Watch.Interval, "watch-interval", "LOCKERNET_GATEWAY_WATCH_INTERVAL", gateway.DefaultWatchInterval,
		"how often the watch reads every lock controller's door sensors for alerts (GET /alerts; 0 = no watch)")
	dur(&c.Watch.DoorAjarAfter, "door-ajar-after", "LOCKERNET_GATEWAY_DOOR_AJAR_AFTER", gateway.DefaultDoorAjarAfter,
		"a door open this long raises a door_ajar alert")
	dur(&c.Watch.ForcedOpenGrace, "forced-open-grace", "LOCKERNET_GATEWAY_FORCED_OPEN_GRACE", gateway.DefaultForcedOpenGrace,
		"a door seen opening with no open sent by the gateway this long before raises forced_open and goes out of service")
	integer(&c.Watch.OfflineAfter, "offline-after", "LOCKERNET_GATEWAY_OFFLINE_AFTER", gateway.DefaultOfflineAfter,
		"failed sensor reads in a row that raise controller_offline")
	dur(&c.DoorCloseAfter, "door-close-after", "LOCKERNET_GATEWAY_DOOR_CLOSE_AFTER", 10*time.Second, "simulated doors close this long after opening (0 = never)")
	dur(&c.ControllerLatency, "controller-latency", "LOCKERNET_GATEWAY_CONTROLLER_LATENCY", 50*time.Millisecond, "latency of every simulated controller command")
	str(&c.LogFormat, "log-format", "LOCKERNET_LOG_FORMAT", "json", "log format: json or text")
	str(&c.LogLevel, "log-level", "LOCKERNET_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	c.sim.register(fs, getenv)
	c.DataDir = getenv("LOCKERNET_DATA_DIR")
	if c.DataDir == "" {
		c.DataDir = ".data"
	}
	if err := errors.Join(envErrs...); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return c, c.check()
}

// check refuses values the gateway cannot run with.
func (c Config) check() error {
	switch {
	case c.OpenAttempts < 1:
		return errors.New("-open-attempts must be at least 1")
	case c.OpenAttemptTimeout <= 0:
		return errors.New("-open-attempt-timeout must be positive")
	case c.OpenRetryDelay < 0, c.DoorCloseAfter < 0, c.ControllerLatency < 0, c.StopGrace < 0:
		return errors.New("durations must not be negative")
	case c.SensorTimeout <= 0:
		return errors.New("-sensor-timeout must be positive")
	case c.Watch.Interval < 0:
		return errors.New("-watch-interval must not be negative (0 runs no watch)")
	case c.Watch.DoorAjarAfter <= 0, c.Watch.ForcedOpenGrace <= 0:
		return errors.New("-door-ajar-after and -forced-open-grace must be positive")
	case c.Watch.OfflineAfter < 1:
		return errors.New("-offline-after must be at least 1")
	}
	return nil
}

// openPolicy is the door-open policy the settings give.
func (c Config) openPolicy() gateway.OpenPolicy {
	return gateway.OpenPolicy{AttemptTimeout: c.OpenAttemptTimeout, Attempts: c.OpenAttempts, RetryDelay: c.OpenRetryDelay}
}
