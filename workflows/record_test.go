package workflows_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows/contract"
)

// The tests that record the histories replay_test.go replays: each runs its workflow on an
// embedded Temporal server, against fakes of Postgres and the gateways, and writes the
// histories to testdata/. They are skipped unless LOCKERNET_RECORD_HISTORIES=1:
//
//	LOCKERNET_RECORD_HISTORIES=1 go test ./workflows/ -run 'TestRecord'
//
// Re-record a history only for a change made behind workflow.GetVersion, and keep the old
// file: it is the runs in flight that the replay test protects.

// recordHistories skips the test unless LOCKERNET_RECORD_HISTORIES=1.
func recordHistories(t *testing.T) {
	t.Helper()
	if os.Getenv("LOCKERNET_RECORD_HISTORIES") != "1" {
		t.Skip("set LOCKERNET_RECORD_HISTORIES=1 to record testdata histories")
	}
}

// startRecordingWorker runs a worker with every workflow, and the activities of deps, on
// taskQueue until the test ends.
func startRecordingWorker(t *testing.T, c client.Client, taskQueue string, deps *activities.Activities) {
	t.Helper()
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, deps)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// runRecorded starts the workflow name with in, sends it the signal with value (unless value
// is empty) and waits for its result.
func runRecorded[T any](ctx context.Context, t *testing.T, c client.Client, opts client.StartWorkflowOptions, name string, in any,
	signal, value string) (client.WorkflowRun, T) {
	t.Helper()
	r, err := c.ExecuteWorkflow(ctx, opts, name, in)
	require.NoError(t, err)
	if value != "" {
		require.NoError(t, c.SignalWorkflow(ctx, r.GetID(), r.GetRunID(), signal, value))
	}
	var res T
	require.NoError(t, r.Get(ctx, &res))
	return r, res
}

// writeHistory writes the history of a finished run to testdata/file.
func writeHistory(ctx context.Context, t *testing.T, c client.Client, r client.WorkflowRun, file string) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, r.GetID(), r.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", file), append(b, '\n'), 0o644))
}

func TestRecordReservationHistories(t *testing.T) {
	recordExpiryHistories(t, reservationWorkflow, &activities.Activities{Reservations: &fakeExpiries{}}, []expiryRecording{
		{"", contract.OutcomeExpired, "reservation_expired.json"},
		{contract.OutcomeCancelled, contract.OutcomeCancelled, "reservation_cancelled.json"},
	})
}

func TestRecordLockerTokenHistories(t *testing.T) {
	recordExpiryHistories(t, tokenWorkflow, &activities.Activities{Tokens: &fakeExpiries{}}, []expiryRecording{
		{"", contract.TokenOutcomeExpired, "lockertoken_expired.json"},
		{contract.TokenOutcomeUsed, contract.TokenOutcomeUsed, "lockertoken_used.json"},
		{contract.TokenOutcomeRevoked, contract.TokenOutcomeRevoked, "lockertoken_revoked.json"},
	})
}

// expiryRecording is one run of an expiry workflow to record: without signal the hold
// expires a second after its start; with one, the signal ends it first.
type expiryRecording struct{ signal, want, file string }

// recordExpiryHistories runs the expiry workflow w on a Temporal server with the activities
// of deps, once per recording, and writes each run's history.
func recordExpiryHistories(t *testing.T, w expiryWorkflow, deps *activities.Activities, runs []expiryRecording) {
	recordHistories(t)
	_, c := testenv.Temporal(t)
	taskQueue := "record-" + w.name + "-histories"
	startRecordingWorker(t, c, taskQueue, deps)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, rec := range runs {
		expiresIn := time.Hour
		if rec.signal == "" {
			expiresIn = time.Second
		}
		id := uuid.NewString()
		r, st := runRecorded[struct{ Outcome string }](ctx, t, c,
			client.StartWorkflowOptions{ID: w.workflowID(id), TaskQueue: taskQueue}, w.name,
			w.input(id, time.Now().Add(expiresIn)), w.signal, rec.signal)
		assert.Equal(t, rec.want, st.Outcome)
		writeHistory(ctx, t, c, r, rec.file)
	}
}

