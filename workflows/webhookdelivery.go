package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows/contract"
)

// webhookLoopLimit bounds one run's history: after this many attempts or deferrals the
// workflow continues as new with its counts.
const webhookLoopLimit = 200

// changeAttemptLocal versions the attempt as a local activity: it runs inside the workflow
// task that asked for it, so a delivery that succeeds at once is one workflow task (its
// first) instead of two and an activity task through the task queue. Runs started before it
// keep the regular activity.
const changeAttemptLocal = "webhook-attempt-local-activity"

// WebhookDelivery delivers one event to one endpoint: an attempt now, and after each failed
// attempt a durable timer for the wait the attempt activity chose from the retry schedule,
// until an attempt succeeds, the schedule is spent, or the endpoint is gone. The activity
// records every attempt in the delivery log; the workflow only sequences them. An attempt
// deferred because the endpoint already has its share of attempts in flight does not count.
func WebhookDelivery(ctx workflow.Context, in contract.WebhookDeliveryInput) (contract.WebhookDeliveryResult, error) {
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
		NonRetryableErrorTypes: []string{"InvalidInput"}}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// 15 s for the receiver, the rest for Postgres. The attempt heartbeats while it waits
		// for the receiver, so one lost with its worker is retried within seconds.
		StartToCloseTimeout: 45 * time.Second,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         retry,
	})
	// As a local activity the attempt needs no heartbeat: a worker lost mid-attempt is seen
	// when its workflow task times out, and the next worker makes the attempt again (the
	// receiver deduplicates by webhook-id).
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 45 * time.Second, RetryPolicy: retry})
	local := in.Revision >= contract.WebhookRevisionMarkerless || workflow.GetVersion(ctx, changeAttemptLocal, workflow.DefaultVersion, 1) == 1
	for loops := 0; ; loops++ {
		if loops >= webhookLoopLimit || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return contract.WebhookDeliveryResult{}, workflow.NewContinueAsNewError(ctx, WebhookDelivery, in)
		}
		var res activities.WebhookAttemptResult
		attempt := activities.WebhookAttemptInput{DeliveryID: in.DeliveryID, Round: in.Round, Attempt: in.Attempt + 1, Deferrals: in.Deferrals}
		var err error
		if local {
			err = workflow.ExecuteLocalActivity(ctx, a.AttemptWebhook, attempt).Get(ctx, &res)
		} else {
			err = workflow.ExecuteActivity(ctx, a.AttemptWebhook, attempt).Get(ctx, &res)
		}
		if err != nil {
			return contract.WebhookDeliveryResult{Outcome: activities.WebhookFailed, Attempts: in.Attempt}, err
		}
		if res.Done {
			attempts := in.Attempt
			if res.Outcome != activities.WebhookSuperseded && res.Outcome != activities.WebhookAbandoned {
				attempts++
			}
			return contract.WebhookDeliveryResult{Outcome: res.Outcome, Attempts: attempts}, nil
		}
		if res.Deferred {
			in.Deferrals++
		} else {
			in.Attempt++
			in.Deferrals = 0
		}
		if err := workflow.Sleep(ctx, res.RetryIn); err != nil {
			return contract.WebhookDeliveryResult{Outcome: activities.WebhookCanceled, Attempts: in.Attempt}, err
		}
	}
}
