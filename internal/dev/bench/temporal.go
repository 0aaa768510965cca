package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/workflows/contract"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
)

// The temporal scenario measures Temporal's own capacity on the shape's server, beside what
// the service builds on it: a bare workflow that runs one local activity and completes,
// started eagerly (the start's answer carries its first workflow task to the bench's own
// worker, on a task queue of its own), driven open-loop at rising rates until the
// completions fall behind the starts, then at rates between (ladder).
const bareQueue = "lockernet-bench-bare"

// bareWorkflow is the bare workflow: one local activity, then done.
func bareWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteLocalActivity(ctx, bareActivity).Get(ctx, nil)
}

func bareActivity(context.Context) error { return nil }

// deliveryShapedWorkflow is the bare workflow as the outbox starts a webhook delivery: it
// takes the delivery's input, and the start carries the delivery's three search attributes
// (DESIGN §10) and its ID policies (bareTarget.deliveryShape). It is what Temporal alone
// costs for the card's delivery before any of the service's own work.
func deliveryShapedWorkflow(ctx workflow.Context, _ json.RawMessage) error { return bareWorkflow(ctx) }

// The tower flow's shape in Temporal alone: a reservation-shaped workflow that sets its
// hold's timer and ends on the signal the drop-off token sends, and a token-shaped workflow
// that sets its expiry's timer and waits (the real token waits for its use or expiry, long
// after the step). A flow is the reservation's eager start, the token's eager start and the
// signal as the outbox sends it (signal-with-start), in that order; it is done when the
// reservation completes. It is what Temporal alone costs for the card's tower flow.
func reservationShapedWorkflow(ctx workflow.Context, _ json.RawMessage) error {
	ended := workflow.GetSignalChannel(ctx, flowShapeSignal)
	timer := workflow.NewTimer(ctx, time.Hour)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(ended, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.Select(ctx)
	return nil
}

func tokenShapedWorkflow(ctx workflow.Context, _ json.RawMessage) error {
	return workflow.Sleep(ctx, time.Hour)
}

const flowShapeSignal = "reservation-ended"

// flowShapedStart is a reservation's or token's start options (outboxShapedStart with their
// three search attributes).
func flowShapedStart(id string) client.StartWorkflowOptions {
	return outboxShapedStart(id, map[string]string{"OrganizationId": "1", "TowerId": "0100000000000011", "LockerId": "42"})
}

// startFlowShaped makes one flow of the tower flow's shape (reservationShapedWorkflow).
func startFlowShaped(ctx context.Context, c client.Client, id string) error {
	in := json.RawMessage(`{"reservation_id":"` + id + `"}`)
	if _, err := c.ExecuteWorkflow(ctx, flowShapedStart("bench-flow-reservation/"+id), "BenchReservationShape", in); err != nil {
		return err
	}
	if _, err := c.ExecuteWorkflow(ctx, flowShapedStart("bench-flow-token/"+id), "BenchTokenShape", in); err != nil {
		return err
	}
	signal := flowShapedStart("bench-flow-reservation/" + id)
	signal.EnableEagerStart, signal.WorkflowIDConflictPolicy = false, enumspb.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED
	_, err := c.SignalWithStartWorkflow(ctx, signal.ID, flowShapeSignal, "consumed", signal, "BenchReservationShape", in)
	return err
}

// deliveryShapedStart is a delivery's start options (outboxShapedStart with its three
// search attributes).
func deliveryShapedStart(id string) client.StartWorkflowOptions {
	return outboxShapedStart(id, map[string]string{
		"OrganizationId": "1", "WebhookEndpointId": "00000000-0000-4000-8000-000000000001", "EventType": "webhook.test"})
}

// outboxShapedStart is internal/outbox's start of a workflow without a signal, on the
// bench's queue: the search attributes, reject-duplicate and use-existing, eager, no
// execution timeout.
func outboxShapedStart(id string, attrs map[string]string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue, EnableEagerStart: true,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    contract.KeywordAttributes(attrs),
	}
}

