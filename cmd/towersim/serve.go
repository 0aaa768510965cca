package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/config"
)

// shutdownGrace is how long in-flight requests get after SIGINT/SIGTERM.
const shutdownGrace = 2 * time.Second

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(string)) error {
	fs := flag.NewFlagSet("towersim serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", getenv("LOCKERNET_TOWERSIM_CONFIG"), "provisioning file (env LOCKERNET_TOWERSIM_CONFIG)")
	addr := fs.String("addr", envDefault(getenv, "LOCKERNET_TOWERSIM_ADDR", "127.0.0.1:8070"), "control API listen address (env LOCKERNET_TOWERSIM_ADDR)")
	syncEvery := fs.Duration("sync-interval", 10*time.Second, "retry queued event uploads this often (0 = only after opens)")
	logFormat := fs.String("log-format", envDefault(getenv, "LOCKERNET_LOG_FORMAT", "text"), "log format: json or text (env LOCKERNET_LOG_FORMAT)")
	logLevel := fs.String("log-level", envDefault(getenv, "LOCKERNET_LOG_LEVEL", "info"), "log level (env LOCKERNET_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	case *configPath == "":
		return usageError{errors.New("-config is required")}
	case *syncEvery < 0:
		return usageError{errors.New("-sync-interval must not be negative")}
	}
	logger, err := config.NewLogger(*logFormat, *logLevel, stderr, nil)
	if err != nil {
		return usageError{err}
	}

	cfg, err := towersim.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	// Listen before booting the towers: a second simulator started by mistake must fail
	// without starting a boot epoch in the first one's state files.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s for the control API (is another process using the port?): %w", *addr, err)
	}
	sim, err := towersim.NewSimulator(cfg, towersim.WithLogger(logger))
	if err != nil {
		_ = ln.Close()
		return err
	}

	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	syncDone := make(chan struct{})
	syncCtx, stopSync := context.WithCancel(ctx)
	defer stopSync()
	go func() {
		defer close(syncDone)
		if *syncEvery > 0 {
			sim.RunSync(syncCtx, *syncEvery)
		}
	}()
	logger.Info("tower simulator listening", "addr", ln.Addr().String(), "towers", len(cfg.Towers),
		"apiBaseUrl", cfg.APIBaseURL, "stateDir", cfg.StateDir)
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		stopSync()
		<-syncDone
		return fmt.Errorf("serve control API: %w", err)
	case <-ctx.Done():
	}
	logger.Info("tower simulator stopping")
	// ctx is already done: the grace period needs a context of its own.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("requests still running at shutdown; closing them", "error", err)
		_ = srv.Close()
	}
	stopSync()
	<-syncDone
	logger.Info("tower simulator stopped")
	return nil
}
