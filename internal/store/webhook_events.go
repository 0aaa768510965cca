package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The webhook-delivery workflow the outbox starts for each delivery. workflows holds the
// same names (WebhookDeliveryWorkflowName, WebhookDeliveryWorkflowID); a test keeps them equal.
const (
	WebhookDeliveryWorkflowType = "WebhookDelivery"
	WebhookDeliveryIDPrefix     = "webhook-delivery/"
)

// WebhookDeliveryWorkflowID is the workflow of one delivery's round (0: the first delivery,
// n: the n-th redelivery asked for through the API).
func WebhookDeliveryWorkflowID(deliveryID uuid.UUID, round int) string {
	if round == 0 {
		return WebhookDeliveryIDPrefix + deliveryID.String()
	}
	return fmt.Sprintf("%s%s/retry-%d", WebhookDeliveryIDPrefix, deliveryID, round)
}

// WebhookEndpoint is a receiver an organization (or one of its sub-organizations) registered.
type WebhookEndpoint struct {
	ID                   uuid.UUID
	OrgID                int64
	SubOrgID             *int64
	URL                  string
	Description          string
	EventTypes           []string
	Enabled              bool
	DisabledReason       *string
	SecretSealed         []byte
	PreviousSecretSealed []byte
	PreviousSecretUntil  *time.Time
	CreatedAt, UpdatedAt time.Time
}

// WebhookEvent is one recorded event.
type WebhookEvent struct {
	ID        uuid.UUID
	OrgID     int64
	SubOrgID  *int64
	Type      string
	Data      json.RawMessage
	CreatedAt time.Time
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

// WebhookScope is who manages endpoints: an organization-wide key (SubOrgID nil) sees every
// endpoint of the organization, a sub-organization key only its sub-organization's.
type WebhookScope struct {
	OrgID    int64
	SubOrgID *int64
}

const endpointColumns = `id, organization_id, sub_organization_id, url, description, event_types, enabled, disabled_reason,
	secret_sealed, previous_secret_sealed, previous_secret_until, created_at, updated_at`

func scanEndpoint(row pgx.Row) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := row.Scan(&e.ID, &e.OrgID, &e.SubOrgID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.SecretSealed, &e.PreviousSecretSealed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// scopeClause limits a query on webhook_endpoints (alias e) to sc, with $1 the organization
// and $2 the sub-organization.
const scopeClause = `e.organization_id = $1 AND e.deleted_at IS NULL AND ($2::bigint IS NULL OR e.sub_organization_id = $2)`

// CreateWebhookEndpoint stores a new endpoint.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) (WebhookEndpoint, error) {
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	out, err := scanEndpoint(s.db.QueryRow(ctx, `
		INSERT INTO webhook_endpoints (id, organization_id, sub_organization_id, url, description, event_types, enabled, secret_sealed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING `+endpointColumns,
		e.ID, e.OrgID, e.SubOrgID, e.URL, e.Description, e.EventTypes, e.Enabled, e.SecretSealed))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("create webhook endpoint: %w", translate(err))
	}
	s.forgetHookedOrgs()
	return out, nil
}

// WebhookEndpoints lists the endpoints sc manages, oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context, sc WebhookScope) ([]WebhookEndpoint, error) {
	rows, err := s.db.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE `+scopeClause+`
		ORDER BY created_at, id LIMIT 1000`, sc.OrgID, sc.SubOrgID)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookEndpoint, error) { return scanEndpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", translate(err))
	}
	return out, nil
}

// WebhookEndpoint returns one endpoint sc manages (ErrNotFound otherwise).
func (s *Store) WebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID) (WebhookEndpoint, error) {
	e, err := scanEndpoint(s.db.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE `+scopeClause+` AND e.id = $3`,
		sc.OrgID, sc.SubOrgID, id))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("webhook endpoint: %w", translate(err))
	}
	return e, nil
}

// WebhookEndpointPatch holds the fields an update changes (nil: unchanged).
type WebhookEndpointPatch struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	Enabled     *bool
}

