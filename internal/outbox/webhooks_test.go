package outbox_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
	"github.com/lockernet/lockernet/worker"
)

// webhookSystem is a store, a dispatcher and a worker delivering webhooks on one embedded
// Temporal server (the worker on the dispatcher's client, as in the worker process), and a
// receiver on this machine.
type webhookSystem struct {
	st   *store.Store
	tc   client.Client
	disp *outbox.Dispatcher
	org  int64
	ring *keyring.Keyring
	recv *receiver
}

type webhookOptions struct {
	// sweep runs the outbox sweep at this interval (0: no sweep).
	sweep time.Duration
	// handoff is what the store hands committed deliveries to (nil: the dispatcher) with
	// grace before the sweep may take them.
	handoff store.EventHandoff
	grace   time.Duration
}

func startWebhookSystem(t *testing.T, o webhookOptions) *webhookSystem {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	_, tc := testenv.Temporal(t)
	db := testenv.NewSeeded(ctx, t, store.Options{MaxConns: 8})
	st, ring, demo := db.Store, db.Ring, db.Demo

	logger := slog.New(slog.DiscardHandler)
	disp := outbox.New(st, tc, taskQueue+"-webhooks", logger)
	var h store.EventHandoff = disp
	if o.handoff != nil {
		h = o.handoff
	}
	st.HandOffEvents(h, o.grace)
	acts := &activities.Activities{Webhooks: &activities.WebhookDeps{Store: st, Keyring: ring, Timeout: 10 * time.Second}}
	var wg sync.WaitGroup
	wg.Go(func() { _ = disp.Run(ctx) })
	wg.Go(func() { _ = worker.Run(ctx, tc, taskQueue+"-webhooks", acts, worker.Options{}) })
	if o.sweep > 0 {
		wg.Go(func() { maintenance.Run(ctx, nil, logger, maintenance.OutboxSweep(o.sweep, disp)) })
	}
	recv := newReceiver()
	srv := httptest.NewServer(recv)
	t.Cleanup(func() { recv.release(); srv.Close(); cancel(); wg.Wait() })
	recv.url = srv.URL
	return &webhookSystem{st: st, tc: tc, disp: disp, org: demo.Credentials.OrganizationID, ring: ring, recv: recv}
}

// endpoint creates an enabled endpoint of the organization at the receiver's path.
func (s *webhookSystem) endpoint(t *testing.T, path string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, err := s.st.CreateWebhookEndpoint(context.Background(), store.WebhookEndpoint{ID: id, OrgID: s.org, URL: s.recv.url + path,
		Enabled: true, SecretSealed: s.ring.Seal(keyring.WebhookSecretPurpose(id), []byte("a secret of the endpoint"))})
	require.NoError(t, err)
	return id
}

// event records a test event for the endpoint alone, committed with a change of its own
// transaction, and returns its webhook id and when the commit returned.
func (s *webhookSystem) event(t *testing.T, endpoint uuid.UUID) (string, time.Time) {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	require.NoError(t, s.st.WithTx(ctx, func(tx *store.Store) error {
		var err error
		id, err = tx.RecordEvent(ctx, store.Event{OrgID: s.org, Type: "webhook.test", Only: &endpoint, Data: map[string]string{"n": "1"}})
		return err
	}))
	require.NotEqual(t, uuid.Nil, id)
	return webhook.EventIDPrefix + id.String(), time.Now()
}

// events records n test events for the endpoint, as event does, and returns their webhook ids.
func (s *webhookSystem) events(t *testing.T, endpoint uuid.UUID, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		id, _ := s.event(t, endpoint)
		ids = append(ids, id)
	}
	return ids
}

// receiver answers 204 and notes when each webhook id first arrived and how often; a
// request to /slow hangs until release (the attempt's timeout ends it first otherwise).
type receiver struct {
	url     string
	mu      sync.Mutex
	first   map[string]time.Time
	times   map[string]int
	slowIn  int
	done    chan struct{}
	relOnce sync.Once
}

func newReceiver() *receiver {
	return &receiver{first: map[string]time.Time{}, times: map[string]int{}, done: make(chan struct{})}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get(webhook.HeaderID)
	if req.URL.Path == "/slow" {
		r.mu.Lock()
		r.slowIn++
		r.mu.Unlock()
		select {
		case <-r.done:
		case <-req.Context().Done():
			return
		}
	}
	r.mu.Lock()
	if _, ok := r.first[id]; !ok {
		r.first[id] = time.Now()
	}
	r.times[id]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) release() { r.relOnce.Do(func() { close(r.done) }) }

func (r *receiver) arrived(id string) (time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first[id], r.times[id]
}

