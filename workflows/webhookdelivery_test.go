package workflows_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows"
)

var webhookHistories = []string{"webhook_delivery_retried.json", "webhook_delivery_failed.json"}

func TestReplayWebhookDelivery(t *testing.T) {
	t.Parallel()
	replayHistories(t, workflows.WebhookDelivery, workflows.WebhookDeliveryWorkflowName, webhookHistories)
}

// The names the store writes into the outbox are the workflow's.
func TestWebhookDeliveryNamesAgree(t *testing.T) {
	id := uuid.New()
	assert.Equal(t, workflows.WebhookDeliveryWorkflowName, store.WebhookDeliveryWorkflowType)
	assert.Equal(t, workflows.WebhookDeliveryWorkflowID(id.String()), store.WebhookDeliveryWorkflowID(id, 0))
	assert.Contains(t, workflows.SearchAttributeNames, workflows.AttrWebhookEndpointID.GetName())
	assert.Contains(t, workflows.SearchAttributeNames, workflows.AttrEventType.GetName())
	assert.Equal(t, "WebhookEndpointId", workflows.AttrWebhookEndpointID.GetName())
	assert.Equal(t, "EventType", workflows.AttrEventType.GetName())
}

// fakeWebhookStore keeps one delivery's attempts in memory for the recording worker.
type fakeWebhookStore struct {
	mu       sync.Mutex
	url      string
	outcomes []store.AttemptOutcome
}

func (f *fakeWebhookStore) WebhookAttemptOf(_ context.Context, id uuid.UUID) (store.WebhookAttempt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ep := uuid.MustParse("7d5b1f1e-4c39-4c55-9a3e-0d1f2a9e6b11")
	return store.WebhookAttempt{
		Delivery: store.WebhookDelivery{ID: id, EndpointID: ep, Status: "pending"},
		Endpoint: store.WebhookEndpoint{ID: ep, URL: f.url, Enabled: true, SecretSealed: []byte("sealed")},
		Event: store.WebhookEvent{ID: uuid.MustParse("1b0e3c1a-9d2f-4e8b-8c67-5a4f3e2d1c0b"), OrgID: 1, Type: "webhook.test",
			Data: []byte(`{"message":"recorded"}`), CreatedAt: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
	}, nil
}

func (f *fakeWebhookStore) RecordWebhookAttempt(_ context.Context, _ uuid.UUID, _ int, o store.AttemptOutcome, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes = append(f.outcomes, o)
	return nil
}

// TestRecordWebhookDeliveryHistories runs deliveries on an embedded Temporal server against
// a real receiver and writes their histories to testdata/. Run it with
// LOCKERNET_RECORD_HISTORIES=1.
func TestRecordWebhookDeliveryHistories(t *testing.T) {
	recordHistories(t)
	var calls atomic.Int32
	failFirst := atomic.Int32{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= failFirst.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	_, c := testenv.Temporal(t)
	const taskQueue = "record-webhook-histories"
	fs := &fakeWebhookStore{url: rc.URL}
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, &activities.Activities{Webhooks: &activities.WebhookDeps{Store: fs, Keyring: plainSecret{},
		Schedule: []time.Duration{200 * time.Millisecond, 200 * time.Millisecond}}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(fail int32, file string) {
		calls.Store(0)
		failFirst.Store(fail)
		id := uuid.NewString()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WebhookDeliveryWorkflowID(id), TaskQueue: taskQueue},
			workflows.WebhookDeliveryWorkflowName, workflows.WebhookDeliveryInput{DeliveryID: id})
		require.NoError(t, err)
		require.NoError(t, r.Get(ctx, nil))
		writeHistory(ctx, t, c, r, file)
	}
	run(1, "webhook_delivery_retried.json") // 500, then 204
	run(9, "webhook_delivery_failed.json")  // 500 on all three attempts
	last := fs.outcomes[len(fs.outcomes)-1]
	assert.True(t, last.Final)
	assert.False(t, last.Succeeded)
}
