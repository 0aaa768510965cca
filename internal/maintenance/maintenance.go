// Package maintenance runs the processes' background loops — the outbox sweep, the
// reconciler of stalled gateway requests, the gateway sync, the expiry sweep, the prunes, the
// history partitions — each on its own interval, and measures each the same way (runs,
// errors, the last pass's duration), after riverqueue/river's maintenance services. A loop's pass stays with its
// domain; which loops a process runs is listed here (loops.go), and cmd/apiserver,
// cmd/worker and the test environment start them from those lists. It depends downward only
// (internal packages): what a loop needs from a layer above, the apiserver's reconciler, is an
// interface declared here (GatewayRequestReconciler).
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Loop is one background loop: Pass runs every Every until the process stops.
type Loop struct {
	// Name labels the loop's metrics and log lines (snake_case, e.g. "outbox_sweep").
	Name  string
	Every time.Duration
	// AtStart runs the first pass at once instead of after one interval.
	AtStart bool
	// Pass does one round of the loop's work. An error is logged and counted; the loop
	// goes on at its next interval.
	Pass func(ctx context.Context) error
}

// Metrics measure every loop, labelled by its name.
type Metrics struct {
	runs, errors *prometheus.CounterVec
	duration     *prometheus.GaugeVec
}

// NewMetrics registers the loops' metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockernet_maintenance_runs_total",
			Help: "Passes of a background loop (outbox sweep, reconciler, gateway sync, expiry sweep, prunes, history partitions), by loop."}, []string{"loop"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockernet_maintenance_errors_total",
			Help: "Passes of a background loop that failed, by loop."}, []string{"loop"}),
		duration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lockernet_maintenance_last_duration_seconds",
			Help: "How long the last pass of a background loop took, by loop."}, []string{"loop"}),
	}
	reg.MustRegister(m.runs, m.errors, m.duration)
	return m
}

// Runs is the counter of a loop's passes.
func (m *Metrics) Runs(loop string) prometheus.Counter { return m.runs.WithLabelValues(loop) }

// Errors is the counter of a loop's failed passes.
func (m *Metrics) Errors(loop string) prometheus.Counter { return m.errors.WithLabelValues(loop) }

// Run runs every loop, each in its own goroutine, until ctx is done, and waits for the
// passes in progress. m may be nil (not measured).
func Run(ctx context.Context, m *Metrics, logger *slog.Logger, loops ...Loop) {
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, m, logger, l)
		}()
	}
	wg.Wait()
}

func run(ctx context.Context, m *Metrics, logger *slog.Logger, l Loop) {
	if m != nil {
		// Every loop is exported from the start, at zero.
		m.runs.WithLabelValues(l.Name)
		m.errors.WithLabelValues(l.Name)
	}
	t := time.NewTicker(l.Every)
	defer t.Stop()
	if !l.AtStart {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	for {
		start := time.Now()
		err := l.Pass(ctx)
		if ctx.Err() != nil {
			return // stopping: the pass was cut short, not failed
		}
		if m != nil {
			m.runs.WithLabelValues(l.Name).Inc()
			m.duration.WithLabelValues(l.Name).Set(time.Since(start).Seconds())
			if err != nil {
				m.errors.WithLabelValues(l.Name).Inc()
			}
		}
		if err != nil {
			logger.WarnContext(ctx, "background loop pass failed", "loop", l.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
