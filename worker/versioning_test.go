package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows/contract"
)

// A run of each workflow type, started so that its first task leaves it open: waiting on a
// timer an hour away, or (a gateway request, a webhook delivery) on the retry after a send
// the stand-in activities below answer as not delivered.
type runOf struct {
	name  string
	input any
	// pinned: the type is registered pinned (it stays on the build of its first task),
	// else auto-upgrade (its next task goes to the current build).
	pinned bool
}

func everyWorkflowType() []runOf {
	later := time.Now().Add(time.Hour)
	id := func() string { return uuid.NewString() }
	return []runOf{
		{name: contract.ReservationWorkflowName, input: contract.ReservationInput{ReservationID: id(), ExpiresAt: later}},
		{name: contract.LockerTokenWorkflowName, input: contract.LockerTokenInput{TokenID: id(), Type: "pickup", ExpiresAt: later}},
		{name: contract.AccessCodeWorkflowName, input: contract.AccessCodeInput{CodeID: id(), ExpiresAt: later}},
		{name: contract.GatewayRequestWorkflowName, pinned: true, input: gatewayreq.Spec{RequestID: id(), Class: gatewayreq.ClassRead,
			Method: "GET", Path: "/lockers", Revision: gatewayreq.RevisionFirstSendLocal,
			Policy: gatewayreq.Policy{DispatchAttempts: 5, DispatchBackoff: time.Hour}}},
		{name: contract.WebhookDeliveryWorkflowName, input: contract.WebhookDeliveryInput{DeliveryID: id(), Revision: contract.WebhookRevisionMarkerless}},
		{name: contract.PickupWindowWorkflowName, input: contract.PickupWindowInput{WindowID: id(), NextAt: later}},
	}
}

// Every registered type is in the table above, with the behaviour the test expects of it.
func TestEveryWorkflowTypeDeclaresItsVersioningBehaviour(t *testing.T) {
	t.Parallel()
	got := worker.VersioningBehaviors()
	want := map[string]workflow.VersioningBehavior{}
	for _, r := range everyWorkflowType() {
		want[r.name] = workflow.VersioningBehaviorAutoUpgrade
		if r.pinned {
			want[r.name] = workflow.VersioningBehaviorPinned
		}
	}
	assert.Equal(t, want, got)
}

// versionedBuild starts a versioned worker of build on queue, on a client of its own, with
// every workflow and stand-ins for the activities the runs above reach.
func versionedBuild(t *testing.T, ts *temporaltest.TestServer, queue string, d worker.Deployment, eager *eagerCounter) client.Client {
	t.Helper()
	c := dialCounting(t, ts, eager)
	w := worker.NewWorker(c, queue, worker.Options{Deployment: d, Pollers: 2})
	worker.RegisterWorkflows(w)
	w.RegisterActivityWithOptions(func(context.Context, activities.SendGatewayRequestInput) (activities.SendGatewayRequestResult, error) {
		return activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "no gateway in this test"}, nil
	}, activity.RegisterOptions{Name: "SendGatewayRequest"})
	w.RegisterActivityWithOptions(func(context.Context, activities.WebhookAttemptInput) (activities.WebhookAttemptResult, error) {
		return activities.WebhookAttemptResult{RetryIn: time.Hour}, nil
	}, activity.RegisterOptions{Name: "AttemptWebhook"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c
}

// eagerCounter counts the starts a client sent asking for eager execution and those the
// server answered with the first task, as the bench's bareCounter does.
type eagerCounter struct{ asked, handed atomic.Int64 }

func (e *eagerCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if e == nil || err != nil || !strings.HasSuffix(method, "/StartWorkflowExecution") {
		return err
	}
	if r, ok := req.(*workflowservice.StartWorkflowExecutionRequest); ok && r.GetRequestEagerExecution() {
		e.asked.Add(1)
	}
	if r, ok := reply.(*workflowservice.StartWorkflowExecutionResponse); ok && r.GetEagerWorkflowTask() != nil {
		e.handed.Add(1)
	}
	return nil
}

func dialCounting(t *testing.T, ts *temporaltest.TestServer, eager *eagerCounter) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(),
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(eager.intercept)}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func admin(c client.Client, ts *temporaltest.TestServer, name string) *deployments.Admin {
	return &deployments.Admin{Client: c, Namespace: ts.GetDefaultNamespace(), Name: name}
}

func makeCurrent(t *testing.T, a *deployments.Admin, build string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := a.SetCurrentWhenPolled(ctx, build, time.Minute)
	require.NoError(t, err)
}

