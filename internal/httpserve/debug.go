package httpserve

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"
)

// ServeDebug serves Go's pprof profiles on addr until ctx is done (no-op when addr is empty).
// Profiles show how the process spends its time under load; keep the address private.
func ServeDebug(ctx context.Context, addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := Listen(addr, "LOCKERNET_DEBUG_ADDR")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	logger.Info("serving profiles", "addr", ln.Addr().String())
	return Serve(ctx, ln, mux, time.Second)
}

// ServeAdmin serves a process's internal listener on addr: /metrics from h. It is for the
// operator's network only (DESIGN §8): the public API port never serves metrics.
func ServeAdmin(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := Listen(addr, "LOCKERNET_ADMIN_ADDR")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return Serve(ctx, ln, mux, time.Second)
}
