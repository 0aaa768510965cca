package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows/contract"
)

// pickupWindowStepsPerRun bounds a run's history: after this many steps the workflow continues
// as new with its next time (a window has at most 5 reminders, 10 extensions and a few
// policy changes, so a run rarely gets there).
const pickupWindowStepsPerRun = 100

// PickupWindow keeps a parcel's pickup window (docs/pickup-windows.md): a durable timer for
// its next reminder or its end; when it fires, or when the window changed outside (the signal:
// an extension, a policy applied to running windows, a return request, the pickup), a local
// activity runs the window's step in Postgres — the reminder or the overdue mark now due, at
// most once — and answers the next time. The database is the truth, so a lost or late signal
// only delays a wake-up to the time the workflow already had. It ends when nothing more is
// scheduled (picked up, returned, overdue, marked for return).
func PickupWindow(ctx workflow.Context, in contract.PickupWindowInput) (contract.PickupWindowState, error) {
	wf := &pickupWindowImpl{state: contract.PickupWindowState{Status: "open", NextAt: in.NextAt, Steps: in.Steps}}
	if err := workflow.SetQueryHandler(ctx, contract.QueryPickupWindowState, func() (contract.PickupWindowState, error) {
		return wf.state, nil
	}); err != nil {
		return contract.PickupWindowState{}, err
	}
	return wf.run(ctx, in)
}

type pickupWindowImpl struct {
	state contract.PickupWindowState
}

func (wf *pickupWindowImpl) run(ctx workflow.Context, in contract.PickupWindowInput) (contract.PickupWindowState, error) {
	changed := workflow.GetSignalChannel(ctx, contract.SignalPickupWindowChanged)
	for steps := 0; !wf.state.NextAt.IsZero(); steps++ {
		if steps >= pickupWindowStepsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// A change signalled now is looked at by the step below, then the run goes on as new.
			if drainSignals(changed) {
				if err := wf.step(ctx, in.WindowID); err != nil || wf.state.NextAt.IsZero() {
					return wf.state, err
				}
			}
			return wf.state, workflow.NewContinueAsNewError(ctx, contract.PickupWindowWorkflowName,
				contract.PickupWindowInput{WindowID: in.WindowID, NextAt: wf.state.NextAt, Steps: wf.state.Steps})
		}
		wf.wait(ctx, changed)
		if err := wf.step(ctx, in.WindowID); err != nil {
			return contract.PickupWindowState{}, err
		}
	}
	return wf.state, nil
}

// wait blocks until the window's next time or a change signal, whichever comes first.
func (wf *pickupWindowImpl) wait(ctx workflow.Context, changed workflow.ReceiveChannel) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimerWithOptions(timerCtx, max(wf.state.NextAt.Sub(workflow.Now(ctx)), 0),
		workflow.TimerOptions{Summary: "pickup window step"})
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.AddReceive(changed, func(c workflow.ReceiveChannel, _ bool) {
		var ch contract.PickupWindowChange
		c.Receive(ctx, &ch)
		drainSignals(c)
	})
	sel.Select(ctx)
}

// step runs the window's step in Postgres (a local activity: the timer's task does it, no
// activity task of its own) and keeps what it answered.
func (wf *pickupWindowImpl) step(ctx workflow.Context, windowID string) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         shortRetry(30*time.Second, "InvalidInput"),
	})
	var res activities.PickupWindowDueResult
	if err := workflow.ExecuteLocalActivity(lctx, a.PickupWindowDue, activities.PickupWindowDueInput{WindowID: windowID}).Get(ctx, &res); err != nil {
		return err
	}
	wf.state.Status, wf.state.NextAt = res.Status, res.NextAt
	wf.state.Steps++
	return nil
}

// drainSignals takes every signal already received on c without blocking; it reports whether
// there was any.
func drainSignals(c workflow.ReceiveChannel) bool {
	got := false
	for {
		var ch contract.PickupWindowChange
		if !c.ReceiveAsync(&ch) {
			return got
		}
		got = true
	}
}
