package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/workflows/contract"
)

// webhookStart is the outbox item that starts a delivery's round, as the contract builds it.
func webhookStart(d contract.WebhookDelivery) OutboxItem {
	r := d.Start()
	return OutboxItem{WorkflowID: r.WorkflowID, WorkflowType: r.WorkflowType, Input: r.Input, SearchAttributes: r.SearchAttributes}
}

// WebhookDelivery is one event's delivery to one endpoint.
type WebhookDelivery struct {
	ID, EndpointID, EventID uuid.UUID
	OrgID                   int64
	EventType               string
	Status                  string
	Attempts                int
	LastStatusCode          *int
	LastError               *string
	NextAttemptAt           *time.Time
	Round                   int
	CreatedAt               time.Time
	CompletedAt             *time.Time
}

const deliveryColumns = `d.id, d.endpoint_id, d.event_id, d.organization_id, ev.type, d.status, d.attempts, d.last_status_code,
	d.last_error, d.next_attempt_at, d.round, d.created_at, d.completed_at`

func scanDelivery(row pgx.Row) (WebhookDelivery, error) {
	var d WebhookDelivery
	err := row.Scan(&d.ID, &d.EndpointID, &d.EventID, &d.OrgID, &d.EventType, &d.Status, &d.Attempts, &d.LastStatusCode,
		&d.LastError, &d.NextAttemptAt, &d.Round, &d.CreatedAt, &d.CompletedAt)
	return d, err
}

// DeliveryFilter selects from an endpoint's delivery log.
type DeliveryFilter struct {
	Scope      WebhookScope
	EndpointID uuid.UUID
	Status     string
	After      *Cursor
	Limit      int
}

// WebhookDeliveries lists an endpoint's deliveries newest first (ErrNotFound: no such
// endpoint in the scope).
func (s *Store) WebhookDeliveries(ctx context.Context, f DeliveryFilter) ([]WebhookDelivery, error) {
	if _, err := s.WebhookEndpoint(ctx, f.Scope, f.EndpointID); err != nil {
		return nil, err
	}
	afterAt, afterID := f.After.args()
	return listRows(ctx, s, "webhook deliveries", func(r pgx.CollectableRow) (WebhookDelivery, error) { return scanDelivery(r) },
		`SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id AND ev.created_at = d.created_at
		WHERE d.endpoint_id = $1 AND d.organization_id = $2 AND ($3 = '' OR d.status = $3)
		  AND ($4::timestamptz IS NULL OR (d.created_at, d.id) < ($4, $5::uuid))
		ORDER BY d.created_at DESC, d.id DESC LIMIT $6`,
		f.EndpointID, f.Scope.OrgID, f.Status, afterAt, afterID, f.Limit)
}