// bareStep is one offered rate of bare workflow starts.
type bareStep struct {
	Rate     float64
	Duration time.Duration
	// Started were accepted by the server, Eager of them with their first task in the answer;
	// Errors were refused; Skipped not sent because 512 starts were already in flight.
	Started, Eager, Errors, Skipped int
	Start                           summary
	// Completed by the end of the step, and the rate that is; Behind is started less
	// completed at the end of the step; DrainedIn how long the rest took (0: none left).
	Completed     int
	CompletedRate float64
	Behind        int
	DrainedIn     time.Duration
	NotDrained    int
	Held, Kept    bool
	Why           []string
}

// bareResult is the temporal scenario's outcome.
type bareResult struct {
	Step  time.Duration
	Steps []bareStep
	// Sustained is the highest rate kept up with for a whole step of sustainWindow (0: none).
	Sustained float64
	// Shape is how each workflow was started: "" the bare start, shapeDelivery as a webhook
	// delivery is (deliveryShapedStart), shapeFlow a tower flow's two workflows and signal
	// (startFlowShaped; rates and counts are then of flows).
	Shape string
}

// startAt50 is the step at 50 starts/s, whose start p50 the report sets beside the gateway
// proxy's start phase.
func (r *bareResult) startAt50() (summary, bool) {
	for _, s := range r.Steps {
		if s.Rate == 50 {
			return s.Start, true
		}
	}
	return summary{}, false
}

// bareCounter counts, on the bench worker's own connection, the starts answered with an
// eager task and the workflow completions the server accepted.
type bareCounter struct {
	eager, completed atomic.Int64
}

func (c *bareCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch {
	case strings.HasSuffix(method, "/StartWorkflowExecution"):
		if r, ok := reply.(*workflowservice.StartWorkflowExecutionResponse); ok && r.GetEagerWorkflowTask() != nil {
			c.eager.Add(1)
		}
	case strings.HasSuffix(method, "/RespondWorkflowTaskCompleted"):
		if r, ok := req.(*workflowservice.RespondWorkflowTaskCompletedRequest); ok {
			for _, cmd := range r.GetCommands() {
				if cmd.GetCommandType() == enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION {
					c.completed.Add(1)
				}
			}
		}
	}
	return nil
}

// runBare starts the bench's worker and offers bare workflow starts at each rate the ladder
// picks in turn for d: the listed rates up to the first Temporal did not keep up with, then
// (with -refine) rates between the highest kept up with and the lowest not.
func runBare(ctx context.Context, b *bench, l *ladder, d time.Duration) (bareResult, error) {
	return runBareOn(ctx, bareTarget{key: b.shape.key, address: b.cfg.TemporalAddress, namespace: b.cfg.TemporalNS,
		quiet: func(ctx context.Context) { waitForQuiet(ctx, b, 10*time.Minute) }}, l, d)
}

// bareTarget is the Temporal server the bare workflows run on.
type bareTarget struct {
	key, address, namespace string
	// quiet waits, after a step past the knee, until the server has worked off its queues.
	quiet func(context.Context)
	// during, when set, runs beside each step (for its length) and is told the step's rate.
	during func(ctx context.Context, rate float64)
	// shape is bareResult.Shape.
	shape string
}

// The shapes of runBareOn besides the bare start.
const (
	shapeDelivery = "delivery"
	shapeFlow     = "flow"
)