// The access-code recorder plays the activities and the release's gateway request with
// codeFakes (accesscode_test.go), a worker of its own for each run.
func TestRecordAccessCodeHistories(t *testing.T) {
	recordHistories(t)
	_, c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(taskQueue string, f *codeFakes, in contract.AccessCodeInput, signal string) (client.WorkflowRun, contract.AccessCodeState) {
		w := sdkworker.New(c, taskQueue, sdkworker.Options{})
		f.register(w)
		require.NoError(t, w.Start())
		defer w.Stop()
		return runRecorded[contract.AccessCodeState](ctx, t, c,
			client.StartWorkflowOptions{ID: contract.AccessCodeWorkflowID(in.CodeID), TaskQueue: taskQueue}, contract.AccessCodeWorkflowName,
			in, contract.SignalCodeEnded, signal)
	}

	r, st := run("record-code-expired", &codeFakes{releases: []int{204}, expired: activities.ExpireAccessCodeResult{Expired: true}},
		contract.AccessCodeInput{CodeID: uuid.NewString(), ExpiresAt: time.Now().Add(time.Second)}, "")
	assert.Equal(t, contract.CodeOutcomeExpired, st.Outcome)
	writeHistory(ctx, t, c, r, "accesscode_expired.json")

	r, st = run("record-code-removed", &codeFakes{releases: []int{204}},
		contract.AccessCodeInput{CodeID: uuid.NewString(), ExpiresAt: time.Now().Add(time.Hour), HoldRequestID: uuid.NewString()}, contract.CodeOutcomeRemoved)
	assert.Equal(t, contract.CodeOutcomeRemoved, st.Outcome)
	writeHistory(ctx, t, c, r, "accesscode_removed.json")

	// One failed release, then the 15 s backoff and a confirmed one.
	r, st = run("record-code-release-retried", &codeFakes{releases: []int{503, 204}},
		contract.AccessCodeInput{CodeID: uuid.NewString(), ExpiresAt: time.Now(), Ended: true}, "")
	assert.Equal(t, 2, st.Releases)
	writeHistory(ctx, t, c, r, "accesscode_release_retried.json")
}

// recordingGateways stands in for Postgres behind the recording worker's gateway-request
// activities: the first send of a request goes to a closed port while refused is set.
//
// While interrupted is set, a request's first send is found begun before (as after a crash
// mid-send) at a gateway that honours Idempotency-Key.
type recordingGateways struct {
	live, dead  string
	refused     atomic.Bool
	interrupted atomic.Bool
}

func (s *recordingGateways) BeginGatewaySend(_ context.Context, _ uuid.UUID, send int) (store.GatewaySend, error) {
	url := s.live
	if send == 1 && s.refused.Load() {
		url = s.dead
	}
	gw := store.Gateway{ID: 1, Serial: "GW-0001", BaseURL: url, HonoursKeys: true}
	if send == 1 && s.interrupted.Load() {
		return store.GatewaySend{Began: false, Attempts: 1, Gateway: gw}, nil
	}
	return store.GatewaySend{Began: true, Attempts: send, Gateway: gw}, nil
}

func (s *recordingGateways) AbandonGatewaySend(context.Context, uuid.UUID, int) error { return nil }

func (s *recordingGateways) RecordGatewayKeys(context.Context, int64, bool) error { return nil }

func (s *recordingGateways) StoreGatewayAnswer(context.Context, uuid.UUID, int, []byte) error {
	return nil
}

func (s *recordingGateways) FinishGatewayRequest(_ context.Context, id uuid.UUID, _ int64, o gatewayreq.Outcome, _ int, _ bool) (store.GatewayRequest, error) {
	now := time.Now()
	return store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: id, Class: gatewayreq.ClassRead}, Status: o.Status,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, CompletedAt: &now, Outcome: o}, nil
}

// plainSecret opens every sealed secret to the same one.
type plainSecret struct{}

func (plainSecret) Open(string, []byte) ([]byte, error) { return []byte("secret"), nil }

