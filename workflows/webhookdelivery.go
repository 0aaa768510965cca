package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
)

// WebhookDeliveryWorkflowName is the workflow type of one webhook delivery (DESIGN §10).
const WebhookDeliveryWorkflowName = "WebhookDelivery"

// WebhookDeliveryWorkflowID is the workflow ID of a delivery's first round; a redelivery asked
// for through the API runs as "<id>/retry-<n>" (store.WebhookDeliveryWorkflowID).
func WebhookDeliveryWorkflowID(deliveryID string) string { return "webhook-delivery/" + deliveryID }

// Search attributes of a delivery's workflow, beside OrganizationId.
var (
	AttrWebhookEndpointID = temporal.NewSearchAttributeKeyKeyword("WebhookEndpointId")
	AttrEventType         = temporal.NewSearchAttributeKeyKeyword("EventType")
)

// WebhookDeliveryInput starts a delivery's round. The outbox writes it as
// {"delivery_id": "...", "round": n, "revision": r}; Attempt and Deferrals carry the count
// across a continue-as-new (Revision is carried too).
type WebhookDeliveryInput struct {
	DeliveryID string `json:"delivery_id"`
	Round      int    `json:"round,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Deferrals  int    `json:"deferrals,omitempty"`
	// Revision is the workflow code the run was started for: WebhookRevisionMarkerless
	// (every delivery started now) takes every change's current path without recording a
	// version marker; zero, the runs started before it, decide by their recorded markers.
	Revision int `json:"revision,omitempty"`
}

// WebhookRevisionMarkerless is the WebhookDeliveryInput.Revision of runs that record no
// version markers (each marker comes with an upsert of the TemporalChangeVersion search
// attribute: one more visibility write per delivery). webhookrow.Revision writes it; a test
// keeps the two equal.
const WebhookRevisionMarkerless = 1

// WebhookDeliveryResult is how a delivery's round ended (activities.WebhookAttemptResult's
// Outcome) and how many attempts it made.
type WebhookDeliveryResult struct {
	Outcome  string
	Attempts int
}

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
func WebhookDelivery(ctx workflow.Context, in WebhookDeliveryInput) (WebhookDeliveryResult, error) {
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
	local := in.Revision >= WebhookRevisionMarkerless || workflow.GetVersion(ctx, changeAttemptLocal, workflow.DefaultVersion, 1) == 1
	for loops := 0; ; loops++ {
		if loops >= webhookLoopLimit || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return WebhookDeliveryResult{}, workflow.NewContinueAsNewError(ctx, WebhookDelivery, in)
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
			return WebhookDeliveryResult{Outcome: activities.WebhookFailed, Attempts: in.Attempt}, err
		}
		if res.Done {
			attempts := in.Attempt
			if res.Outcome != activities.WebhookSuperseded && res.Outcome != activities.WebhookAbandoned {
				attempts++
			}
			return WebhookDeliveryResult{Outcome: res.Outcome, Attempts: attempts}, nil
		}
		if res.Deferred {
			in.Deferrals++
		} else {
			in.Attempt++
			in.Deferrals = 0
		}
		if err := workflow.Sleep(ctx, res.RetryIn); err != nil {
			return WebhookDeliveryResult{Outcome: activities.WebhookCanceled, Attempts: in.Attempt}, err
		}
	}
}
