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
	ids, err := s.RecordEvents(ctx, []Event{ev})
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}

// RecordEvents records several events as RecordEvent records one, all in one statement: a
// batch of changes (the due pass's overdue marks) records its events in one round trip. It
// returns each event's id, uuid.Nil where nothing was recorded.
func (s *Store) RecordEvents(ctx context.Context, evs []Event) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(evs))
	var in eventRows
	for i, ev := range evs {
		// A test event names its endpoint, which exists: it is recorded whatever this process's
		// list of the organizations with endpoints says.
		if ev.Only == nil && !s.wantsEvents(ctx, ev.OrgID) {
			continue
		}
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return nil, fmt.Errorf("record event %s: encode data: %w", ev.Type, err)
		}
		if len(data) > MaxEventSize {
			return nil, fmt.Errorf("record event %s: data is %d bytes, over %d", ev.Type, len(data), MaxEventSize)
		}
		ids[i] = uuid.New()
		in.add(ids[i], ev, data)
	}
	if len(in.id) == 0 {
		return ids, nil
	}
	var recorded []uuid.UUID
	var started []committedStart
	// The outbox rows are contract.WebhookDelivery.Start's (its prefix, type, input and search attributes,
	// built here in SQL so the events, their deliveries and their starts are one statement and
	// one round trip; TestRecordEventOutboxRowsAreTheContractsStarts keeps the two equal).
	err := s.db.QueryRow(ctx, `
		WITH input AS (
		    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::uuid[])
		        AS i (id, organization_id, sub_organization_id, location_id, type, data, only_endpoint)
		), ev AS (
		    INSERT INTO webhook_events (id, organization_id, sub_organization_id, type, data)
		    SELECT i.id, i.organization_id,
		           coalesce(i.sub_organization_id, (SELECT sub_organization_id FROM locations WHERE id = i.location_id)),
		           i.type, i.data::jsonb
		    FROM input i
		    WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE organization_id = i.organization_id AND deleted_at IS NULL)
		    RETURNING id, organization_id, sub_organization_id, type, created_at
		), d AS (
		    -- A delivery has its event's created_at: both go in the same month's partitions.
		    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, next_attempt_at, created_at)
		    SELECT gen_random_uuid(), e.id, ev.id, ev.organization_id, now(), ev.created_at
		    FROM ev JOIN input i ON i.id = ev.id JOIN webhook_endpoints e ON e.organization_id = ev.organization_id
		    WHERE e.deleted_at IS NULL AND e.enabled
		      AND (e.sub_organization_id IS NULL OR e.sub_organization_id = ev.sub_organization_id)
		      AND (cardinality(e.event_types) = 0 OR ev.type = ANY (e.event_types) OR i.only_endpoint IS NOT NULL)
		      AND (i.only_endpoint IS NULL OR e.id = i.only_endpoint)
		    RETURNING id, endpoint_id, event_id, organization_id
		), ob AS (
		    INSERT INTO workflow_outbox (workflow_id, workflow_type, input, search_attributes, next_attempt_at)
		    SELECT $8 || d.id::text, $9, jsonb_build_object('delivery_id', d.id::text, 'revision', $11::int),
		           jsonb_build_object('OrganizationId', d.organization_id::text, 'WebhookEndpointId', d.endpoint_id::text, 'EventType', ev.type),
		           now() + make_interval(secs => $10)
		    FROM d JOIN ev ON ev.id = d.event_id
		    RETURNING `+committedStartColumns+`
		)
		SELECT (SELECT coalesce(array_agg(id), '{}') FROM ev), `+committedStartsAgg+` FROM ob`,
		in.id, in.org, in.subOrg, in.location, in.typ, in.data, in.only, contract.WebhookDeliveryIDPrefix,
		contract.WebhookDeliveryWorkflowName, s.deliveryGrace().Seconds(), contract.WebhookRevisionMarkerless).Scan(&recorded, &started)
	if err != nil {
		return nil, fmt.Errorf("record event %s: %w", in.typ[0], translate(err))
	}
	// An organization without endpoints (another process removed its last one) records nothing.
	if len(recorded) < len(in.id) {
		kept := make(map[uuid.UUID]bool, len(recorded))
		for _, id := range recorded {
			kept[id] = true
		}
		for i, id := range ids {
			if !kept[id] {
				ids[i] = uuid.Nil
			}
		}
	}
	s.committedDeliveries(outboxItems(started))
	return ids, nil
}

// eventRows are RecordEvents' input as columns, for unnest.
type eventRows struct {
	id               []uuid.UUID
	org              []int64
	subOrg, location []*int64
	typ, data        []string
	only             []*uuid.UUID
}

func (r *eventRows) add(id uuid.UUID, ev Event, data []byte) {
	var loc *int64
	if ev.LocationID != 0 {
		loc = &ev.LocationID
	}
	r.id, r.org, r.subOrg, r.location = append(r.id, id), append(r.org, ev.OrgID), append(r.subOrg, ev.SubOrgID), append(r.location, loc)
	r.typ, r.data, r.only = append(r.typ, ev.Type), append(r.data, string(data)), append(r.only, ev.Only)
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
