package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The activity-shape floor: the engine's own cost of the shape every gateway request has
// (decision 0012) — a workflow started eagerly whose first task schedules one regular
// activity, dispatched eagerly to the same process — timed from the start call until the
// activity runs. That is the earliest a gateway request's send can leave on this server;
// a bare start (one local activity) is a lower floor the card's shape cannot reach, since
// the activity is only handed out once the first task's completion is persisted.
const shapeQueue = "lockernet-bench-activity-shape"

// shapeWorkflow runs one regular activity, then completes; its input is the start call's
// time (Unix nanoseconds), which the activity measures against.
func shapeWorkflow(ctx workflow.Context, startedAt int64) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteActivity(ctx, "BenchShapeActivity", startedAt).Get(ctx, nil)
}

// measureActivityShape starts shape workflows at rate a second for d on the given server
// with the bench's own worker in the same process, and returns start → activity running.
func measureActivityShape(ctx context.Context, address, namespace string, rate float64, d time.Duration) (summary, error) {
	lat := newSample(fmt.Sprintf("workflow start → its activity running (eager, one regular activity), same server, %.0f/s", rate))
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return summary{}, fmt.Errorf("dial temporal: %w", err)
	}
	defer c.Close()
	w := worker.New(c, shapeQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(shapeWorkflow, workflow.RegisterOptions{Name: "BenchActivityShape"})
	w.RegisterActivityWithOptions(func(ctx context.Context, startedAt int64) error {
		if activity.GetInfo(ctx).Attempt == 1 {
			lat.add(time.Since(time.Unix(0, startedAt)))
		}
		return nil
	}, activity.RegisterOptions{Name: "BenchShapeActivity"})
	if err := w.Start(); err != nil {
		return summary{}, fmt.Errorf("start the bench worker: %w", err)
	}
	defer w.Stop()
	run := time.Now().UnixNano()
	loadclient.OpenLoop(ctx, rate, d, 512, func(ctx context.Context, n int, _ time.Time) {
		t0 := time.Now()
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-shape-%d-%d", run, n),
			TaskQueue: shapeQueue, EnableEagerStart: true, WorkflowExecutionTimeout: 5 * time.Minute}, "BenchActivityShape", t0.UnixNano()); err != nil {
			lat.fail()
		}
	})
	// The last activities run shortly after the last starts.
	time.Sleep(2 * time.Second)
	return lat.summary(), nil
}
