// Package partitions keeps the partitioned history tables of internal/store: each month's
// partition created ahead, the months past their retention dropped (history.go), and the
// closed reservations and tokens moved out of their live tables into that history
// (history_move.go). It also exports the partitions' sizes and reach as metrics.
package partitions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/store"
)

// HistoryStore is what the history loop needs: the partitioned history tables of
// internal/store (partitions.go).
type HistoryStore interface {
	EnsurePartitions(ctx context.Context, table string, from, to time.Time) (int, error)
	DropPartitions(ctx context.Context, table string, cutoff time.Time) ([]string, error)
	PruneDefaultPartition(ctx context.Context, table string, cutoff time.Time, limit int) (int64, error)
	HistoryStats(ctx context.Context, table string) (store.HistoryStats, error)
}

// HistoryMonthsAhead is how many months after the current one each history table has
// created: a month's partition exists two months before its first row.
const HistoryMonthsAhead = 2

// defaultPruneLimit bounds the rows a pass deletes from a default partition.
const defaultPruneLimit = 5000

// MaintainHistory is the history loop's pass, for every history table: it creates the months
// through HistoryMonthsAhead after now's, and, when the table's retention (keep, by table) is
// above zero, drops the months that ended more than keep before now (a row is kept at least
// keep, at most keep and a month) and deletes the rows of its default partition older than
// that. A table without a retention keeps everything. A failure on one table is logged and
// returned after the others have been done.
func MaintainHistory(ctx context.Context, st HistoryStore, logger *slog.Logger, keep map[string]time.Duration, now time.Time) error {
	var errs []error
	for _, table := range store.HistoryTables {
		created, err := st.EnsurePartitions(ctx, table, now, now.AddDate(0, HistoryMonthsAhead, 0))
		if err != nil {
			errs = append(errs, err)
		}
		if created > 0 {
			logger.InfoContext(ctx, "created history partitions", "table", table, "partitions", created)
		}
		k := keep[table]
		if k <= 0 {
			continue
		}
		cutoff := now.Add(-k)
		dropped, err := st.DropPartitions(ctx, table, cutoff)
		if err != nil {
			errs = append(errs, err)
		}
		if len(dropped) > 0 {
			logger.InfoContext(ctx, "dropped history partitions past their retention", "table", table, "partitions", dropped,
				"retention", k.String())
		}
		n, err := st.PruneDefaultPartition(ctx, table, cutoff, defaultPruneLimit)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			logger.InfoContext(ctx, "pruned rows past their retention from a default partition", "table", table, "rows", n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("maintain history partitions: %w", err)
	}
	return nil
}

var (
	historyBytesDesc = prometheus.NewDesc("lockernet_history_bytes",
		"Size of a partitioned history table: every partition with its indexes, by table.", []string{"table"}, nil)
	historyPartitionsDesc = prometheus.NewDesc("lockernet_history_partitions",
		"Monthly partitions of a history table, by table.", []string{"table"}, nil)
	historyOldestDesc = prometheus.NewDesc("lockernet_history_oldest_partition_age_seconds",
		"How long ago the oldest monthly partition of a history table began, by table: it grows past the retention by at most a month when the drops keep up.", []string{"table"}, nil)
	historyAheadDesc = prometheus.NewDesc("lockernet_history_ahead_seconds",
		"How long until the newest monthly partition of a history table ends, by table: below a month the creation of partitions is behind.", []string{"table"}, nil)
	historyDefaultDesc = prometheus.NewDesc("lockernet_history_default_bytes",
		"Size of a history table's default partition (rows dated outside every month created), by table.", []string{"table"}, nil)
)

// historyCollector exports the history tables' partitions, read from the catalog at scrape
// time.
type historyCollector struct {
	st     HistoryStore
	logger *slog.Logger
}

// NewHistoryCollector exports each history table's size, partitions, oldest partition and
// how far ahead its partitions reach.
func NewHistoryCollector(st HistoryStore, logger *slog.Logger) prometheus.Collector {
	return historyCollector{st: st, logger: logger}
}

func (c historyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{historyBytesDesc, historyPartitionsDesc, historyOldestDesc, historyAheadDesc, historyDefaultDesc} {
		ch <- d
	}
}

func (c historyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := time.Now()
	for _, table := range store.HistoryTables {
		st, err := c.st.HistoryStats(ctx, table)
		if err != nil {
			c.logger.WarnContext(ctx, "read history partitions for metrics", "table", table, "err", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(historyBytesDesc, prometheus.GaugeValue, float64(st.Bytes()), table)
		ch <- prometheus.MustNewConstMetric(historyPartitionsDesc, prometheus.GaugeValue, float64(len(st.Partitions)), table)
		ch <- prometheus.MustNewConstMetric(historyDefaultDesc, prometheus.GaugeValue, float64(st.DefaultBytes), table)
		if n := len(st.Partitions); n > 0 {
			ch <- prometheus.MustNewConstMetric(historyOldestDesc, prometheus.GaugeValue, now.Sub(st.Partitions[0].Month).Seconds(), table)
			ch <- prometheus.MustNewConstMetric(historyAheadDesc, prometheus.GaugeValue, st.Partitions[n-1].End().Sub(now).Seconds(), table)
		}
	}
}
