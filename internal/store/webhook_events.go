package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/workflows/contract"
)

// WebhookEvent is one recorded event.
type WebhookEvent struct {
	ID        uuid.UUID
	OrgID     int64
	SubOrgID  *int64
	Type      string
	Data      json.RawMessage
	CreatedAt time.Time
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
// delivery's workflow start in the outbox (the row contract.WebhookDelivery.Start describes), in one statement:
// called on a transaction's store (WithTx), the event commits or rolls back with the change
// it reports; called outside one, the statement commits on its own. The deliveries'
// workflows start right after the commit when the store hands them off (HandOffEvents),
// otherwise the outbox sweep starts them within a second of it. An organization without
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
	var started []committedStart
	// The outbox rows are contract.WebhookDelivery.Start's (its prefix, type, input and search attributes,
	// built here in SQL so the event, its deliveries and their starts are one statement and
	// one round trip; TestRecordEventOutboxRowsAreWebhookrows keeps the two equal).
	err = s.db.QueryRow(ctx, `
		WITH ev AS (
		    INSERT INTO webhook_events (id, organization_id, sub_organization_id, type, data)
		    SELECT $1, $2, coalesce($3, (SELECT sub_organization_id FROM locations WHERE id = $9)), $4, $5
		    WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE organization_id = $2 AND deleted_at IS NULL)
		    RETURNING id, sub_organization_id, created_at
		), d AS (
		    -- A delivery has its event's created_at: both go in the same month's partitions.
		    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, next_attempt_at, created_at)
		    SELECT gen_random_uuid(), e.id, ev.id, $2, now(), ev.created_at FROM webhook_endpoints e, ev
		    WHERE e.organization_id = $2 AND e.deleted_at IS NULL AND e.enabled
		      AND (e.sub_organization_id IS NULL OR e.sub_organization_id = ev.sub_organization_id)
		      AND (cardinality(e.event_types) = 0 OR $4 = ANY (e.event_types) OR $6::uuid IS NOT NULL)
		      AND ($6::uuid IS NULL OR e.id = $6)
		    RETURNING id, endpoint_id
		), ob AS (
		    INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, next_attempt_at)
		    SELECT $7 || d.id::text, $8, jsonb_build_object('delivery_id', d.id::text, 'revision', $11::int),
		           jsonb_build_object('OrganizationId', $2::text, 'WebhookEndpointId', d.endpoint_id::text, 'EventType', $4::text),
		           now() + make_interval(secs => $10)
		    FROM d
		    RETURNING `+committedStartColumns+`
		)
		SELECT (SELECT count(*) FROM ev), `+committedStartsAgg+` FROM ob`,
		id, ev.OrgID, ev.SubOrgID, ev.Type, data, ev.Only, contract.WebhookDeliveryIDPrefix, contract.WebhookDeliveryWorkflowName, ev.LocationID,
		s.deliveryGrace().Seconds(), contract.WebhookRevisionMarkerless).Scan(&recorded, &started)
	if err != nil {
		return uuid.Nil, fmt.Errorf("record event %s: %w", ev.Type, translate(err))
	}
	if recorded == 0 {
		return uuid.Nil, nil
	}
	s.committedDeliveries(outboxItems(started))
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
	return listRows(ctx, s, "webhook events", func(r pgx.CollectableRow) (WebhookEvent, error) { return scanEvent(r) },
		`SELECT `+eventColumns+` FROM webhook_events
		WHERE organization_id = $1 AND ($2::bigint IS NULL OR sub_organization_id = $2)
		  AND ($3 = '' OR type = $3) AND ($4::timestamptz IS NULL OR created_at >= $4)
		  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $7`,
		f.Scope.OrgID, f.Scope.SubOrgID, f.Type, f.Since, afterAt, afterID, f.Limit)
}
