package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// (indexed, bounded to 2 s). Reads treat lapsed holds as free at once; this shows whether
// the expiry workflows, and the sweep behind them, keep the stored state up. A failed read
// is logged and leaves the gauges out of that scrape.
func NewLagCollector(st BacklogStore, logger *slog.Logger) prometheus.Collector {
	return &lagCollector{st: st, logger: logger}
}

type lagCollector struct {
	st     BacklogStore
	logger *slog.Logger
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- overdueDesc
	ch <- overdueAgeDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.st.ExpiryBacklog(ctx)
	if err != nil {
		c.logger.Warn("read expiry backlog for metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(overdueAgeDesc, prometheus.GaugeValue, oldest.Seconds())
}
