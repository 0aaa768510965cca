package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/maintenance"
)

// Every loop runs on its own interval and is measured under its name: its passes, its
// failed passes, the last pass's duration. A failed pass does not stop the loop.
func TestRunMeasuresEveryLoop(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := maintenance.NewMetrics(reg)
	var ok, failing, slow atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		maintenance.Run(ctx, m, slog.New(slog.DiscardHandler),
			maintenance.Loop{Name: "ok", Every: 10 * time.Millisecond, Pass: func(context.Context) error { ok.Add(1); return nil }},
			maintenance.Loop{Name: "failing", Every: 10 * time.Millisecond, Pass: func(context.Context) error { failing.Add(1); return errors.New("boom") }},
			maintenance.Loop{Name: "hourly", Every: time.Hour, AtStart: true, Pass: func(context.Context) error { slow.Add(1); return nil }},
			maintenance.Loop{Name: "never", Every: time.Hour, Pass: func(context.Context) error { return nil }},
		)
		close(done)
	}()
	require.Eventually(t, func() bool { return ok.Load() >= 3 && failing.Load() >= 3 && slow.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done

	runs := func(loop string) float64 {
		return testutil.ToFloat64(m.Runs(loop))
	}
	assert.GreaterOrEqual(t, runs("ok"), 3.0)
	assert.GreaterOrEqual(t, runs("failing"), 3.0)
	assert.Equal(t, 1.0, runs("hourly"), "AtStart: the first pass at once")
	assert.Equal(t, 0.0, runs("never"), "the first pass after one interval")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.Errors("ok")))
	assert.Equal(t, runs("failing"), testutil.ToFloat64(m.Errors("failing")), "every failed pass counted")
	n, err := testutil.GatherAndCount(reg, "lockernet_maintenance_last_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "a duration for each loop that ran")
}
