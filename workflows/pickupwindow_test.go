package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

const windowID = "7b0c6a52-3c1e-4d8e-9f3a-2b1c0d9e8f7a"

// fakeWindow is a pickup window in Postgres as PickupWindowDue sees it: a reminder 10 min
// before its end, the end an hour after start unless moved. now is the workflow's clock,
// read through the callback the test sets.
type fakeWindow struct {
	mu       sync.Mutex
	now      func() time.Time
	pickupBy time.Time
	sent     int
	status   string
	offset   int // the reminder's, in seconds before the end
	steps    []time.Time
	events   []string
}

func newFakeWindow(pickupBy time.Time) *fakeWindow {
	return &fakeWindow{pickupBy: pickupBy, status: store.WindowOpen, offset: 600}
}

func (f *fakeWindow) window() store.PickupWindow {
	return store.PickupWindow{Status: f.status, PickupBy: f.pickupBy, ReminderOffsets: []int{f.offset}, RemindersSent: f.sent}
}

func (f *fakeWindow) PickupWindowDue(_ context.Context, _ uuid.UUID) (store.PickupWindow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.steps = append(f.steps, now.UTC())
	w := f.window()
	switch {
	case f.status != store.WindowOpen:
	case !f.pickupBy.After(now):
		f.status = store.WindowOverdue
		f.events = append(f.events, "overdue")
	case f.sent == 0 && !w.ReminderAt(0).After(now):
		f.sent = 1
		f.events = append(f.events, "reminder")
	}
	return f.window(), nil
}

func (f *fakeWindow) change(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func newPickupEnv(f *fakeWindow) *testsuite.TestWorkflowEnvironment {
	env := newWorkflowEnv(workflows.PickupWindow, contract.PickupWindowWorkflowName, &activities.Activities{Pickups: f})
	f.now = env.Now
	return env
}

func TestPickupWindowWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "pickup-window/"+windowID, contract.PickupWindowWorkflowID(windowID))
}

// The reminder fires at its time, the end's step at the end's backstop (the due pass marks
// windows at the end itself; with no pass the workflow's step makes the mark), each once, and
// the workflow ends with nothing more scheduled.
func TestPickupWindowRemindsThenOverdue(t *testing.T) {
	t.Parallel()
	end := start.Add(time.Hour)
	f := newFakeWindow(end)
	env := newPickupEnv(f)
	env.ExecuteWorkflow(contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: windowID, NextAt: f.window().NextAt()})
	st := resultOf[contract.PickupWindowState](t, env)
	assert.Equal(t, contract.PickupWindowState{Status: store.WindowOverdue, Steps: 2}, st)
	assert.Equal(t, []string{"reminder", "overdue"}, f.events)
	require.Len(t, f.steps, 2)
	assert.Equal(t, end.Add(-10*time.Minute), f.steps[0], "the reminder at its time")
	assert.Equal(t, end.Add(store.EndBackstop), f.steps[1], "the workflow's overdue step at the end's backstop")
}

// An extension signalled before the end moves the end: the workflow looks again at once and
// waits for the new time; a pickup signalled later ends it with no overdue mark.
func TestPickupWindowExtendedThenPickedUp(t *testing.T) {
	t.Parallel()
	end := start.Add(time.Hour)
	f := newFakeWindow(end)
	env := newPickupEnv(f)
	env.RegisterDelayedCallback(func() {
		f.change(func() { f.pickupBy, f.sent = end.Add(2*time.Hour), 0 })
		env.SignalWorkflow(contract.SignalPickupWindowChanged, contract.PickupWindowChange{NextAt: end.Add(2 * time.Hour)})
	}, 30*time.Minute)
	env.RegisterDelayedCallback(func() {
		q := queryOf[contract.PickupWindowState](t, env, contract.QueryPickupWindowState)
		assert.Equal(t, end.Add(2*time.Hour-10*time.Minute), q.NextAt, "the reminder of the new end is next")
		f.change(func() { f.status = store.WindowPickedUp })
		env.SignalWorkflow(contract.SignalPickupWindowChanged, contract.PickupWindowChange{})
	}, 90*time.Minute)
	env.ExecuteWorkflow(contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: windowID, NextAt: f.window().NextAt()})
	st := resultOf[contract.PickupWindowState](t, env)
	assert.Equal(t, store.WindowPickedUp, st.Status)
	assert.Empty(t, f.events, "no reminder and no overdue mark: the old times never fired")
	assert.Equal(t, []time.Time{start.Add(30 * time.Minute), start.Add(90 * time.Minute)}, f.steps)
}

// A start for a window that closed before its workflow started ends at once, with no step.
func TestPickupWindowStartedClosed(t *testing.T) {
	t.Parallel()
	f := newFakeWindow(start.Add(time.Hour))
	env := newPickupEnv(f)
	env.ExecuteWorkflow(contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: windowID})
	assert.Equal(t, contract.PickupWindowState{Status: "open"}, resultOf[contract.PickupWindowState](t, env))
	assert.Empty(t, f.steps)
}

// A window whose row is gone (a restore without it) ends its workflow without side effects.
func TestPickupWindowMissingRow(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(workflows.PickupWindow, contract.PickupWindowWorkflowName, &activities.Activities{Pickups: missingWindows{}})
	env.ExecuteWorkflow(contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: windowID, NextAt: start.Add(time.Minute)})
	assert.Equal(t, "missing", resultOf[contract.PickupWindowState](t, env).Status)
}

type missingWindows struct{}

func (missingWindows) PickupWindowDue(context.Context, uuid.UUID) (store.PickupWindow, error) {
	return store.PickupWindow{}, store.ErrNotFound
}

// A window that keeps changing continues as new after a bounded number of steps, carrying its
// next time and its step count.
func TestPickupWindowContinuesAsNew(t *testing.T) {
	t.Parallel()
	f := newFakeWindow(start.Add(1000 * time.Hour))
	env := newPickupEnv(f)
	for i := 1; i <= 120; i++ {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(contract.SignalPickupWindowChanged, contract.PickupWindowChange{})
		}, time.Duration(i)*time.Minute)
	}
	env.ExecuteWorkflow(contract.PickupWindowWorkflowName, contract.PickupWindowInput{WindowID: windowID, NextAt: f.window().NextAt()})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, failureOf(t, env), &can)
	assert.Equal(t, contract.PickupWindowWorkflowName, can.WorkflowType.Name)
	var next contract.PickupWindowInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, contract.PickupWindowInput{WindowID: windowID, NextAt: f.window().NextAt(), Steps: 100}, next)
	assert.Len(t, f.steps, 100)
}
