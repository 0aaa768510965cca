// Package worker runs the Temporal worker: it registers the workflows and activities on the
// task queue and polls until its context is done. No business logic lives here.
package worker

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Register adds every workflow and activity to a worker.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	RegisterWorkflows(r)
	if acts != nil {
		r.RegisterActivity(acts)
	}
}

// RegisterWorkflows adds every workflow to a worker or a replayer: the replay test
// (workflows/replay_test.go) registers this same list, and fails for a workflow that has no
// recorded history.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Reservation, workflow.RegisterOptions{Name: contract.ReservationWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.LockerToken, workflow.RegisterOptions{Name: contract.LockerTokenWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AccessCode, workflow.RegisterOptions{Name: contract.AccessCodeWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.GatewayRequest, workflow.RegisterOptions{Name: contract.GatewayRequestWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.WebhookDelivery, workflow.RegisterOptions{Name: contract.WebhookDeliveryWorkflowName})
}

// Options tune the worker; zero values take the SDK defaults.
type Options struct {
	MaxConcurrentActivities int
	// Pollers is the number of concurrent polls for workflow tasks and for activity tasks
	// (8 each when zero; the SDK's default of 2 caps a worker near 40 workflow tasks a
	// second on a loaded server, where each poll's round trip is ~25 ms).
	Pollers int
}

// Run polls the task queue until ctx is done, then stops the worker gracefully.
func Run(ctx context.Context, c client.Client, taskQueue string, acts *activities.Activities, opts Options) error {
	pollers := opts.Pollers
	if pollers == 0 {
		pollers = 8
	}
	w := sdkworker.New(c, taskQueue, sdkworker.Options{
		MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskPollers:   pollers,
		MaxConcurrentActivityTaskPollers:   pollers,
		// A workflow task that panics (a bug, or the deadlock detector on a starved CPU) is
		// retried, not turned into a failed workflow: a held locker must still be released
		// once the worker has CPU again or a fixed build is deployed.
		WorkflowPanicPolicy: sdkworker.BlockWorkflow,
		// The SDK's default of 1 s trips on a busy two-core machine; no workflow task here
		// does anything but deterministic bookkeeping, so a longer budget hides no bug.
		DeadlockDetectionTimeout: 10 * time.Second,
	})
	Register(w, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