// WebhookDeliveryInScope returns one delivery to an endpoint sc manages.
func (s *Store) WebhookDeliveryInScope(ctx context.Context, sc WebhookScope, id uuid.UUID) (WebhookDelivery, error) {
	d, err := scanDelivery(s.db.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events ev ON ev.id = d.event_id AND ev.created_at = d.created_at JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE `+scopeClause+` AND d.id = $3`, sc.OrgID, sc.SubOrgID, id))
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("webhook delivery: %w", translate(err))
	}
	return d, nil
}

// RetryWebhookDelivery starts a new round of a delivery: pending again, a new workflow
// (the next round's) in the outbox, attempting at once. A delivery whose endpoint was
// deleted or disabled cannot be retried (ErrConflict).
func (s *Store) RetryWebhookDelivery(ctx context.Context, sc WebhookScope, id uuid.UUID) (WebhookDelivery, error) {
	var d WebhookDelivery
	err := s.WithTx(ctx, func(tx *Store) error {
		var enabled bool
		var round int
		var endpointID uuid.UUID
		var eventType string
		err := tx.db.QueryRow(ctx, `SELECT e.enabled, d.round, d.endpoint_id, ev.type FROM webhook_deliveries d
			JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN webhook_events ev ON ev.id = d.event_id AND ev.created_at = d.created_at
			WHERE `+scopeClause+` AND d.id = $3 FOR UPDATE OF d`, sc.OrgID, sc.SubOrgID, id).Scan(&enabled, &round, &endpointID, &eventType)
		if err != nil {
			return fmt.Errorf("retry webhook delivery: %w", translate(err))
		}
		if !enabled {
			return fmt.Errorf("retry webhook delivery: %w: the endpoint is disabled", ErrConflict)
		}
		round++
		start := webhookStart(contract.WebhookDelivery{ID: id.String(), Round: round, OrgID: sc.OrgID, EndpointID: endpointID.String(), EventType: eventType})
		attrs, err := json.Marshal(start.SearchAttributes)
		if err != nil {
			return fmt.Errorf("retry webhook delivery: encode search attributes: %w", err)
		}
		var started []committedStart
		err = tx.db.QueryRow(ctx, `
			WITH upd AS (
			    UPDATE webhook_deliveries SET status = 'pending', round = $2, next_attempt_at = now(), completed_at = NULL
			    WHERE id = $1
			), ob AS (
			    INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, next_attempt_at)
			    VALUES ($3, $4, $5, $6, now() + make_interval(secs => $7))
			    RETURNING `+committedStartColumns+`
			)
			SELECT `+committedStartsAgg+` FROM ob`,
			id, round, start.WorkflowID, start.WorkflowType, []byte(start.Input), attrs, tx.deliveryGrace().Seconds()).Scan(&started)
		if err != nil {
			return fmt.Errorf("retry webhook delivery: %w", translate(err))
		}
		tx.committedDeliveries(outboxItems(started))
		d, err = tx.WebhookDeliveryInScope(ctx, sc, id)
		return err
	})
	return d, err
}

// WebhookAttempt is everything one delivery attempt needs, read fresh for each attempt.
type WebhookAttempt struct {
	Delivery WebhookDelivery
	Endpoint WebhookEndpoint
	Event    WebhookEvent
	Deleted  bool
}

// WebhookAttemptOf loads a delivery with its endpoint and event, in one query: an attempt
// reads it fresh each time, on the delivery's path, so it is one round trip.
func (s *Store) WebhookAttemptOf(ctx context.Context, deliveryID uuid.UUID) (WebhookAttempt, error) {
	var a WebhookAttempt
	d, e, ev := &a.Delivery, &a.Endpoint, &a.Event
	var deletedAt *time.Time
	err := s.db.QueryRow(ctx, `SELECT `+deliveryColumns+`,
		    e.id, e.organization_id, e.sub_organization_id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason,
		    e.secret_sealed, e.previous_secret_sealed, e.previous_secret_until, e.created_at, e.updated_at, e.deleted_at,
		    ev.id, ev.organization_id, ev.sub_organization_id, ev.type, ev.data, ev.created_at
		FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id AND ev.created_at = d.created_at JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.id = $1`, deliveryID).Scan(
		&d.ID, &d.EndpointID, &d.EventID, &d.OrgID, &d.EventType, &d.Status, &d.Attempts, &d.LastStatusCode,
		&d.LastError, &d.NextAttemptAt, &d.Round, &d.CreatedAt, &d.CompletedAt,
		&e.ID, &e.OrgID, &e.SubOrgID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.SecretSealed, &e.PreviousSecretSealed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt, &deletedAt,
		&ev.ID, &ev.OrgID, &ev.SubOrgID, &ev.Type, &ev.Data, &ev.CreatedAt)
	if err != nil {
		return WebhookAttempt{}, fmt.Errorf("webhook delivery: %w", translate(err))
	}
	a.Deleted = deletedAt != nil
	return a, nil
}

// AttemptOutcome is what one attempt came to.
type AttemptOutcome struct {
	StatusCode int // 0: no HTTP answer
	Error      string
	Succeeded  bool
	// Final: no attempt follows (succeeded, out of attempts, or the endpoint is gone).
	Final bool
	// NextAttemptAt is when the next attempt runs (when not Final).
	NextAttemptAt *time.Time
	// Disable disables the endpoint with this reason (410 Gone).
	Disable string
}

// ErrStaleRound means an attempt belongs to a round that a redelivery replaced.
var ErrStaleRound = errors.New("a newer delivery round replaced this one")

// RecordWebhookAttempt records one attempt of a delivery's round. A success ends the
// endpoint's run of failures; a final failure starts one, and an endpoint whose deliveries
// have all failed for failFor is disabled.
func (s *Store) RecordWebhookAttempt(ctx context.Context, deliveryID uuid.UUID, round int, o AttemptOutcome, failFor time.Duration) error {
	status := "pending"
	switch {
	case o.Succeeded:
		status = "succeeded"
	case o.Final:
		status = "failed"
	}
	var code *int
	if o.StatusCode != 0 {
		code = &o.StatusCode
	}
	var lastErr *string
	if o.Error != "" {
		e := o.Error
		if len(e) > 4096 {
			e = e[:4096]
		}
		lastErr = &e
	}
	// One statement (one round trip, one commit): the delivery's row, and the endpoint's
	// run of failures as the outcome says — a success ends it, a 410 disables the endpoint,
	// a final failure starts the run or, once it has lasted failFor, disables the endpoint.
	// The three endpoint updates exclude each other, so at most one touches the row.
	var updated int
	err := s.db.QueryRow(ctx, `
		WITH d AS (
		    UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, last_status_code = $4, last_error = $5,
		        next_attempt_at = $6, completed_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END
		    WHERE id = $1 AND round = $2 AND status = 'pending'
		    RETURNING endpoint_id, created_at
		), recovered AS (
		    UPDATE webhook_endpoints e SET failing_since = NULL FROM d
		    WHERE $7 AND e.id = d.endpoint_id AND e.failing_since IS NOT NULL
		), gone AS (
		    UPDATE webhook_endpoints e SET enabled = false, disabled_reason = $8, updated_at = now() FROM d
		    WHERE NOT $7 AND $8 <> '' AND e.id = d.endpoint_id AND e.enabled
		), failing AS (
		    UPDATE webhook_endpoints e SET failing_since = coalesce(e.failing_since, d.created_at),
		        enabled = CASE WHEN coalesce(e.failing_since, d.created_at) <= now() - make_interval(secs => $10) THEN false ELSE e.enabled END,
		        disabled_reason = CASE WHEN coalesce(e.failing_since, d.created_at) <= now() - make_interval(secs => $10)
		            THEN 'every delivery failed for ' || ($10 / 86400)::int || ' days' ELSE e.disabled_reason END
		    FROM d WHERE NOT $7 AND $8 = '' AND $9 AND e.id = d.endpoint_id
		)
		SELECT count(*) FROM d`, deliveryID, round, status, code, lastErr, o.NextAttemptAt,
		o.Succeeded, o.Disable, o.Final, failFor.Seconds()).Scan(&updated)
	if err != nil {
		return fmt.Errorf("record webhook attempt: %w", translate(err))
	}
	if updated == 0 {
		return ErrStaleRound
	}
	return nil
}

// EndpointBacklog is one endpoint's pending deliveries.
type EndpointBacklog struct {
	EndpointID uuid.UUID
	Pending    int
	Oldest     time.Duration
}

// WebhookBacklog lists the limit endpoints with the most pending deliveries.
func (s *Store) WebhookBacklog(ctx context.Context, limit int) ([]EndpointBacklog, error) {
	rows, err := s.db.Query(ctx, `
		SELECT endpoint_id, count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)
		FROM webhook_deliveries WHERE status = 'pending'
		GROUP BY endpoint_id ORDER BY count(*) DESC, endpoint_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndpointBacklog, error) {
		var b EndpointBacklog
		var secs float64
		err := r.Scan(&b.EndpointID, &b.Pending, &secs)
		b.Oldest = time.Duration(secs * float64(time.Second))
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", translate(err))
	}
	return out, nil
}
