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
// recorded history. Each type declares how its runs keep to a build under worker versioning
// (decision 0019); an unversioned worker ignores it.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	for _, wt := range workflowTypes {
		r.RegisterWorkflowWithOptions(wt.fn, workflow.RegisterOptions{Name: wt.name, VersioningBehavior: wt.behavior})
	}
}

// workflowTypes are the workflows, their names and their versioning behaviours (decision
// 0019). Pinned: a run is handed only to workers of the build that ran its first task, until
// it ends. Auto-upgrade: a run's next task goes to the deployment's current build; the
// workflow's code keeps every build's runs replaying (input revisions, workflow.GetVersion).
var workflowTypes = []struct {
	fn       any
	name     string
	behavior workflow.VersioningBehavior
}{
	{workflows.Reservation, contract.ReservationWorkflowName, workflow.VersioningBehaviorAutoUpgrade},
	{workflows.LockerToken, contract.LockerTokenWorkflowName, workflow.VersioningBehaviorAutoUpgrade},
	{workflows.AccessCode, contract.AccessCodeWorkflowName, workflow.VersioningBehaviorAutoUpgrade},
	// Lives for days (a parcel's window and its extensions): every build must replay it.
	{workflows.PickupWindow, contract.PickupWindowWorkflowName, workflow.VersioningBehaviorAutoUpgrade},
	// Seconds to minutes long, and its first task's path depends on the input revision this
	// build starts it with (decision 0018): it must never meet a worker of another build.
	{workflows.GatewayRequest, contract.GatewayRequestWorkflowName, workflow.VersioningBehaviorPinned},
	// Retries for days: pinned, a deploy would have to keep the old build running until its
	// last delivery gave up.
	{workflows.WebhookDelivery, contract.WebhookDeliveryWorkflowName, workflow.VersioningBehaviorAutoUpgrade},
}

// VersioningBehaviors maps each workflow type's name to the versioning behaviour it is
// registered with.
func VersioningBehaviors() map[string]workflow.VersioningBehavior {
	m := make(map[string]workflow.VersioningBehavior, len(workflowTypes))
	for _, wt := range workflowTypes {
		m[wt.name] = wt.behavior
	}
	return m
}

// Options tune the worker; zero values take the SDK defaults.
type Options struct {
	MaxConcurrentActivities int
	// Pollers is the number of concurrent polls for workflow tasks and for activity tasks
	// (8 each when zero; the SDK's default of 2 caps a worker near 40 workflow tasks a
	// second on a loaded server, where each poll's round trip is ~25 ms).
	Pollers int
	// Deployment is the worker deployment version the worker polls as (DeploymentFromConfig);
	// zero: unversioned.
	Deployment Deployment
}

// Run polls the task queue until ctx is done, then stops the worker gracefully.
func Run(ctx context.Context, c client.Client, taskQueue string, acts *activities.Activities, opts Options) error {
	w := newWorker(c, taskQueue, opts)
	Register(w, acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// newWorker is the SDK worker Run starts, before anything is registered on it.
func newWorker(c client.Client, taskQueue string, opts Options) sdkworker.Worker {
	pollers := opts.Pollers
	if pollers == 0 {
		pollers = 8
	}
	return sdkworker.New(c, taskQueue, sdkworker.Options{
		MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskPollers:   pollers,
		MaxConcurrentActivityTaskPollers:   pollers,
		// Versioned, the worker takes only its deployment version's tasks (decision 0019).
		DeploymentOptions: opts.Deployment.options(),
		// A workflow task that panics (a bug, or the deadlock detector on a starved CPU) is
		// retried, not turned into a failed workflow: a held locker must still be released
		// once the worker has CPU again or a fixed build is deployed.
		WorkflowPanicPolicy: sdkworker.BlockWorkflow,
		// The SDK's default of 1 s trips on a busy two-core machine; no workflow task here
		// does anything but deterministic bookkeeping, so a longer budget hides no bug.
		DeadlockDetectionTimeout: 10 * time.Second,
	})
}
