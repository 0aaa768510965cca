package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/telemetry"
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
// indexed statement). Every apiserver reports the same shared table.
func NewBacklogCollector(st BacklogStore, logger *slog.Logger) prometheus.Collector {
	return telemetry.NewBacklogCollector(backlogItemsDesc, backlogAgeDesc, "outbox backlog",
		func(ctx context.Context) (int, time.Duration, error) { return st.OutboxBacklog(ctx) }, logger)
}