// runBareOn is runBare on any server.
func runBareOn(ctx context.Context, tg bareTarget, l *ladder, d time.Duration) (bareResult, error) {
	res := bareResult{Step: d, Shape: tg.shape}
	counter := &bareCounter{}
	c, err := client.Dial(client.Options{HostPort: tg.address, Namespace: tg.namespace,
		Logger:            log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}}})
	if err != nil {
		return res, fmt.Errorf("dial temporal: %w", err)
	}
	defer c.Close()
	w := worker.New(c, bareQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: "BenchBare"})
	w.RegisterWorkflowWithOptions(deliveryShapedWorkflow, workflow.RegisterOptions{Name: "BenchDeliveryShape"})
	w.RegisterWorkflowWithOptions(reservationShapedWorkflow, workflow.RegisterOptions{Name: "BenchReservationShape"})
	w.RegisterWorkflowWithOptions(tokenShapedWorkflow, workflow.RegisterOptions{Name: "BenchTokenShape"})
	w.RegisterActivity(bareActivity)
	if err := w.Start(); err != nil {
		return res, fmt.Errorf("start the bench worker: %w", err)
	}
	defer w.Stop()
	run := time.Now().UnixNano()
	for rate, ok := l.rate(); ok && ctx.Err() == nil; rate, ok = l.rate() {
		i := len(res.Steps)
		if i > 0 {
			// Every step from a quiet server: a step near or past the knee leaves it working
			// off its queues for a while.
			tg.quiet(ctx)
		}
		what := "bare workflow"
		switch tg.shape {
		case shapeDelivery:
			what = "delivery-shaped workflow"
		case shapeFlow:
			what = "flow-shaped (two workflows and a signal)"
		}
		logf("%s: temporal: %.0f %s starts/s for %s", tg.key, rate, what, d)
		var beside sync.WaitGroup
		if tg.during != nil {
			beside.Go(func() { tg.during(ctx, rate) })
		}
		st := bareStep{Rate: rate, Duration: d}
		lat := newSample(fmt.Sprintf("bare eager start at %.0f/s", rate))
		var started, failed atomic.Int64
		eager0, done0 := counter.eager.Load(), counter.completed.Load()
		_, st.Skipped = loadclient.OpenLoop(ctx, rate, d, 512, func(ctx context.Context, n int, _ time.Time) {
			t0 := time.Now()
			var err error
			switch tg.shape {
			case shapeDelivery:
				id := fmt.Sprintf("bench-delivery-shape-%d-%d-%d", run, i, n)
				_, err = c.ExecuteWorkflow(ctx, deliveryShapedStart(id), "BenchDeliveryShape",
					json.RawMessage(`{"delivery_id":"`+id+`","revision":1}`))
			case shapeFlow:
				err = startFlowShaped(ctx, c, fmt.Sprintf("%d-%d-%d", run, i, n))
			default:
				_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-bare-%d-%d-%d", run, i, n),
					TaskQueue: bareQueue, EnableEagerStart: true, WorkflowExecutionTimeout: 5 * time.Minute}, "BenchBare")
			}
			if err != nil {
				failed.Add(1)
				lat.fail()
				return
			}
			lat.add(time.Since(t0))
			started.Add(1)
		})
		beside.Wait()
		st.Start = lat.summary()
		st.Started, st.Errors = int(started.Load()), int(failed.Load())
		st.Eager = int(counter.eager.Load() - eager0)
		st.Completed = int(counter.completed.Load() - done0)
		st.CompletedRate = float64(st.Completed) / d.Seconds()
		st.Behind = st.Started - st.Completed
		// Wait for the rest, so the next step starts from an idle server.
		drain := time.Now()
		for counter.completed.Load()-done0 < int64(st.Started) && time.Since(drain) < time.Minute && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		if st.Behind > 0 {
			st.DrainedIn = time.Since(drain)
		}
		st.NotDrained = st.Started - int(counter.completed.Load()-done0)
		if st.Behind > int(rate) {
			st.Why = append(st.Why, fmt.Sprintf("%d started workflows not completed at the end, more than a second of starts (%.0f)", st.Behind, rate))
		}
		if st.Errors > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d starts refused", st.Errors))
		}
		if st.Skipped > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d starts not sent (512 in flight)", st.Skipped))
		}
		st.Held = len(st.Why) == 0
		st.Kept = st.Held && d >= sustainWindow
		if st.Held && !st.Kept {
			st.Why = append(st.Why, fmt.Sprintf("but for %s only, under the %s the criterion needs", d, sustainWindow))
		}
		res.Steps = append(res.Steps, st)
		logf("%s: temporal: %.0f/s: start p50 %s p99 %s, %.1f completed/s, %d behind; %s", tg.key, rate,
			ms(st.Start.P50), ms(st.Start.P99), st.CompletedRate, st.Behind, stepVerdict(st.Held, st.Kept, st.Why))
		if st.Kept {
			res.Sustained = max(res.Sustained, rate)
		}
		l.record(rate, st.Held)
	}
	return res, ctx.Err()
}
