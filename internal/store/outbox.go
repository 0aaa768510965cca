package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxItem is a workflow start (and optional signal) recorded with the state change it
// belongs to. Dispatching is idempotent: workflow IDs are fixed, so a repeat is harmless.
type OutboxItem struct {
	ID               int64
	WorkflowID       string
	WorkflowType     string
	Input            json.RawMessage
	SearchAttributes map[string]string
	SignalName       string
	SignalArg        json.RawMessage
	Attempts         int
	CreatedAt        time.Time
}

// EnqueueWorkflows records items in the outbox, in one round trip, and sets their ids; the
// sweep dispatches an item after grace unless the first dispatch (outbox.Record's, after
// the commit) did. Call it inside the transaction of the change the items belong to:
// outbox.Record does.
func (s *Store) EnqueueWorkflows(ctx context.Context, grace time.Duration, items []OutboxItem) error {
	if len(items) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, it := range items {
		attrs, err := json.Marshal(it.SearchAttributes)
		if err != nil {
			return fmt.Errorf("encode search attributes: %w", err)
		}
		var signalName, signalArg any
		if it.SignalName != "" {
			signalName = it.SignalName
		}
		if it.SignalArg != nil {
			signalArg = []byte(it.SignalArg)
		}
		b.Queue(`
			INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, signal_name, signal_arg, next_attempt_at)
			VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
			RETURNING id`,
			it.WorkflowID, it.WorkflowType, []byte(it.Input), attrs, signalName, signalArg, grace.Seconds())
	}
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	for i := range items {
		if err := br.QueryRow().Scan(&items[i].ID); err != nil {
			return fmt.Errorf("enqueue workflow: %w", translate(err))
		}
	}
	return nil
}

// EnqueueWorkflow records one item (EnqueueWorkflows) and returns its id.
func (s *Store) EnqueueWorkflow(ctx context.Context, item OutboxItem, grace time.Duration) (int64, error) {
	items := []OutboxItem{item}
	if err := s.EnqueueWorkflows(ctx, grace, items); err != nil {
		return 0, err
	}
	return items[0].ID, nil
}

// ClaimDueOutbox leases up to limit due items for lease, fairly between organizations: each
// organization's oldest first, round-robin (the first item of every organization, then the
// second, ...), so one organization's backlog does not hold back another's. Concurrent
// dispatchers (one per apiserver) never claim the same item at the same time.
func (s *Store) ClaimDueOutbox(ctx context.Context, limit int, lease time.Duration) ([]OutboxItem, error) {
	rows, err := s.db.Query(ctx, `
		WITH due AS (
		    SELECT id, row_number() OVER (PARTITION BY search_attributes->>'OrganizationId' ORDER BY id) AS turn
		    FROM workflow_outbox WHERE next_attempt_at <= now()
		), pick AS (
		    SELECT o.id FROM workflow_outbox o JOIN due ON due.id = o.id
		    ORDER BY due.turn, o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED
		)
		UPDATE workflow_outbox o SET next_attempt_at = now() + make_interval(secs => $2), attempts = o.attempts + 1
		WHERE o.id IN (SELECT id FROM pick)
		RETURNING o.id, o.workflow_id, o.workflow_type, o.input, o.search_attributes,
		          coalesce(o.signal_name, ''), o.signal_arg, o.attempts, o.created_at`, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", translate(err))
	}
	defer rows.Close()
	var items []OutboxItem
	for rows.Next() {
		var it OutboxItem
		var attrs []byte
		if err := rows.Scan(&it.ID, &it.WorkflowID, &it.WorkflowType, &it.Input, &attrs, &it.SignalName,
			&it.SignalArg, &it.Attempts, &it.CreatedAt); err != nil {
			return nil, fmt.Errorf("scan outbox: %w", err)
		}
		if err := json.Unmarshal(attrs, &it.SearchAttributes); err != nil {
			return nil, fmt.Errorf("decode search attributes: %w", err)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", translate(err))
	}
	return items, nil
}

// DeleteOutbox removes dispatched items.
func (s *Store) DeleteOutbox(ctx context.Context, ids ...int64) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM workflow_outbox WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("delete outbox: %w", translate(err))
	}
	return nil
}

// RetryOutboxLater records a failed dispatch and when to try again.
func (s *Store) RetryOutboxLater(ctx context.Context, id int64, after time.Duration, cause string) error {
	if len(cause) > 500 {
		cause = cause[:500]
	}
	return s.exec(ctx, "reschedule outbox", `
		UPDATE workflow_outbox SET next_attempt_at = now() + make_interval(secs => $2), last_error = $3
		WHERE id = $1`, id, after.Seconds(), cause)
}

// OutboxBacklog returns how many items wait and the age of the oldest.
func (s *Store) OutboxBacklog(ctx context.Context) (count int, oldest time.Duration, err error) {
	var secs float64
	err = s.db.QueryRow(ctx, `
		SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM workflow_outbox`).Scan(&count, &secs)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox backlog: %w", translate(err))
	}
	return count, time.Duration(secs * float64(time.Second)), nil
}