// lastTaskBuild is the build of the worker that completed the run's last workflow task after
// event afterID ("" while none has), and the run's versioning behaviour as Temporal records it.
func lastTaskBuild(ctx context.Context, c client.Client, id string, afterID int64) (string, enumspb.VersioningBehavior, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	build := ""
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", 0, err
		}
		if ev.GetEventId() > afterID && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			build = ev.GetWorkflowTaskCompletedEventAttributes().GetDeploymentVersion().GetBuildId()
		}
	}
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "", 0, err
	}
	return build, d.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior(), nil
}

// awaitTaskBy waits for a workflow task after event afterID, completed by a worker of build.
func awaitTaskBy(t *testing.T, c client.Client, id string, afterID int64, build string, behavior enumspb.VersioningBehavior) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, b, err := lastTaskBuild(context.Background(), c, id, afterID)
		if !assert.NoError(ct, err) {
			return
		}
		assert.Equal(ct, build, got, "the build that completed the task")
		assert.Equal(ct, behavior, b, "the run's versioning behaviour")
	}, 30*time.Second, 100*time.Millisecond, "%s: a workflow task after event %d by build %q", id, afterID, build)
}

func wantBehavior(r runOf) enumspb.VersioningBehavior {
	if r.pinned {
		return enumspb.VERSIONING_BEHAVIOR_PINNED
	}
	return enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE
}

func lastEventID(t *testing.T, c client.Client, id string) int64 {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetHistoryLength()
}

// Each workflow type keeps to builds as it is registered: runs started while build A is
// current run their first task on A; once build B is current, the next task of a gateway
// request (pinned) still goes to A, that of every other type (auto-upgrade) to B.
func TestRunsKeepToTheirBuildAsRegistered(t *testing.T) {
	ts, _ := testenv.Temporal(t)
	ctx := context.Background()
	queue, name := "versioning-"+uuid.NewString()[:8], "lockernet-test"
	a := versionedBuild(t, ts, queue, worker.Deployment{Name: name, BuildID: "build-a"}, nil)
	makeCurrent(t, admin(a, ts, name), "build-a")

	starter := dialCounting(t, ts, nil) // runs no worker: the starts are not eager
	runs := everyWorkflowType()
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = "versioning-" + r.name + "-" + uuid.NewString()[:8]
		_, err := starter.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, r.name, r.input)
		require.NoError(t, err)
	}
	for i, r := range runs {
		awaitTaskBy(t, starter, ids[i], 0, "build-a", wantBehavior(r))
	}

	b := versionedBuild(t, ts, queue, worker.Deployment{Name: name, BuildID: "build-b"}, nil)
	makeCurrent(t, admin(b, ts, name), "build-b")
	for i, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			after := lastEventID(t, starter, ids[i])
			// A signal no workflow handles: it only makes a new workflow task.
			require.NoError(t, starter.SignalWorkflow(ctx, ids[i], "", "versioning-test-nudge", nil))
			want := "build-b"
			if r.pinned {
				want = "build-a"
			}
			awaitTaskBy(t, starter, ids[i], after, want, wantBehavior(r))
			d, err := starter.DescribeWorkflowExecution(ctx, ids[i], "")
			require.NoError(t, err)
			assert.Equal(t, want, d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId(),
				"DescribeWorkflowExecution names the run's build")
		})
	}
}

// Runs started before the workers were versioned go on under the build made current: their
// next task goes to it, and from then on each keeps to builds as its type is registered.
// Until a build is current, they wait (no versioned worker takes an unversioned task).
func TestUnversionedRunsMoveToTheCurrentBuild(t *testing.T) {
	ts, _ := testenv.Temporal(t)
	ctx := context.Background()
	queue, name := "versioning-"+uuid.NewString()[:8], "lockernet-test"

	old := dialCounting(t, ts, nil)
	w := worker.NewWorker(old, queue, worker.Options{Pollers: 2}) // unversioned: the zero Deployment
	worker.RegisterWorkflows(w)
	w.RegisterActivityWithOptions(func(context.Context, activities.SendGatewayRequestInput) (activities.SendGatewayRequestResult, error) {
		return activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "no gateway in this test"}, nil
	}, activity.RegisterOptions{Name: "SendGatewayRequest"})
	w.RegisterActivityWithOptions(func(context.Context, activities.WebhookAttemptInput) (activities.WebhookAttemptResult, error) {
		return activities.WebhookAttemptResult{RetryIn: time.Hour}, nil
	}, activity.RegisterOptions{Name: "AttemptWebhook"})
	require.NoError(t, w.Start())
	runs := everyWorkflowType()
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = "unversioned-" + r.name + "-" + uuid.NewString()[:8]
		_, err := old.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, r.name, r.input)
		require.NoError(t, err)
	}
	for _, id := range ids {
		awaitTaskBy(t, old, id, 0, "", enumspb.VERSIONING_BEHAVIOR_UNSPECIFIED)
	}
	w.Stop()

	c := versionedBuild(t, ts, queue, worker.Deployment{Name: name, BuildID: "build-a"}, nil)
	// Polling, but not current: a signal's task waits.
	before := make([]int64, len(ids))
	for i, id := range ids {
		before[i] = lastEventID(t, c, id)
		require.NoError(t, c.SignalWorkflow(ctx, id, "", "versioning-test-nudge", nil))
	}
	time.Sleep(2 * time.Second) // what a user would see: nothing happens while no build is current
	for i, id := range ids {
		build, _, err := lastTaskBuild(ctx, c, id, before[i])
		require.NoError(t, err)
		assert.Empty(t, build, "%s: no task ran before a build was current", id)
	}

	makeCurrent(t, admin(c, ts, name), "build-a")
	for i, r := range runs {
		awaitTaskBy(t, c, ids[i], before[i], "build-a", wantBehavior(r))
	}
}

