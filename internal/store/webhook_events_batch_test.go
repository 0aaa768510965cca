package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// RecordEvents records a batch as RecordEvent records each of its events: the same
// endpoints per event (sub-organization and type filters, a test event's one endpoint), an id
// per recorded event, uuid.Nil for an organization without endpoints, and nothing at all when
// the transaction rolls back.
func TestRecordEventsBatch(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	org := demo.Credentials.OrganizationID
	sub := demo.Credentials.SubOrganizationID
	all := createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/", Enabled: true})
	subs := createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, SubOrgID: &sub, URL: "http://127.0.0.1:9/sub",
		EventTypes: []string{"parcel.overdue"}, Enabled: true})
	other := sub + 1000
	evs := []store.Event{
		{OrgID: org, SubOrgID: &sub, Type: "parcel.overdue", Data: map[string]int{"n": 1}},               // both endpoints
		{OrgID: org, SubOrgID: &sub, Type: "parcel.returned", Data: map[string]int{"n": 2}},              // the org-wide one
		{OrgID: org, SubOrgID: &other, Type: "parcel.overdue", Data: map[string]int{"n": 3}},             // the org-wide one
		{OrgID: org + 1000, Type: "parcel.overdue", Data: map[string]int{"n": 4}},                        // no endpoints: nothing
		{OrgID: org, SubOrgID: &sub, Type: "webhook.test", Data: map[string]int{"n": 5}, Only: &subs.ID}, // that endpoint alone
	}
	ids, err := st.RecordEvents(ctx, evs)
	require.NoError(t, err)
	require.Len(t, ids, len(evs))
	assert.Equal(t, uuid.Nil, ids[3], "an organization without endpoints records nothing")
	for i, want := range []struct {
		deliveries int
		endpoint   uuid.UUID
	}{{2, uuid.Nil}, {1, all.ID}, {1, all.ID}, {0, uuid.Nil}, {1, subs.ID}} {
		if i == 3 {
			continue
		}
		require.NotEqual(t, uuid.Nil, ids[i], "event %d recorded", i)
		assert.Equal(t, want.deliveries, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, ids[i]), "event %d", i)
		if want.endpoint != uuid.Nil {
			assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = $2`,
				ids[i], want.endpoint), "event %d", i)
		}
	}
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM webhook_events`))
	assert.Equal(t, 5, countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE workflow_type = 'WebhookDelivery'`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_events WHERE id = $1 AND sub_organization_id = $2 AND type = 'parcel.returned'`,
		ids[1], sub))

	// Rolled back with its change: none of the batch stays.
	err = st.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.RecordEvents(ctx, evs[:3])
		require.NoError(t, err)
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM webhook_events`))

	// An empty batch, and one with an event over the size limit (refused whole, never truncated).
	ids, err = st.RecordEvents(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, ids)
	_, err = st.RecordEvents(ctx, []store.Event{evs[0], {OrgID: org, Type: "webhook.test",
		Data: map[string]string{"x": string(make([]byte, store.MaxEventSize))}}})
	assert.Error(t, err)
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM webhook_events`))
}
