package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

const taskQueue = "outbox-test"

type fixture struct {
	st   *store.Store
	tc   client.Client
	disp *outbox.Dispatcher
}

// setup runs a dispatcher against a fresh database and an embedded Temporal server. No
// worker polls the task queue, so started workflows stay running.
func setup(t *testing.T) fixture {
	t.Helper()
	_, tc := testenv.Temporal(t)
	st, err := store.Open(context.Background(), testenv.NewDatabase(t), store.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	logger := slog.New(slog.DiscardHandler)
	disp := outbox.New(st, tc, taskQueue, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { _ = disp.Run(ctx) })
		maintenance.Run(ctx, nil, logger, maintenance.OutboxSweep(100*time.Millisecond, disp))
		wg.Wait()
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return fixture{st: st, tc: tc, disp: disp}
}

func reservationItem(id string) store.OutboxItem {
	input, _ := json.Marshal(contract.ReservationInput{ReservationID: id, ExpiresAt: time.Now().Add(time.Hour)})
	return store.OutboxItem{
		WorkflowID: contract.ReservationWorkflowID(id), WorkflowType: contract.ReservationWorkflowName, Input: input,
		SearchAttributes: map[string]string{"LockerId": "42", "TowerId": "0100000000000011", "OrganizationId": "7"},
	}
}

func (f fixture) rowExists(t *testing.T, id int64) bool {
	t.Helper()
	var n int
	require.NoError(t, f.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM workflow_outbox WHERE id = $1`, id).Scan(&n))
	return n > 0
}

// waitDispatched waits until the workflow runs and the outbox row is gone, and returns the run id.
func (f fixture) waitDispatched(t *testing.T, wfID string, rowID int64) string {
	t.Helper()
	var runID string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		desc, err := f.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		if !assert.NoError(c, err) {
			return
		}
		runID = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		assert.False(c, f.rowExists(t, rowID), "row %d still in the outbox", rowID)
	}, 30*time.Second, 50*time.Millisecond)
	return runID
}

// swept writes item to the outbox due already, with no Dispatch call (the sweep takes it),
// and waits until it is dispatched; it returns the run id.
func (f fixture) swept(t *testing.T, item store.OutboxItem) string {
	t.Helper()
	id, err := f.st.EnqueueWorkflow(context.Background(), item, -time.Second)
	require.NoError(t, err)
	return f.waitDispatched(t, item.WorkflowID, id)
}

// handedOff writes item to the outbox with an hour's grace before the sweep may take it,
// hands it to Dispatch at once, as a committing request does, and waits until it is
// dispatched; it returns the run id.
func (f fixture) handedOff(t *testing.T, item store.OutboxItem) string {
	t.Helper()
	id, err := f.st.EnqueueWorkflow(context.Background(), item, time.Hour)
	require.NoError(t, err)
	item.ID = id
	f.disp.Dispatch(item)
	return f.waitDispatched(t, item.WorkflowID, id)
}

// sweptAndTerminated sweeps item as swept does, then terminates the run it started and
// returns the run id.
func (f fixture) sweptAndTerminated(t *testing.T, item store.OutboxItem) string {
	t.Helper()
	runID := f.swept(t, item)
	require.NoError(t, f.tc.TerminateWorkflow(context.Background(), item.WorkflowID, runID, "test"))
	return runID
}

// assertOnlyRunTerminated asserts the workflow's run is still runID (no second run) and is
// terminated.
func (f fixture) assertOnlyRunTerminated(t *testing.T, wfID, runID string) {
	t.Helper()
	got, status, _ := f.describe(t, wfID)
	assert.Equal(t, runID, got, "no second run")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, status)
}

// endedSignal is item as a signal item: it signals the reservation ended (cancelled).
func endedSignal(item store.OutboxItem) store.OutboxItem {
	item.SignalName = contract.SignalReservationEnded
	item.SignalArg, _ = json.Marshal(contract.OutcomeCancelled)
	return item
}

func (f fixture) describe(t *testing.T, wfID string) (runID string, status enumspb.WorkflowExecutionStatus, attrs map[string]string) {
	t.Helper()
	desc, err := f.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
	require.NoError(t, err)
	info := desc.GetWorkflowExecutionInfo()
	attrs = map[string]string{}
	for k, p := range info.GetSearchAttributes().GetIndexedFields() {
		var v any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
		if s, ok := v.(string); ok {
			attrs[k] = s
		}
	}
	assert.Equal(t, taskQueue, info.GetTaskQueue())
	assert.Equal(t, contract.ReservationWorkflowName, info.GetType().GetName())
	return info.GetExecution().GetRunId(), info.GetStatus(), attrs
}

func signalCount(t *testing.T, tc client.Client, wfID, runID string) int {
	t.Helper()
	it := tc.GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			n++
		}
	}
	return n
}

func TestDispatcher(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	t.Run("the sweep starts an item nobody dispatched", func(t *testing.T) {
		item := reservationItem("11111111-1111-4111-8111-111111111111")
		f.swept(t, item)
		_, status, attrs := f.describe(t, item.WorkflowID)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status)
		assert.Equal(t, "42", attrs["LockerId"])
		assert.Equal(t, "0100000000000011", attrs["TowerId"])
		assert.Equal(t, "7", attrs["OrganizationId"])
	})

	t.Run("Dispatch starts an item at once, before its grace ends", func(t *testing.T) {
		item := reservationItem("22222222-2222-4222-8222-222222222222")
		f.handedOff(t, item)
	})

	t.Run("a repeated dispatch is harmless", func(t *testing.T) {
		item := reservationItem("33333333-3333-4333-8333-333333333333")
		first := f.swept(t, item)

		// The same start again, once through the sweep and once directly.
		f.swept(t, item)
		f.handedOff(t, item)

		runID, status, _ := f.describe(t, item.WorkflowID)
		assert.Equal(t, first, runID, "the same run")
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status)
	})

	t.Run("a signal item signals the running workflow", func(t *testing.T) {
		item := reservationItem("44444444-4444-4444-8444-444444444444")
		runID := f.swept(t, item)

		f.swept(t, endedSignal(item))

		got, _, _ := f.describe(t, item.WorkflowID)
		assert.Equal(t, runID, got)
		assert.Equal(t, 1, signalCount(t, f.tc, item.WorkflowID, runID))
	})

	t.Run("a signal for a workflow that already closed is dropped, not retried", func(t *testing.T) {
		item := reservationItem("55555555-5555-4555-8555-555555555555")
		runID := f.sweptAndTerminated(t, item)

		f.swept(t, endedSignal(item))

		f.assertOnlyRunTerminated(t, item.WorkflowID, runID)
	})

	t.Run("a start for a workflow that already finished is done, not retried", func(t *testing.T) {
		item := reservationItem("77777777-7777-4777-8777-777777777777")
		runID := f.sweptAndTerminated(t, item)

		// The sweep's repeat of a start the hand-off already made, after the run ended.
		f.swept(t, item)

		f.assertOnlyRunTerminated(t, item.WorkflowID, runID)
	})

	t.Run("a start Temporal refuses stays in the outbox for a later attempt", func(t *testing.T) {
		item := reservationItem("66666666-6666-4666-8666-666666666666")
		item.SearchAttributes = map[string]string{"NoSuchAttribute": "x"}
		id, err := f.st.EnqueueWorkflow(ctx, item, -time.Second)
		require.NoError(t, err)

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var attempts int
			var lastError *string
			var later bool
			err := f.st.Pool().QueryRow(ctx, `SELECT attempts, last_error, next_attempt_at > now() FROM workflow_outbox WHERE id = $1`, id).
				Scan(&attempts, &lastError, &later)
			if !assert.NoError(c, err) {
				return
			}
			assert.GreaterOrEqual(c, attempts, 1)
			if assert.NotNil(c, lastError) {
				assert.Contains(c, *lastError, "NoSuchAttribute")
			}
			assert.True(c, later, "rescheduled")
		}, 30*time.Second, 50*time.Millisecond)
		_, err = f.tc.DescribeWorkflowExecution(ctx, item.WorkflowID, "")
		assert.Error(t, err, "never started")
	})
}

// heldDeletes is the store with its first DeleteOutbox held until release is closed; it
// records the ids of every call.
type heldDeletes struct {
	*store.Store
	mu      sync.Mutex
	calls   [][]int64
	first   chan struct{} // closed when the first call arrives
	release chan struct{}
}

func (h *heldDeletes) DeleteOutbox(ctx context.Context, ids ...int64) error {
	h.mu.Lock()
	h.calls = append(h.calls, ids)
	n := len(h.calls)
	h.mu.Unlock()
	if n == 1 {
		close(h.first)
		<-h.release
	}
	return h.Store.DeleteOutbox(ctx, ids...)
}

// heldDispatcher runs a dispatcher on heldDeletes until the returned cancel; started writes
// n items to the outbox, dispatches the first, waits until its delete is held, dispatches
// the rest and returns once every one's workflow runs and its id has reached the deleter.
type heldDispatcher struct {
	st   *store.Store
	tc   client.Client
	held *heldDeletes
	disp *outbox.Dispatcher
	ran  chan struct{}
}

func newHeldDispatcher(t *testing.T) (*heldDispatcher, context.CancelFunc) {
	t.Helper()
	_, tc := testenv.Temporal(t)
	st, err := store.Open(context.Background(), testenv.NewDatabase(t), store.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	h := &heldDispatcher{st: st, tc: tc, held: &heldDeletes{Store: st, first: make(chan struct{}), release: make(chan struct{})}, ran: make(chan struct{})}
	h.disp = outbox.New(h.held, tc, taskQueue, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = h.disp.Run(ctx); close(h.ran) }()
	t.Cleanup(func() { cancel(); <-h.ran })
	return h, cancel
}

func (h *heldDispatcher) started(t *testing.T, n int, prefix string) {
	t.Helper()
	ctx := context.Background()
	items := make([]store.OutboxItem, n)
	for i := range items {
		var err error
		items[i] = reservationItem(fmt.Sprintf("%s%02d-0000-4000-8000-000000000000", prefix, i))
		items[i].ID, err = h.st.EnqueueWorkflow(ctx, items[i], time.Hour)
		require.NoError(t, err)
	}
	h.disp.Dispatch(items[0])
	<-h.held.first // the first item's delete is in flight, and held
	h.disp.Dispatch(items[1:]...)
	for _, it := range items {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, err := h.tc.DescribeWorkflowExecution(ctx, it.WorkflowID, "")
			assert.NoError(c, err)
		}, 30*time.Second, 20*time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the last starts' ids reach the deleter
}

func (h *heldDispatcher) left(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, h.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM workflow_outbox`).Scan(&n))
	return n
}

// Items dispatched while a delete commits are deleted together in the next statement, not
// one statement each; every row goes.
func TestDispatchedItemsDeletedTogether(t *testing.T) {
	t.Parallel()
	h, _ := newHeldDispatcher(t)
	const n = 10
	h.started(t, n, "abcdef")
	close(h.held.release)

	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Zero(c, h.left(t)) }, 30*time.Second, 20*time.Millisecond)
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	deleted, most := 0, 0
	for _, c := range h.held.calls {
		deleted += len(c)
		most = max(most, len(c))
	}
	assert.Equal(t, n, deleted, "each row deleted once")
	assert.Equal(t, n-1, most, "the nine started while the first delete was held went in one statement: %v", h.held.calls)
}

// The items started before the dispatcher stops are deleted as it stops, their deletes not
// cut short by its context: none is left for the sweep to start again.
func TestDispatchedItemsDeletedAtShutdown(t *testing.T) {
	t.Parallel()
	h, cancel := newHeldDispatcher(t)
	h.started(t, 5, "fedcba")
	cancel() // the dispatcher stops with one delete in flight and four waiting
	close(h.held.release)
	<-h.ran
	assert.Zero(t, h.left(t), "every started item's row deleted by the time Run returned")
}
