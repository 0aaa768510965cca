package activities

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeReadTimeout bounds a collector's Postgres read, so a slow database cannot hold a
// Prometheus scrape.
const scrapeReadTimeout = 2 * time.Second

// scrapeCollector exports series read from Postgres at scrape time. A failed read is logged
// and leaves its series out of that scrape: a gap in the graph rather than a wrong value.
type scrapeCollector[T any] struct {
	descs  []*prometheus.Desc
	what   string // what the read reads, for the log line
	read   func(context.Context) (T, error)
	emit   func(T, chan<- prometheus.Metric)
	logger *slog.Logger
}

func (c *scrapeCollector[T]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *scrapeCollector[T]) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeReadTimeout)
	defer cancel()
	v, err := c.read(ctx)
	if err != nil {
		c.logger.Warn("read "+c.what+" for metrics", "err", err)
		return
	}
	c.emit(v, ch)
}
