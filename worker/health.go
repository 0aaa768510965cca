package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
)

// Pinger is anything whose reachability readiness depends on (Postgres).
type Pinger interface {
	Ping(ctx context.Context) error
}

// HealthHandler serves the worker's /healthz (process up), /readyz (Postgres and Temporal
// reachable) and /metrics.
func HealthHandler(db Pinger, tc client.Client, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, checks := http.StatusOK, map[string]string{"postgres": "ok", "temporal": "ok"}
		// Status only: the errors name hosts and databases, so they go to the log (DESIGN §8).
		if err := db.Ping(ctx); err != nil {
			status, checks["postgres"] = http.StatusServiceUnavailable, "unavailable"
			slog.WarnContext(ctx, "not ready", "check", "postgres", "err", err)
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			status, checks["temporal"] = http.StatusServiceUnavailable, "unavailable"
			slog.WarnContext(ctx, "not ready", "check", "temporal", "err", err)
		}
		state := "ok"
		if status != http.StatusOK {
			state = "unavailable"
		}
		writeJSON(w, status, map[string]any{"status": state, "checks": checks})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
