package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// awaitEnd is the shape shared by the reservation, locker-token and access-code workflows:
// wait for the durable expiry timer, or for the signal that the thing ended first. It returns the
// signal's value, or expired = true when the timer fired.
func awaitEnd(ctx workflow.Context, expiresAt time.Time, signal, summary string) (ended string, expired bool) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	wait := max(expiresAt.Sub(workflow.Now(ctx)), 0)
	timer := workflow.NewTimerWithOptions(timerCtx, wait, workflow.TimerOptions{Summary: summary})
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(timer, func(f workflow.Future) { expired = f.Get(timerCtx, nil) == nil })
	sel.AddReceive(workflow.GetSignalChannel(ctx, signal), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &ended)
	})
	sel.Select(ctx)
	return ended, expired
}

// withExpiryActivity sets the options of the activity that writes an expiry back to
// Postgres: short attempts, retried until it succeeds (a "not due yet" answer included),
// except for input it can never accept.
func withExpiryActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         shortRetry(30*time.Second, "InvalidInput"),
	})
}
