package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The partitioned history tables (DESIGN §11, migrations 00021, 00036 and 00037), in the order
// their months are dropped: a table before the one it refers to (a delivery before its event,
// a token's use before its token).
const (
	HistoryTowerEvents       = "tower_events"
	HistoryTransactions      = "transactions"
	HistoryWebhookDeliveries = "webhook_deliveries"
	HistoryWebhookEvents     = "webhook_events"
	HistoryGatewayRequests   = "gateway_requests"
	HistoryReservations      = "reservation_history"
	HistoryTokenUses         = "token_use_history"
	HistoryTokens            = "locker_token_history"
)

// HistoryTables lists the partitioned history tables in drop order.
var HistoryTables = []string{HistoryTowerEvents, HistoryTransactions, HistoryWebhookDeliveries, HistoryWebhookEvents,
	HistoryGatewayRequests, HistoryReservations, HistoryTokenUses, HistoryTokens}

// historyTable is what the partition maintenance needs to know of a history table.
type historyTable struct {
	key string // the partition key
	// live is a condition on a row that must outlive its month's retention (empty: none). A
	// month holding such a row is not dropped and its rows are not pruned from the default
	// partition: a gateway request still open (never settled, which its workflow's timeouts
	// rule out long before any retention) keeps its month until it is settled.
	live string
}

var historyTables = map[string]historyTable{
	HistoryTowerEvents:       {key: "tower_time"},
	HistoryTransactions:      {key: "created_at"},
	HistoryWebhookDeliveries: {key: "created_at"},
	HistoryWebhookEvents:     {key: "created_at"},
	HistoryGatewayRequests:   {key: "created_at", live: "completed_at IS NULL"},
	HistoryReservations:      {key: "closed_at"},
	HistoryTokenUses:         {key: "closed_at"},
	HistoryTokens:            {key: "closed_at"},
}

// ErrPartitionHeld means a month past its retention was not dropped because it still holds a
// row that must outlive it (see historyTable.live); the other months were dealt with.
var ErrPartitionHeld = errors.New("partition past its retention still holds live rows")

// historyLockTimeout bounds how long a partition's attach or drop waits for its table's lock:
// past it the statement gives up (and the next pass tries again) rather than queue every
// reader and writer of the table behind it.
const historyLockTimeout = "2s"

// Partition is one month of a history table.
type Partition struct {
	Name  string
	Month time.Time // the first instant of the month, UTC
	Bytes int64     // the partition's size with its indexes
}

// End is the first instant after the partition's month.
func (p Partition) End() time.Time { return p.Month.AddDate(0, 1, 0) }

// HistoryStats describe a history table: its months, oldest first, and its default partition
// (rows outside every month created).
type HistoryStats struct {
	Table        string
	Partitions   []Partition
	DefaultBytes int64
}

// Bytes is the table's size: every partition with its indexes.
func (h HistoryStats) Bytes() int64 {
	n := h.DefaultBytes
	for _, p := range h.Partitions {
		n += p.Bytes
	}
	return n
}

func checkHistoryTable(table string) error {
	if _, ok := historyTables[table]; !ok {
		return fmt.Errorf("%q is not a history table", table)
	}
	return nil
}

// monthOf is the first instant of t's month in UTC.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// EnsurePartitions creates table's months from the one holding from through the one holding
// to, those missing; rows of a new month already in the default partition move into it. It
// returns how many it created.
func (s *Store) EnsurePartitions(ctx context.Context, table string, from, to time.Time) (int, error) {
	if err := checkHistoryTable(table); err != nil {
		return 0, err
	}
	created := 0
	for m := monthOf(from); !m.After(to); m = m.AddDate(0, 1, 0) {
		var added bool
		err := s.WithTx(ctx, func(tx *Store) error {
			if _, err := tx.db.Exec(ctx, `SET LOCAL lock_timeout = '`+historyLockTimeout+`'`); err != nil {
				return err
			}
			return tx.db.QueryRow(ctx, `SELECT history_partition_add($1, $2::date)`, table, m.Format(time.DateOnly)).Scan(&added)
		})
		if err != nil {
			return created, fmt.Errorf("create partition of %s for %s: %w", table, m.Format("2006-01"), translate(err))
		}
		if added {
			created++
		}
	}
	return created, nil
}