// UpdateWebhookEndpoint changes an endpoint sc manages. Enabling it again clears the reason
// it was disabled and its run of failures.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID, p WebhookEndpointPatch) (WebhookEndpoint, error) {
	var types []string
	if p.EventTypes != nil {
		types = *p.EventTypes
		if types == nil {
			types = []string{}
		}
	}
	e, err := scanEndpoint(s.db.QueryRow(ctx, `
		UPDATE webhook_endpoints e SET
		    url = coalesce($4, url), description = coalesce($5, description),
		    event_types = CASE WHEN $6 THEN $7::text[] ELSE event_types END,
		    enabled = coalesce($8, enabled),
		    disabled_reason = CASE WHEN $8 THEN NULL ELSE disabled_reason END,
		    failing_since = CASE WHEN $8 THEN NULL ELSE failing_since END,
		    updated_at = now()
		WHERE `+scopeClause+` AND e.id = $3
		RETURNING `+endpointColumns,
		sc.OrgID, sc.SubOrgID, id, p.URL, p.Description, p.EventTypes != nil, types, p.Enabled))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update webhook endpoint: %w", translate(err))
	}
	return e, nil
}

// DeleteWebhookEndpoint removes an endpoint sc manages; its pending deliveries end as failed
// and their workflows stop at their next attempt.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID) error {
	var n int
	err := s.db.QueryRow(ctx, `
		WITH del AS (
		    UPDATE webhook_endpoints e SET deleted_at = now(), enabled = false, updated_at = now()
		    WHERE `+scopeClause+` AND e.id = $3 RETURNING e.id
		), ended AS (
		    UPDATE webhook_deliveries d SET status = 'failed', last_error = 'endpoint deleted', next_attempt_at = NULL,
		        completed_at = now()
		    FROM del WHERE d.endpoint_id = del.id AND d.status = 'pending'
		)
		SELECT count(*) FROM del`, sc.OrgID, sc.SubOrgID, id).Scan(&n)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", translate(err))
	}
	if n == 0 {
		return fmt.Errorf("delete webhook endpoint: %w", ErrNotFound)
	}
	return nil
}

