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
//
// Exit status: 0 after a stop, 2 for a bad command line or environment, 1 for any other
// failure. The settings and the run are package hardware/gateway/gatewayd.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockernet/lockernet/hardware/gateway/gatewayd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		var usage *gatewayd.UsageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := gatewayd.Load(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		return err
	}
	cfg.Version = version
	return gatewayd.Run(ctx, cfg, os.Stderr, nil)
}