// DropPartitions drops table's months that ended before cutoff, each with DROP TABLE (never
// a DELETE), and returns their names. A month that still holds a live row (see
// historyTable.live) is left, and the error says so (ErrPartitionHeld) once the others are
// dropped.
func (s *Store) DropPartitions(ctx context.Context, table string, cutoff time.Time) ([]string, error) {
	st, err := s.HistoryStats(ctx, table)
	if err != nil {
		return nil, err
	}
	live := historyTables[table].live
	var dropped, held []string
	for _, p := range st.Partitions {
		if p.End().After(cutoff) {
			break
		}
		var kept bool
		err := s.WithTx(ctx, func(tx *Store) error {
			if _, err := tx.db.Exec(ctx, `SET LOCAL lock_timeout = '`+historyLockTimeout+`'`); err != nil {
				return err
			}
			if live != "" {
				// No row turns live again (a settled request stays settled) and new rows are
				// dated now, so nothing changes this answer before the drop.
				if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{p.Name}.Sanitize()+` WHERE `+live+`)`).
					Scan(&kept); err != nil || kept {
					return err
				}
			}
			_, err := tx.db.Exec(ctx, `DROP TABLE `+pgx.Identifier{p.Name}.Sanitize())
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("drop partition %s: %w", p.Name, translate(err))
		}
		if kept {
			held = append(held, p.Name)
			continue
		}
		dropped = append(dropped, p.Name)
	}
	if len(held) > 0 {
		return dropped, fmt.Errorf("drop partitions of %s: %w: %s", table, ErrPartitionHeld, strings.Join(held, ", "))
	}
	return dropped, nil
}

// PruneDefaultPartition deletes from table's default partition up to limit rows older than
// cutoff. The default partition holds only rows dated outside every month created (a tower
// whose clock is years off, a backfill), so this is a trickle, not the table's retention.
func (s *Store) PruneDefaultPartition(ctx context.Context, table string, cutoff time.Time, limit int) (int64, error) {
	if err := checkHistoryTable(table); err != nil {
		return 0, err
	}
	def := pgx.Identifier{table + "_default"}.Sanitize()
	spec := historyTables[table]
	cond := pgx.Identifier{spec.key}.Sanitize() + ` < $1`
	if spec.live != "" {
		cond += ` AND NOT (` + spec.live + `)`
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM `+def+` WHERE ctid = ANY (ARRAY(SELECT ctid FROM `+def+` WHERE `+cond+` LIMIT $2))`,
		cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("prune default partition of %s: %w", table, translate(err))
	}
	return tag.RowsAffected(), nil
}

// HistoryStats reads table's partitions from the catalog.
func (s *Store) HistoryStats(ctx context.Context, table string) (HistoryStats, error) {
	if err := checkHistoryTable(table); err != nil {
		return HistoryStats{}, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT c.relname, pg_total_relation_size(c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass
		ORDER BY c.relname`, table)
	if err != nil {
		return HistoryStats{}, fmt.Errorf("list partitions of %s: %w", table, translate(err))
	}
	type row struct {
		name  string
		bytes int64
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.name, &x.bytes)
	})
	if err != nil {
		return HistoryStats{}, fmt.Errorf("list partitions of %s: %w", table, translate(err))
	}
	st := HistoryStats{Table: table}
	for _, x := range list {
		if x.name == table+"_default" {
			st.DefaultBytes = x.bytes
			continue
		}
		suffix, ok := strings.CutPrefix(x.name, table+"_p")
		if !ok {
			continue
		}
		m, err := time.Parse("200601", suffix)
		if err != nil {
			continue // not one of ours
		}
		st.Partitions = append(st.Partitions, Partition{Name: x.name, Month: m, Bytes: x.bytes})
	}
	return st, nil
}
