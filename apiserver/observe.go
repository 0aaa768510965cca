package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type httpMetrics struct {
	duration  *prometheus.HistogramVec
	tokenUses *prometheus.CounterVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockernet_http_request_duration_seconds",
			Help:    "HTTP request latency by route, method and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15, 30},
		}, []string{"route", "method", "status"}),
		tokenUses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_tower_token_uses_total",
			Help: "Token uses reported by towers, by outcome (anomaly: stale generation, unknown token, use after expiry).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.duration, m.tokenUses)
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

type requestIDKey struct{}

// RequestID returns the id the request was logged under.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// observe logs one line per request and records its latency.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := uuid.NewString()
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		tw := &timingWriter{ResponseWriter: w, start: start}
		ctx = context.WithValue(ctx, timingKey{}, tw)
		ww := middleware.NewWrapResponseWriter(tw, r.ProtoMajor)
		next.ServeHTTP(ww, r.WithContext(ctx))
		route := chi.RouteContext(ctx).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		s.metrics.duration.WithLabelValues(route, r.Method, strconv.Itoa(status)).Observe(elapsed.Seconds())
		s.logger.LogAttrs(ctx, slog.LevelInfo, "http request",
			slog.String("request_id", id), slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("bytes", ww.BytesWritten()))
	})
}

// timingWriter adds Server-Timing (W3C, read by browsers and the load tool): first app, the
// time the server spent before it started answering, then the phases a handler marked
// (markTiming), so an operator sees where a slow answer spent its time.
type timingWriter struct {
	http.ResponseWriter
	start   time.Time
	written bool

	mu     sync.Mutex
	phases []timingPhase
}

type timingPhase struct {
	name string
	dur  time.Duration
}

type timingKey struct{}

// markTiming records that the request spent time since since in the named phase; it
// appears in the answer's Server-Timing after app. Outside a request it does nothing.
func markTiming(ctx context.Context, name string, since time.Time) {
	w, _ := ctx.Value(timingKey{}).(*timingWriter)
	if w == nil {
		return
	}
	d := time.Since(since)
	w.mu.Lock()
	w.phases = append(w.phases, timingPhase{name, d})
	w.mu.Unlock()
}

func (w *timingWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		var b strings.Builder
		fmt.Fprintf(&b, "app;dur=%.3f", msec(time.Since(w.start)))
		w.mu.Lock()
		for _, p := range w.phases {
			fmt.Fprintf(&b, ", %s;dur=%.3f", p.name, msec(p.dur))
		}
		w.mu.Unlock()
		w.Header().Set("Server-Timing", b.String())
	}
	w.ResponseWriter.WriteHeader(status)
}

func msec(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (w *timingWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streamed answers through.
func (w *timingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if !w.written {
			w.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *timingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// MetricsHandler serves the server's Prometheus registry. It belongs on the internal
// listener (LOCKERNET_ADMIN_ADDR), never on the API's router.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.deps.Registry, promhttp.HandlerOpts{})
}
