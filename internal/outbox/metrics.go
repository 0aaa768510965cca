package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BacklogStore reports the outbox's backlog.
type BacklogStore interface {
	OutboxBacklog(ctx context.Context) (count int, oldest time.Duration, err error)
}

var (
	backlogItemsDesc = prometheus.NewDesc("lockernet_outbox_backlog_items",
		"Workflow starts and signals committed but not yet handed to Temporal (rows of workflow_outbox).", nil, nil)
	backlogAgeDesc = prometheus.NewDesc("lockernet_outbox_oldest_item_age_seconds",
		"Age of the oldest workflow_outbox row (0 when empty).", nil, nil)
)

// NewBacklogCollector exports the outbox backlog, read from Postgres at scrape time (one
// indexed statement, bounded to 2 s). Every apiserver reports the same shared table. A
// failed read is logged and leaves the two gauges out of that scrape.
func NewBacklogCollector(st BacklogStore, logger *slog.Logger) prometheus.Collector {
	return &backlogCollector{st: st, logger: logger}
}

type backlogCollector struct {
	st     BacklogStore
	logger *slog.Logger
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogItemsDesc
	ch <- backlogAgeDesc
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.st.OutboxBacklog(ctx)
	if err != nil {
		c.logger.Warn("read outbox backlog for metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogItemsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(backlogAgeDesc, prometheus.GaugeValue, oldest.Seconds())
}
