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

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// An event commits with its change or not at all, reaches the endpoints that want it, and
// costs nothing to an organization without endpoints.
func TestRecordEvent(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	org := demo.Credentials.OrganizationID

	id, err := st.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Data: map[string]int{"n": 1}})
	require.NoError(t, err)
	assert.Equal(t, uuid.Nil, id, "no endpoint: nothing recorded")
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM webhook_events`))

	all := createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/", Enabled: true})
	sub := demo.Credentials.SubOrganizationID
	createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, SubOrgID: &sub, URL: "http://127.0.0.1:9/sub", EventTypes: []string{"access_code.used"}, Enabled: true})
	createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/off", Enabled: false})

	// Rolled back with its change: no event, no delivery, no workflow start.
	boom := errors.New("the change failed")
	err = st.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.RecordEvent(ctx, store.Event{OrgID: org, Type: "access_code.used", Data: map[string]int{"n": 2}})
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM webhook_events`))
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE workflow_type = 'WebhookDelivery'`))

	// Of another sub-organization: only the organization-wide endpoint.
	other := sub + 1000
	id, err = st.RecordEvent(ctx, store.Event{OrgID: org, SubOrgID: &other, Type: "access_code.used", Data: map[string]int{"n": 3}})
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, id)
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, id))
	// Of the sub-organization: both enabled endpoints; the disabled one gets nothing.
	id, err = st.RecordEvent(ctx, store.Event{OrgID: org, SubOrgID: &sub, Type: "access_code.used", Data: map[string]int{"n": 4}})
	require.NoError(t, err)
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, id))
	// A type the sub-organization's endpoint did not ask for.
	id, err = st.RecordEvent(ctx, store.Event{OrgID: org, SubOrgID: &sub, Type: "gateway.offline", Data: map[string]int{"n": 5}})
	require.NoError(t, err)
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = $2`, id, all.ID))
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE workflow_type = 'WebhookDelivery'
		AND search_attributes->>'OrganizationId' = $1`, strconv.FormatInt(org, 10)))

	// Data over the size limit is refused, never truncated.
	_, err = st.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Data: map[string]string{"x": string(make([]byte, store.MaxEventSize))}})
	assert.Error(t, err)

	// Past retention an event goes, with its deliveries: their month is dropped.
	old := time.Now().Add(-62 * 24 * time.Hour)
	for _, table := range []string{store.HistoryWebhookDeliveries, store.HistoryWebhookEvents} {
		_, err = st.EnsurePartitions(ctx, table, old, old)
		require.NoError(t, err)
	}
	_, err = st.Pool().Exec(ctx, `UPDATE webhook_events SET created_at = $2 WHERE id = $1`, id, old)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE webhook_deliveries SET created_at = $2 WHERE event_id = $1`, id, old)
	require.NoError(t, err)
	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	for _, table := range []string{store.HistoryWebhookDeliveries, store.HistoryWebhookEvents} {
		dropped, err := st.DropPartitions(ctx, table, cutoff)
		require.NoError(t, err)
		assert.Len(t, dropped, 1, table)
	}
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, id))
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM webhook_events`))
}

// createEndpoint creates the endpoint with a new id and a sealed secret, and requires it
// stored.
func createEndpoint(t *testing.T, st *store.Store, ep store.WebhookEndpoint) store.WebhookEndpoint {
	t.Helper()
	ep.ID, ep.SecretSealed = uuid.New(), []byte("s")
	got, err := st.CreateWebhookEndpoint(context.Background(), ep)
	require.NoError(t, err)
	return got
}

// endpointFixture is a seeded database with one enabled endpoint of the organization's for
// every event type; it returns the organization's id too.
func endpointFixture(t *testing.T) (*store.Store, int64, store.WebhookEndpoint) {
	t.Helper()
	st, demo := seeded(t)
	org := demo.Credentials.OrganizationID
	return st, org, createEndpoint(t, st, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/", Enabled: true})
}

// The outbox rows RecordEvent writes in SQL are the starts the workflows' contract describes
// (contract.WebhookDelivery.Start), to the byte of their input and search attributes: the
// re-arm after a restore and a redelivery build theirs with it, and the workflow reads its
// input as it writes it.
func TestRecordEventOutboxRowsAreTheContractsStarts(t *testing.T) {
	t.Parallel()
	st, org, ep := endpointFixture(t)
	ctx := context.Background()

	id, err := st.RecordEvent(ctx, store.Event{OrgID: org, Type: "locker.released", Data: map[string]int{"n": 1}})
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, id)
	var delivery uuid.UUID
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM webhook_deliveries WHERE event_id = $1`, id).Scan(&delivery))
	want := contract.WebhookDelivery{ID: delivery.String(), OrgID: org, EndpointID: ep.ID.String(), EventType: "locker.released"}.Start()

	var typ string
	var input, attrs []byte
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT workflow_type, input, search_attributes FROM workflow_outbox WHERE workflow_id = $1`,
		want.WorkflowID).Scan(&typ, &input, &attrs))
	assert.Equal(t, want.WorkflowType, typ)
	assert.JSONEq(t, string(want.Input), string(input))
	wantAttrs, err := json.Marshal(want.SearchAttributes)
	require.NoError(t, err)
	assert.JSONEq(t, string(wantAttrs), string(attrs))
}

// An endpoint whose deliveries have all failed for five days is disabled by the next final
// failure; a success in between starts the count again.
func TestWebhookEndpointDisabledAfterDaysOfFailures(t *testing.T) {
	t.Parallel()
	st, org, ep := endpointFixture(t)
	ctx := context.Background()
	delivery := func() uuid.UUID {
		t.Helper()
		ev, err := st.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Data: map[string]int{}})
		require.NoError(t, err)
		var id uuid.UUID
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM webhook_deliveries WHERE event_id = $1`, ev).Scan(&id))
		return id
	}
	fail := store.AttemptOutcome{StatusCode: 500, Error: "HTTP 500", Final: true}
	sc := store.WebhookScope{OrgID: org}

	// An attempt of a round a redelivery replaced records nothing.
	assert.ErrorIs(t, st.RecordWebhookAttempt(ctx, delivery(), 1, fail, 5*24*time.Hour), store.ErrStaleRound)

	require.NoError(t, st.RecordWebhookAttempt(ctx, delivery(), 0, fail, 5*24*time.Hour))
	got, err := st.WebhookEndpoint(ctx, sc, ep.ID)
	require.NoError(t, err)
	assert.True(t, got.Enabled, "one failed delivery disables nothing")

	// The run of failures began six days ago; a success would have ended it.
	_, err = st.Pool().Exec(ctx, `UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE id = $1`, ep.ID)
	require.NoError(t, err)
	ok := delivery()
	require.NoError(t, st.RecordWebhookAttempt(ctx, ok, 0, store.AttemptOutcome{StatusCode: 200, Succeeded: true, Final: true}, 5*24*time.Hour))
	require.NoError(t, st.RecordWebhookAttempt(ctx, delivery(), 0, fail, 5*24*time.Hour))
	got, err = st.WebhookEndpoint(ctx, sc, ep.ID)
	require.NoError(t, err)
	assert.True(t, got.Enabled, "a success restarted the count")

	_, err = st.Pool().Exec(ctx, `UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE id = $1`, ep.ID)
	require.NoError(t, err)
	require.NoError(t, st.RecordWebhookAttempt(ctx, delivery(), 0, fail, 5*24*time.Hour))
	got, err = st.WebhookEndpoint(ctx, sc, ep.ID)
	require.NoError(t, err)
	assert.False(t, got.Enabled)
	require.NotNil(t, got.DisabledReason)
	assert.Equal(t, "every delivery failed for 5 days", *got.DisabledReason)
}
