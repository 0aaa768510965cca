// Package process is the one main skeleton of the services (cmd/apiserver, cmd/worker): stop
// on SIGINT or SIGTERM, load the settings from the environment (package config), log JSON or
// text with slog through telemetry's handler, with the process's name on every line, start
// tracing, run, flush the spans still queued, and exit. `NAME probe URL` is the services'
// health check instead (Probe).
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/telemetry"
)

// Run is a service's own work: it returns when ctx is done (nil) or when the service cannot
// go on (the error).
type Run func(ctx context.Context, cfg config.Config, logger *slog.Logger) error

// Exit codes of a service.
const (
	ExitOK      = 0 // stopped by a signal
	ExitFailed  = 1 // run returned an error
	ExitSetting = 2 // the settings or tracing could not be set up; run did not start
)

// Main runs the service named name until SIGINT or SIGTERM and exits with its exit code.
// name is the process attribute of every log line, the tracing service name and the prefix
// of a settings error on stderr. With the arguments `probe URL` it runs Probe instead.
func Main(name string, run Run) {
	if len(os.Args) == 3 && os.Args[1] == "probe" {
		os.Exit(Probe(os.Args[2], os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Start(ctx, name, run, os.Stderr)
	stop()
	os.Exit(code)
}

// Start is Main without the signals and the exit: it runs the service until ctx is done and
// returns its exit code. A settings error goes to stderr (there is no logger yet); the rest
// is logged.
func Start(ctx context.Context, name string, run Run, stderr io.Writer) int {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return ExitSetting
	}
	logger := slog.New(telemetry.LogHandler(cfg.Logger().Handler())).With("process", name)
	stopTracing, err := telemetry.Setup(ctx, name, logger)
	if err != nil {
		logger.Error(name+" stopped", "err", err)
		return ExitSetting
	}
	err = run(ctx, cfg, logger)
	if serr := stopTracing(context.WithoutCancel(ctx)); serr != nil {
		logger.Warn("flush traces", "err", serr)
	}
	if err != nil {
		logger.Error(name+" stopped", "err", err)
		return ExitFailed
	}
	return ExitOK
}

// ProbeTimeout bounds a probe: longer than the 2 s a /readyz gives its own checks.
const ProbeTimeout = 5 * time.Second

// Probe GETs url and returns 0 if it answered 200, else 1 with the reason on stderr: the
// health check of the services' images, which have no shell and no curl (docker/compose.yaml
// runs `apiserver probe http://127.0.0.1:8080/readyz`). It reads no setting.
func Probe(url string, stderr io.Writer) int {
	client := &http.Client{Timeout: ProbeTimeout}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "probe:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(stderr, "probe: %s: %s %s\n", url, resp.Status, b)
		return 1
	}
	return 0
}