func (r *receiver) waitArrived(t *testing.T, ids ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, id := range ids {
			_, n := r.arrived(id)
			assert.Positive(c, n, "%s not delivered", id)
		}
	}, 60*time.Second, 10*time.Millisecond)
}

// assertOnce asserts each webhook id arrived exactly once.
func (r *receiver) assertOnce(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, n := r.arrived(id)
		assert.Equal(t, 1, n, id)
	}
}

// dropHandoff loses every hand-off, as a process that dies right after its commit does.
type dropHandoff struct{}

func (dropHandoff) Dispatch(...store.OutboxItem) {}

// A committed event's delivery starts from the committing process at once: with no sweep
// at all and the outbox rows left to the hand-off for an hour, every event arrives, each
// within a fraction of the sweep's old second, and its outbox row is gone.
func TestWebhookDeliveryStartsAtCommit(t *testing.T) {
	t.Parallel()
	s := startWebhookSystem(t, webhookOptions{grace: time.Hour})
	ep := s.endpoint(t, "/fast")
	var worst time.Duration
	for range 10 {
		id, committed := s.event(t, ep)
		s.recv.waitArrived(t, id)
		at, n := s.recv.arrived(id)
		assert.Equal(t, 1, n)
		worst = max(worst, at.Sub(committed))
	}
	t.Logf("committed → delivered, worst of 10: %s", worst)
	// Generous for a loaded two-core machine; the hand-off usually takes a few milliseconds.
	assert.Less(t, worst, 2*time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, outboxRows(t, s.st), "every row deleted by its dispatch")
	}, 30*time.Second, 50*time.Millisecond)
}

// A hand-off lost with its process leaves the rows to the sweep, which delivers them after
// the grace.
func TestWebhookDeliverySweptWhenHandoffLost(t *testing.T) {
	t.Parallel()
	s := startWebhookSystem(t, webhookOptions{sweep: 100 * time.Millisecond, handoff: dropHandoff{}, grace: 300 * time.Millisecond})
	ep := s.endpoint(t, "/fast")
	ids := s.events(t, ep, 3)
	s.recv.waitArrived(t, ids...)
	s.recv.assertOnce(t, ids...)
}

// The hand-off and the sweep may both start the same delivery (here the sweep takes the rows
// at once): the workflow id is fixed, so the second start meets the first run, or finds it
// finished, and each event is delivered once.
func TestWebhookDeliveryStartedTwiceDeliversOnce(t *testing.T) {
	t.Parallel()
	s := startWebhookSystem(t, webhookOptions{sweep: 20 * time.Millisecond, grace: 0})
	ep := s.endpoint(t, "/fast")
	ids := s.events(t, ep, 20)
	s.recv.waitArrived(t, ids...)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, outboxRows(t, s.st), "no row left retrying")
	}, 30*time.Second, 50*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // a late repeat would arrive by now
	s.recv.assertOnce(t, ids...)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list, err := s.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowType = 'WebhookDelivery'", PageSize: 100})
		if !assert.NoError(c, err) {
			return
		}
		assert.Len(c, list.GetExecutions(), len(ids), "one run per delivery")
		for _, e := range list.GetExecutions() {
			assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, e.GetStatus())
		}
	}, 30*time.Second, 100*time.Millisecond)
}

// One endpoint whose receiver hangs does not delay another's deliveries: while every
// attempt to the slow one is still waiting for its answer, the other's events arrive as
// promptly as without it.
func TestSlowEndpointDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	s := startWebhookSystem(t, webhookOptions{sweep: time.Second, grace: 5 * time.Second})
	slow := s.endpoint(t, "/slow")
	fast := s.endpoint(t, "/fast")
	slowIDs := s.events(t, slow, 12)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s.recv.mu.Lock()
		defer s.recv.mu.Unlock()
		assert.GreaterOrEqual(c, s.recv.slowIn, 8, "the slow endpoint holds its share of attempts")
	}, 30*time.Second, 10*time.Millisecond)

	var worst time.Duration
	for range 10 {
		id, committed := s.event(t, fast)
		s.recv.waitArrived(t, id)
		at, _ := s.recv.arrived(id)
		worst = max(worst, at.Sub(committed))
	}
	t.Logf("committed → delivered to the fast endpoint beside a hung one, worst of 10: %s", worst)
	assert.Less(t, worst, 2*time.Second)
	for _, id := range slowIDs {
		_, n := s.recv.arrived(id)
		assert.Zero(t, n, "the slow endpoint has answered nothing yet")
	}
	s.recv.release()
	s.recv.waitArrived(t, slowIDs...)
}

func outboxRows(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM workflow_outbox WHERE workflow_type = 'WebhookDelivery'`).Scan(&n))
	return n
}