// The apiserver starts gateway requests and its outbox's workflows eagerly on its own
// worker. Versioned, the server still hands the first task back in the start's answer: the
// counts are logged (decision 0019 quotes them) and asserted. An eager first task runs on
// the starting process's build even when another build is current; a pinned run then stays
// on it, an auto-upgrade run's next task goes to the current build.
func TestEagerStartsOnAVersionedWorker(t *testing.T) {
	ts, _ := testenv.Temporal(t)
	ctx := context.Background()
	const starts = 20
	for _, tt := range []struct {
		name     string
		versions bool   // the starting process's worker is versioned
		current  string // the build made current before the starts ("" : none)
		other    bool   // another build's worker polls too (and is the one made current)
	}{
		{name: "unversioned worker"},
		{name: "versioned, its build current", versions: true, current: "build-a"},
		{name: "versioned, no build current", versions: true},
		{name: "versioned, another build current", versions: true, current: "build-b", other: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			queue, name := "eager-"+uuid.NewString()[:8], "eager-"+uuid.NewString()[:8]
			counter := &eagerCounter{}
			d := worker.Deployment{}
			if tt.versions {
				d = worker.Deployment{Name: name, BuildID: "build-a"}
			}
			starter := versionedBuild(t, ts, queue, d, counter)
			if tt.other {
				versionedBuild(t, ts, queue, worker.Deployment{Name: name, BuildID: "build-b"}, nil)
			}
			if tt.current != "" {
				makeCurrent(t, admin(starter, ts, name), tt.current)
			}
			var pinned, auto []string
			for i := range starts {
				r := everyWorkflowType()[i%2*3] // a reservation (auto-upgrade), a gateway request (pinned)
				id := "eager-" + uuid.NewString()[:8]
				_, err := starter.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, EnableEagerStart: true}, r.name, r.input)
				require.NoError(t, err)
				if r.pinned {
					pinned = append(pinned, id)
				} else {
					auto = append(auto, id)
				}
			}
			t.Logf("%s: %d starts asked for eager execution, %d answered with the first task", tt.name, counter.asked.Load(), counter.handed.Load())
			assert.EqualValues(t, starts, counter.asked.Load(), "the SDK asks for eager execution")
			assert.EqualValues(t, starts, counter.handed.Load(), "the server hands the first task back")

			wantBuild, b := "", enumspb.VERSIONING_BEHAVIOR_UNSPECIFIED
			if tt.versions {
				wantBuild = "build-a"
			}
			for _, id := range pinned {
				if tt.versions {
					b = enumspb.VERSIONING_BEHAVIOR_PINNED
				}
				awaitTaskBy(t, starter, id, 0, wantBuild, b)
			}
			for _, id := range auto {
				if tt.versions {
					b = enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE
				}
				awaitTaskBy(t, starter, id, 0, wantBuild, b)
			}
			if !tt.other {
				return
			}
			// The next task: the pinned run's on build-a, the auto-upgrade run's on the current build-b.
			for _, id := range []string{pinned[0], auto[0]} {
				after := lastEventID(t, starter, id)
				require.NoError(t, starter.SignalWorkflow(ctx, id, "", "versioning-test-nudge", nil))
				want, behavior := "build-b", enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE
				if id == pinned[0] {
					want, behavior = "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED
				}
				awaitTaskBy(t, starter, id, after, want, behavior)
			}
		})
	}
}
