package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BacklogRead reads a backlog: how many items wait, and how long the oldest has waited.
type BacklogRead func(ctx context.Context) (count int, oldest time.Duration, err error)

// NewBacklogCollector exports a backlog as two gauges, read from Postgres at scrape time
// (bounded to 2 s). A failed read is logged and leaves the gauges out of that scrape, so a
// dashboard shows a gap rather than a made-up zero.
func NewBacklogCollector(count, age *prometheus.Desc, what string, read BacklogRead, logger *slog.Logger) prometheus.Collector {
	return &backlogCollector{count: count, age: age, what: what, read: read, logger: logger}
}

type backlogCollector struct {
	count, age *prometheus.Desc
	what       string
	read       BacklogRead
	logger     *slog.Logger
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.age
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.read(ctx)
	if err != nil {
		c.logger.Warn("read "+c.what+" for metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, oldest.Seconds())
}
