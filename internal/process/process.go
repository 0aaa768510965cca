// Package process is the one main skeleton of the services (cmd/apiserver, cmd/worker): stop
// on SIGINT or SIGTERM, load the settings from the environment (package config), log JSON or
// text with slog through telemetry's handler, with the process's name on every line, start
// tracing, run, flush the spans still queued, and exit.
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

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
// of a settings error on stderr.
func Main(name string, run Run) {
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
