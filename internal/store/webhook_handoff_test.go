package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// handoffFixture is a seeded database whose store hands its delivery starts to h (an hour's
// grace before the sweep), and the demo organization's id.
func handoffFixture(t *testing.T) (*store.Store, int64, *testenv.HandedOff) {
	st, demo := seeded(t)
	h := &testenv.HandedOff{}
	st.HandOffEvents(h, time.Hour)
	return st, demo.Credentials.OrganizationID, h
}

// A committed event's delivery starts are handed off when its transaction commits (never
// before, never for one rolled back), as the outbox rows that commit wrote; those rows are
// left to the hand-off for its grace before the sweep may take them.
func TestRecordEventHandsOffAtCommit(t *testing.T) {
	t.Parallel()
	st, org, h := handoffFixture(t)
	ctx := context.Background()

	ep := createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/", Enabled: true})
	createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/two", Enabled: true})

	boom := errors.New("the change failed")
	err := st.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.RecordEvent(ctx, store.Event{OrgID: org, Type: "gateway.offline", Data: map[string]int{"n": 1}})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Empty(t, h.Take(), "rolled back: nothing handed off")

	var evID uuid.UUID
	err = st.WithTx(ctx, func(tx *store.Store) error {
		var err error
		evID, err = tx.RecordEvent(ctx, store.Event{OrgID: org, Type: "gateway.offline", Data: map[string]int{"n": 2}})
		require.NoError(t, err)
		assert.Empty(t, h.Take(), "not before the commit")
		return nil
	})
	require.NoError(t, err)
	items := h.Take()
	require.Len(t, items, 2, "one start per endpoint")
	rows, err := st.WebhookDeliveries(ctx, store.DeliveryFilter{Scope: store.WebhookScope{OrgID: org}, EndpointID: ep.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	var mine store.OutboxItem
	for _, it := range items {
		var in struct {
			DeliveryID string `json:"delivery_id"`
		}
		require.NoError(t, json.Unmarshal(it.Input, &in))
		assert.Equal(t, contract.WebhookDeliveryWorkflowID(in.DeliveryID, 0), it.WorkflowID)
		assert.Equal(t, contract.WebhookDeliveryWorkflowName, it.WorkflowType)
		if in.DeliveryID == rows[0].ID.String() {
			mine = it
		}
	}
	require.NotZero(t, mine.ID, "the endpoint's delivery is handed off")
	assert.Equal(t, map[string]string{"OrganizationId": strconv.FormatInt(org, 10), "WebhookEndpointId": ep.ID.String(), "EventType": "gateway.offline"},
		mine.SearchAttributes)
	assert.Equal(t, evID, rows[0].EventID)
	// The row is the one handed off, and the sweep leaves it alone for the grace.
	claimed, err := st.ClaimDueOutbox(ctx, 100, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, deliveries(claimed), "left to the hand-off")
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE id = $1 AND workflow_id = $2
		AND next_attempt_at > now() + interval '59 minutes'`, mine.ID, mine.WorkflowID))

	// Outside a transaction the statement commits on its own: handed off at once.
	only := ep.ID
	_, err = st.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Only: &only, Data: map[string]int{"n": 3}})
	require.NoError(t, err)
	assert.Len(t, h.Take(), 1)

	// A redelivery's new round is handed off too.
	_, err = st.Pool().Exec(ctx, `UPDATE webhook_deliveries SET status = 'failed' WHERE id = $1`, rows[0].ID)
	require.NoError(t, err)
	_, err = st.RetryWebhookDelivery(ctx, store.WebhookScope{OrgID: org}, rows[0].ID)
	require.NoError(t, err)
	retried := h.Take()
	require.Len(t, retried, 1)
	assert.Equal(t, contract.WebhookDeliveryWorkflowID(rows[0].ID.String(), 1), retried[0].WorkflowID)
	assert.JSONEq(t, `{"delivery_id": "`+rows[0].ID.String()+`", "round": 1, "revision": 1}`, string(retried[0].Input))

	// Without a hand-off the rows are due at once, for the sweep.
	st.HandOffEvents(nil, 0)
	_, err = st.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Only: &only, Data: map[string]int{"n": 4}})
	require.NoError(t, err)
	assert.Empty(t, h.Take())
	claimed, err = st.ClaimDueOutbox(ctx, 100, time.Minute)
	require.NoError(t, err)
	assert.Len(t, deliveries(claimed), 1)
}

func deliveries(items []store.OutboxItem) []store.OutboxItem {
	var out []store.OutboxItem
	for _, it := range items {
		if it.WorkflowType == contract.WebhookDeliveryWorkflowName {
			out = append(out, it)
		}
	}
	return out
}

// A view from HoldHandoff keeps the starts of what it commits until release, which hands
// them off together; the store itself hands off at each commit meanwhile, and the kept rows
// keep the hand-off's grace.
func TestHoldHandoffKeepsStartsUntilRelease(t *testing.T) {
	t.Parallel()
	st, org, h := handoffFixture(t)
	ctx := context.Background()
	createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/", Enabled: true})

	held, release := st.HoldHandoff()
	for i := range 2 {
		_, err := held.RecordEvent(ctx, store.Event{OrgID: org, Type: "gateway.offline", Data: map[string]int{"n": i}})
		require.NoError(t, err)
	}
	err := held.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.RecordEvent(ctx, store.Event{OrgID: org, Type: "gateway.offline", Data: map[string]int{"n": 3}})
		return err
	})
	require.NoError(t, err)
	assert.Empty(t, h.Take(), "kept until release")
	_, err = st.RecordEvent(ctx, store.Event{OrgID: org, Type: "gateway.offline", Data: map[string]int{"n": 4}})
	require.NoError(t, err)
	assert.Len(t, h.Take(), 1, "the store itself hands off at once")
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE next_attempt_at > now() + interval '50 minutes'`),
		"every row left to the hand-off for its grace")

	release()
	assert.Len(t, h.Take(), 3, "released together")
	release()
	assert.Empty(t, h.Take(), "a second release hands off nothing")
}