// RotateWebhookSecret makes sealed the endpoint's secret; the old one keeps signing until
// until.
func (s *Store) RotateWebhookSecret(ctx context.Context, sc WebhookScope, id uuid.UUID, sealed []byte, until time.Time) error {
	tag, err := s.db.Exec(ctx, `
		UPDATE webhook_endpoints e SET previous_secret_sealed = secret_sealed, previous_secret_until = $5,
		    secret_sealed = $4, updated_at = now()
		WHERE `+scopeClause+` AND e.id = $3`, sc.OrgID, sc.SubOrgID, id, sealed, until)
	if err != nil {
		return fmt.Errorf("rotate webhook secret: %w", translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("rotate webhook secret: %w", ErrNotFound)
	}
	return nil
}

// Event is what RecordEvent records: Data is the object as the API shows it.
type Event struct {
	OrgID    int64
	SubOrgID *int64
	// LocationID, when SubOrgID is nil, gives the event its location's sub-organization.
	LocationID int64
	Type       string
	Data       any
	// Only, when set, delivers the event to this endpoint alone (webhook.test).
	Only *uuid.UUID
}

// MaxEventSize bounds an event's encoded data (DESIGN §10: events are at most 64 KiB).
const MaxEventSize = 60 << 10

// RecordEvent records an event, a delivery to every enabled endpoint that wants it, and each
// delivery's workflow start in the outbox, in one statement: called on a transaction's store
// (WithTx), the event commits or rolls back with the change it reports. The outbox sweep
// starts the deliveries' workflows within a second of the commit. An organization without
// any endpoint records nothing: its event log starts with its first endpoint, and the
// changes of organizations that use no webhooks cost one index lookup. The returned id is
// uuid.Nil when nothing was recorded.
func (s *Store) RecordEvent(ctx context.Context, ev Event) (uuid.UUID, error) {
	// A test event names its endpoint, which exists: it is recorded whatever this process's
	// list of the organizations with endpoints says.
	if ev.Only == nil && !s.wantsEvents(ctx, ev.OrgID) {
		return uuid.Nil, nil
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return uuid.Nil, fmt.Errorf("record event %s: encode data: %w", ev.Type, err)
	}
	if len(data) > MaxEventSize {
		return uuid.Nil, fmt.Errorf("record event %s: data is %d bytes, over %d", ev.Type, len(data), MaxEventSize)
	}
	id := uuid.New()
	var recorded int
	err = s.db.QueryRow(ctx, `
		WITH ev AS (
		    INSERT INTO webhook_events (id, organization_id, sub_organization_id, type, data)
		    SELECT $1, $2, coalesce($3, (SELECT sub_organization_id FROM locations WHERE id = $9)), $4, $5
		    WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE organization_id = $2 AND deleted_at IS NULL)
		    RETURNING id, sub_organization_id
		), d AS (
		    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, next_attempt_at)
		    SELECT gen_random_uuid(), e.id, ev.id, $2, now() FROM webhook_endpoints e, ev
		    WHERE e.organization_id = $2 AND e.deleted_at IS NULL AND e.enabled
		      AND (e.sub_organization_id IS NULL OR e.sub_organization_id = ev.sub_organization_id)
		      AND (cardinality(e.event_types) = 0 OR $4 = ANY (e.event_types) OR $6::uuid IS NOT NULL)
		      AND ($6::uuid IS NULL OR e.id = $6)
		    RETURNING id, endpoint_id
		), ob AS (
		    INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, next_attempt_at)
		    SELECT $7 || d.id::text, $8, jsonb_build_object('delivery_id', d.id::text),
		           jsonb_build_object('OrganizationId', $2::text, 'WebhookEndpointId', d.endpoint_id::text, 'EventType', $4::text), now()
		    FROM d
		)
		SELECT count(*) FROM ev`,
		id, ev.OrgID, ev.SubOrgID, ev.Type, data, ev.Only, WebhookDeliveryIDPrefix, WebhookDeliveryWorkflowType, ev.LocationID).Scan(&recorded)
	if err != nil {
		return uuid.Nil, fmt.Errorf("record event %s: %w", ev.Type, translate(err))
	}
	if recorded == 0 {
		return uuid.Nil, nil
	}
	return id, nil
}

const eventColumns = `id, organization_id, sub_organization_id, type, data, created_at`

func scanEvent(row pgx.Row) (WebhookEvent, error) {
	var e WebhookEvent
	err := row.Scan(&e.ID, &e.OrgID, &e.SubOrgID, &e.Type, &e.Data, &e.CreatedAt)
	return e, err
}

// Cursor is a position in a list ordered by (created_at, id) descending: the last entry of
// the previous page.
type Cursor struct {
	At time.Time
	ID uuid.UUID
}

// args are the cursor's query arguments (both nil: from the start).
func (c *Cursor) args() (*time.Time, *uuid.UUID) {
	if c == nil {
		return nil, nil
	}
	return &c.At, &c.ID
}

// EventFilter selects from an organization's event log.
type EventFilter struct {
	Scope WebhookScope
	Type  string
	Since *time.Time
	// After is the position of the previous page's last event (newest first).
	After *Cursor
	Limit int
}

// WebhookEvents lists events newest first.
func (s *Store) WebhookEvents(ctx context.Context, f EventFilter) ([]WebhookEvent, error) {
	afterAt, afterID := f.After.args()
	rows, err := s.db.Query(ctx, `SELECT `+eventColumns+` FROM webhook_events
		WHERE organization_id = $1 AND ($2::bigint IS NULL OR sub_organization_id = $2)
		  AND ($3 = '' OR type = $3) AND ($4::timestamptz IS NULL OR created_at >= $4)
		  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $7`,
		f.Scope.OrgID, f.Scope.SubOrgID, f.Type, f.Since, afterAt, afterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook events: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookEvent, error) { return scanEvent(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhook events: %w", translate(err))
	}
	return out, nil
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
	rows, err := s.db.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id
		WHERE d.endpoint_id = $1 AND d.organization_id = $2 AND ($3 = '' OR d.status = $3)
		  AND ($4::timestamptz IS NULL OR (d.created_at, d.id) < ($4, $5::uuid))
		ORDER BY d.created_at DESC, d.id DESC LIMIT $6`,
		f.EndpointID, f.Scope.OrgID, f.Status, afterAt, afterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookDelivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", translate(err))
	}
	return out, nil
}

// WebhookDeliveryInScope returns one delivery to an endpoint sc manages.
func (s *Store) WebhookDeliveryInScope(ctx context.Context, sc WebhookScope, id uuid.UUID) (WebhookDelivery, error) {
	d, err := scanDelivery(s.db.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events ev ON ev.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id
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
			JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN webhook_events ev ON ev.id = d.event_id
			WHERE `+scopeClause+` AND d.id = $3 FOR UPDATE OF d`, sc.OrgID, sc.SubOrgID, id).Scan(&enabled, &round, &endpointID, &eventType)
		if err != nil {
			return fmt.Errorf("retry webhook delivery: %w", translate(err))
		}
		if !enabled {
			return fmt.Errorf("retry webhook delivery: %w: the endpoint is disabled", ErrConflict)
		}
		round++
		_, err = tx.db.Exec(ctx, `
			WITH upd AS (
			    UPDATE webhook_deliveries SET status = 'pending', round = $2, next_attempt_at = now(), completed_at = NULL
			    WHERE id = $1
			)
			INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, next_attempt_at)
			VALUES ($3, $4, jsonb_build_object('delivery_id', $1::text, 'round', $2::int),
			        jsonb_build_object('OrganizationId', $5::text, 'WebhookEndpointId', $6::text, 'EventType', $7::text), now())`,
			id, round, WebhookDeliveryWorkflowID(id, round), WebhookDeliveryWorkflowType, strconv.FormatInt(sc.OrgID, 10),
			endpointID.String(), eventType)
		if err != nil {
			return fmt.Errorf("retry webhook delivery: %w", translate(err))
		}
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

// WebhookAttemptOf loads a delivery with its endpoint and event.
func (s *Store) WebhookAttemptOf(ctx context.Context, deliveryID uuid.UUID) (WebhookAttempt, error) {
	var a WebhookAttempt
	d, err := scanDelivery(s.db.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		JOIN webhook_events ev ON ev.id = d.event_id WHERE d.id = $1`, deliveryID))
	if err != nil {
		return a, fmt.Errorf("webhook delivery: %w", translate(err))
	}
	a.Delivery = d
	var deletedAt *time.Time
	row := s.db.QueryRow(ctx, `SELECT `+endpointColumns+`, deleted_at FROM webhook_endpoints WHERE id = $1`, d.EndpointID)
	e := &a.Endpoint
	if err := row.Scan(&e.ID, &e.OrgID, &e.SubOrgID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.SecretSealed, &e.PreviousSecretSealed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt, &deletedAt); err != nil {
		return a, fmt.Errorf("webhook endpoint: %w", translate(err))
	}
	a.Deleted = deletedAt != nil
	a.Event, err = scanEvent(s.db.QueryRow(ctx, `SELECT `+eventColumns+` FROM webhook_events WHERE id = $1`, d.EventID))
	if err != nil {
		return a, fmt.Errorf("webhook event: %w", translate(err))
	}
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
	return s.WithTx(ctx, func(tx *Store) error {
		var endpointID uuid.UUID
		err := tx.db.QueryRow(ctx, `
			UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, last_status_code = $4, last_error = $5,
			    next_attempt_at = $6, completed_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END
			WHERE id = $1 AND round = $2 AND status = 'pending'
			RETURNING endpoint_id`, deliveryID, round, status, code, lastErr, o.NextAttemptAt).Scan(&endpointID)
		if err != nil {
			if err = translate(err); errors.Is(err, ErrNotFound) {
				return ErrStaleRound
			}
			return fmt.Errorf("record webhook attempt: %w", err)
		}
		switch {
		case o.Succeeded:
			_, err = tx.db.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, endpointID)
		case o.Disable != "":
			_, err = tx.db.Exec(ctx, `UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, updated_at = now()
				WHERE id = $1 AND enabled`, endpointID, o.Disable)
		case o.Final:
			_, err = tx.db.Exec(ctx, `
				UPDATE webhook_endpoints e SET failing_since = coalesce(e.failing_since, d.created_at),
				    enabled = CASE WHEN coalesce(e.failing_since, d.created_at) <= now() - make_interval(secs => $3) THEN false ELSE e.enabled END,
				    disabled_reason = CASE WHEN coalesce(e.failing_since, d.created_at) <= now() - make_interval(secs => $3)
				        THEN 'every delivery failed for ' || ($3 / 86400)::int || ' days' ELSE e.disabled_reason END
				FROM webhook_deliveries d WHERE d.id = $2 AND e.id = $1`, endpointID, deliveryID, failFor.Seconds())
		}
		if err != nil {
			return fmt.Errorf("record webhook attempt: %w", translate(err))
		}
		return nil
	})
}

// PruneWebhookEvents deletes events (and their deliveries) older than keep, at most limit
// at a time; it returns how many it deleted.
func (s *Store) PruneWebhookEvents(ctx context.Context, keep time.Duration, limit int) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM webhook_events WHERE id IN (
		SELECT id FROM webhook_events WHERE created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2)`,
		keep.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", translate(err))
	}
	return tag.RowsAffected(), nil
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
