// Package workflows holds the Temporal workflows: deterministic code only (no pgx, no
// net/http, no time.Now or rand). Each workflow is an exported function over a private
// implementation struct; its ID is built from the business id, so a repeated start finds
// the existing run instead of making a second one.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/activities"
)

// a names the activities for ExecuteActivity and ExecuteLocalActivity (a.ExpireToken, ...):
// the workers' Activities run them; no method is ever called on this nil value.
var a *activities.Activities

// shortRetry is the retry policy of the workflows' short activities (an expiry written back,
// a gateway request's send or its outcome stored, a hold release prepared): 200 ms between the first
// attempts, doubling up to maxInterval, the error types nonRetryable final.
func shortRetry(maxInterval time.Duration, nonRetryable ...string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        200 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		NonRetryableErrorTypes: nonRetryable,
	}
}