// The gateway-request recorder runs against a fake gateway: an answered read, and an open
// whose first delivery was refused.
func TestRecordGatewayRequestHistories(t *testing.T) {
	recordHistories(t)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"success":true,"lockerId":101,"doorOpen":true,"message":"locker opened"}` + "\n"))
	}))
	t.Cleanup(gw.Close)
	st := &recordingGateways{live: gw.URL, dead: "http://" + testenv.FreeAddr(t)}

	_, c := testenv.Temporal(t)
	const taskQueue = "record-gateway-request-histories"
	startRecordingWorker(t, c, taskQueue, &activities.Activities{Gateways: activities.GatewayDeps{Store: st, Keyring: plainSecret{}}})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(in gatewayreq.Spec) (client.WorkflowRun, gatewayreq.Result) {
		in.RequestID, in.Revision = uuid.NewString(), gatewayreq.RevisionCurrent
		return runRecorded[gatewayreq.Result](ctx, t, c,
			client.StartWorkflowOptions{ID: contract.GatewayRequestWorkflowID(in.RequestID), TaskQueue: taskQueue},
			contract.GatewayRequestWorkflowName, in, "", "")
	}

	// The read's first send, inside the first task, settles it (the answer decides it at
	// once): no finish, and the run ends in that task.
	r, res := run(readLockers)
	assert.Equal(t, gatewayreq.StateCompleted, res.Outcome.Status)
	writeHistory(ctx, t, c, r, "gateway_request_completed.json")

	// The open's first delivery is refused: the workflow waits, sends again (an activity)
	// and finishes.
	st.refused.Store(true)
	r, res = run(openLocker)
	assert.Equal(t, gatewayreq.StateCompleted, res.Outcome.Status)
	writeHistory(ctx, t, c, r, "gateway_request_redelivered.json")
	st.refused.Store(false)

	// The open's first send is found begun (the process that made it died mid-send) at a
	// gateway that honours keys: it goes out again with its key, as an activity.
	st.interrupted.Store(true)
	r, res = run(openLocker)
	assert.Equal(t, gatewayreq.StateCompleted, res.Outcome.Status)
	writeHistory(ctx, t, c, r, "gateway_request_first_send_interrupted.json")
}

// recordingWebhooks keeps one delivery's attempts in memory for the recording worker.
type recordingWebhooks struct {
	mu       sync.Mutex
	url      string
	outcomes []store.AttemptOutcome
}

func (f *recordingWebhooks) WebhookAttemptOf(_ context.Context, id uuid.UUID) (store.WebhookAttempt, error) {
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

func (f *recordingWebhooks) RecordWebhookAttempt(_ context.Context, _ uuid.UUID, _ int, o store.AttemptOutcome, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes = append(f.outcomes, o)
	return nil
}

// The webhook-delivery recorder delivers to a real receiver that fails the first attempts.
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
	fs := &recordingWebhooks{url: rc.URL}
	startRecordingWorker(t, c, taskQueue, &activities.Activities{Webhooks: &activities.WebhookDeps{Store: fs, Keyring: plainSecret{},
		Schedule: []time.Duration{200 * time.Millisecond, 200 * time.Millisecond}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(fail int32, file string) {
		calls.Store(0)
		failFirst.Store(fail)
		id := uuid.NewString()
		r, _ := runRecorded[contract.WebhookDeliveryResult](ctx, t, c,
			client.StartWorkflowOptions{ID: contract.WebhookDeliveryWorkflowID(id, 0), TaskQueue: taskQueue},
			contract.WebhookDeliveryWorkflowName, contract.WebhookDeliveryInput{DeliveryID: id, Revision: contract.WebhookRevisionMarkerless}, "", "")
		writeHistory(ctx, t, c, r, file)
	}
	run(1, "webhook_delivery_retried.json") // 500, then 204
	run(9, "webhook_delivery_failed.json")  // 500 on all three attempts
	last := fs.outcomes[len(fs.outcomes)-1]
	assert.True(t, last.Final)
	assert.False(t, last.Succeeded)
}

// The pickup-window recorder plays Postgres with fakeWindow (pickupwindow_test.go) on the wall
// clock: one window reminded then overdue, one extended then picked up.
func TestRecordPickupWindowHistories(t *testing.T) {
	recordHistories(t)
	_, c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(f *fakeWindow, file string, signals func(r client.WorkflowRun)) contract.PickupWindowState {
		f.now = time.Now
		taskQueue := "record-pickup-window-" + uuid.NewString()
		startRecordingWorker(t, c, taskQueue, &activities.Activities{Pickups: f})
		id := uuid.NewString()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.PickupWindowWorkflowID(id), TaskQueue: taskQueue},
			contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: id, NextAt: f.window().NextAt()})
		require.NoError(t, err)
		if signals != nil {
			signals(r)
		}
		var st contract.PickupWindowState
		require.NoError(t, r.Get(ctx, &st))
		writeHistory(ctx, t, c, r, file)
		return st
	}
	f := newFakeWindow(time.Now().Add(2 * time.Second))
	f.offset = 1
	assert.Equal(t, store.WindowOverdue, run(f, "pickup_window_overdue.json", nil).Status)
	assert.Equal(t, []string{"reminder", "overdue"}, f.events)

	f = newFakeWindow(time.Now().Add(time.Hour))
	st := run(f, "pickup_window_picked_up.json", func(r client.WorkflowRun) {
		time.Sleep(200 * time.Millisecond)
		f.change(func() { f.pickupBy = f.pickupBy.Add(time.Hour) })
		require.NoError(t, c.SignalWorkflow(ctx, r.GetID(), r.GetRunID(), contract.SignalPickupWindowChanged, contract.PickupWindowChange{NextAt: f.window().NextAt()}))
		time.Sleep(200 * time.Millisecond)
		f.change(func() { f.status = store.WindowPickedUp })
		require.NoError(t, c.SignalWorkflow(ctx, r.GetID(), r.GetRunID(), contract.SignalPickupWindowChanged, contract.PickupWindowChange{}))
	})
	assert.Equal(t, store.WindowPickedUp, st.Status)
	assert.Empty(t, f.events)
}
