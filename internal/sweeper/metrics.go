package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/telemetry"
)

// BacklogStore reports the holds whose expiry has not been written back.
type BacklogStore interface {
	ExpiryBacklog(ctx context.Context) (count int, oldest time.Duration, err error)
}

var (
	overdueDesc = prometheus.NewDesc("lockernet_expiry_overdue_holds",
		"Reservations and locker holds past their expiry that no workflow or sweep has written back yet.", nil, nil)
	overdueAgeDesc = prometheus.NewDesc("lockernet_expiry_overdue_oldest_seconds",
		"How long ago the oldest of those expired (0 when none): the expiry write-back lag.", nil, nil)
)

// NewLagCollector exports the expiry write-back lag, read from Postgres at scrape time
// (indexed). Reads treat lapsed holds as free at once; this shows whether the expiry
// workflows, and the sweep behind them, keep the stored state up.
func NewLagCollector(st BacklogStore, logger *slog.Logger) prometheus.Collector {
	return telemetry.NewBacklogCollector(overdueDesc, overdueAgeDesc, "expiry backlog",
		func(ctx context.Context) (int, time.Duration, error) { return st.ExpiryBacklog(ctx) }, logger)
}
