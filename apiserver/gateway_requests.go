package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// gatewayRequests is the apiserver's one way of running gateway requests (DESIGN §6.2): it
// stores a request, starts its gateway-request/<id> workflow (or meets the run already
// started: the id is fixed), waits for its outcome up to a caller's wait, reports the
// request as stored, and starts the workflows of requests that were stored but never
// started (gateway_requests_reconcile.go). The gateway cloud API's proxied operations and
// polls and the app engine's access-code holds, opens and closes all go through it, so
// they share one wait: the workflow's result, or sooner Postgres announcing the stored
// outcome, cut short when the server drains. It answers no HTTP itself; each surface
// renders the request its own way.
type gatewayRequests struct {
	store     *store.Store
	temporal  client.Client
	logger    *slog.Logger
	taskQueue string
	// policy is recorded with every workflow this instance starts.
	policy gatewayreq.Policy
	eager  bool
	// outcomes wakes waiters when Postgres announces an outcome (gateway_requests_outcomes.go).
	outcomes *outcomeWaiters
	// waiters has one slot per request held open waiting for a gateway (MaxWaiters).
	waiters  chan struct{}
	draining <-chan struct{}
	// first makes first sends in this process (gateway_requests_first_send.go).
	first *firstSends
}

func newGatewayRequests(d Deps, settings CustomerSettings, draining <-chan struct{}) *gatewayRequests {
	return &gatewayRequests{
		store: d.Store, temporal: d.Temporal, logger: d.Logger, taskQueue: settings.TaskQueue,
		policy: settings.Policy, eager: !settings.DisableEagerStart, outcomes: newOutcomeWaiters(),
		waiters: make(chan struct{}, settings.MaxWaiters), draining: draining,
		first: newFirstSends(d.Sender, settings.FirstSendLease, d.Logger),
	}
}

// firstSendLease is the lease a new request is stored with when this apiserver will make
// its first send itself (only when the caller waits for the answer), else zero.
func (g *gatewayRequests) firstSendLease(wait time.Duration) time.Duration {
	if wait <= 0 || !g.first.on() {
		return 0
	}
	return g.first.lease
}

// holdWaiter takes one of the instance's MaxWaiters slots for a request that will wait for a
// gateway; ok is false when all are taken (the caller answers 503 before storing anything).
func (g *gatewayRequests) holdWaiter() (release func(), ok bool) {
	select {
	case g.waiters <- struct{}{}:
		return func() { <-g.waiters }, true
	default:
		return nil, false
	}
}

// submit stores a new request. With an idempotency claim, a key that already stands for a
// request returns that request with created false (store.CreateGatewayRequest).
func (g *gatewayRequests) submit(ctx context.Context, r store.NewGatewayRequest, idem *store.IdempotencyClaim) (store.GatewayRequest, bool, error) {
	return g.store.CreateGatewayRequest(ctx, r, idem)
}

// state returns one of the organization's requests as stored: pending, or with its outcome.
func (g *gatewayRequests) state(ctx context.Context, orgID int64, id uuid.UUID) (store.GatewayRequest, error) {
	return g.store.GatewayRequest(ctx, orgID, id)
}

// await waits up to wait for the request's outcome and returns the request as it stands
// then: terminal with its outcome, or still pending as stored. A submitted request's
// workflow is started first (or met); a poll attaches to the run and starts it again only
// if it is gone. When the workflow cannot be started the stored request answers at once:
// the reconciler starts it once Temporal answers again. With no wait (respond-async, wait=0,
// a poll without a wait: DESIGN §6.2 "at once") nothing waits and nothing queries the
// workflow — a query waits for a workflow task in flight, and with eager start the first
// task is usually running right now; the row is current, as the workflow records each send
// before it goes out. err reports a wait that failed (the client left, Temporal failed); the
// request returned is then the best known.
func (g *gatewayRequests) await(ctx context.Context, row store.GatewayRequest, wait time.Duration, poll bool) (store.GatewayRequest, error) {
	stored, stop := g.outcomes.wait(row.ID)
	defer stop()
	began := time.Now()
	if row.LeaseUntil != nil && !row.Terminal() {
		// An apiserver is making its first send: wait on it, not on a workflow it never
		// started. Once it no longer carries the request, start (or meet) the workflow.
		var owned bool
		var err error
		row, owned, err = g.awaitOwner(ctx, row, wait, stored)
		if owned || err != nil {
			markTiming(ctx, "wait", began)
			return row, err
		}
		poll = false
		wait -= time.Since(began)
	}
	var run client.WorkflowRun
	var err error
	if poll {
		run = g.temporal.GetWorkflow(ctx, workflows.GatewayRequestWorkflowID(row.ID.String()), "")
	} else {
		began := time.Now()
		run, err = g.start(ctx, row)
		markTiming(ctx, "start", began)
	}
	if err != nil {
		g.logger.WarnContext(ctx, "start gateway request workflow", "requestId", row.ID, "err", err)
		return row, nil
	}
	if wait <= 0 {
		return row, nil
	}
	began = time.Now()
	res, done, err := g.waitOutcome(ctx, run, &row, wait, stored)
	markTiming(ctx, "wait", began)
	return g.afterWait(ctx, row, res, done, err)
}

// afterWait is the request as a wait for its outcome left it (waitOutcome's results).
func (g *gatewayRequests) afterWait(ctx context.Context, row store.GatewayRequest, res *gatewayreq.Result, done bool,
	err error) (store.GatewayRequest, error) {
	switch {
	case errors.Is(err, context.Canceled):
		g.logger.InfoContext(ctx, "client left while waiting for its gateway request", "requestId", row.ID)
	case err != nil:
		g.logger.ErrorContext(ctx, "wait for gateway request", "requestId", row.ID, "err", err)
	case done && res != nil && !res.Outcome.BodyInStore:
		return row.WithResult(*res), nil
	case done && res == nil:
		return row, nil
	case done:
		// The result does not carry the gateway's body: the stored request does (below).
		// If it cannot be read now, the client gets the request to poll.
	}
	// Not finished within the wait: the stored row says what the request is doing now (the
	// outcome is written there before the workflow ends).
	if fresh, ferr := g.store.GatewayRequest(ctx, row.OrganizationID, row.ID); ferr == nil {
		row = fresh
	}
	return row, err
}

// start starts the request's workflow from its row, or finds the one already started: the
// id is fixed, so concurrent duplicates and restarts meet the same run, and any instance
// starts it identically.
func (g *gatewayRequests) start(ctx context.Context, row store.GatewayRequest) (client.WorkflowRun, error) {
	return g.startSpec(ctx, row, row.Spec(g.policy))
}

// startSpec starts the request's workflow with spec. A request leased to a first send's
// owner is the workflow's from then on: the lease ends.
func (g *gatewayRequests) startSpec(ctx context.Context, row store.GatewayRequest, spec gatewayreq.Spec) (client.WorkflowRun, error) {
	id := row.ID.String()
	opts := client.StartWorkflowOptions{
		ID:                       workflows.GatewayRequestWorkflowID(id),
		TaskQueue:                g.taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		EnableEagerStart:         g.eager,
		TypedSearchAttributes: workflows.SearchAttrs{OrganizationID: row.OrganizationID, LocationID: row.LocationID,
			RequestKind: gatewayreq.SearchKind(row.GatewaySerial, row.Kind)}.Typed(),
		Memo: map[string]any{"gatewaySerial": row.GatewaySerial, "method": row.Method, "path": row.Path},
	}
	run, err := g.temporal.ExecuteWorkflow(ctx, opts, workflows.GatewayRequestWorkflowName, spec)
	if err != nil {
		return nil, fmt.Errorf("start workflow %s: %w", opts.ID, err)
	}
	if row.LeaseUntil != nil {
		if err := g.store.ReleaseGatewayLease(ctx, row.ID); err != nil {
			// Harmless: the reconciler meets the running workflow and ends the lease then.
			g.logger.WarnContext(ctx, "end a first send's lease", "requestId", row.ID, "err", err)
		}
	}
	return run, nil
}

// waitOutcome waits up to wait for the request's outcome: the workflow's result, or (sooner)
// the outcome stored: handed over in this process, or announced by Postgres. done is false when it did not finish in
// time; with done, res is the workflow result, or nil when row now holds the stored outcome
// instead.
func (g *gatewayRequests) waitOutcome(ctx context.Context, run client.WorkflowRun, row *store.GatewayRequest, wait time.Duration,
	stored *outcomeWaiter) (*gatewayreq.Result, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	type got struct {
		res gatewayreq.Result
		err error
	}
	results := make(chan got, 1)
	getResult := func(run client.WorkflowRun) {
		var g got
		g.err = run.Get(wctx, &g.res)
		results <- g
	}
	go getResult(run)
	announced := stored.done
	restarted := false
	for {
		select {
		case <-g.draining:
			// The server is stopping: answer what is known now (202 and the request to poll)
			// rather than hold the client until the drain cuts its connection.
			cancel()
			<-results
			return nil, false, nil
		case <-announced:
			announced = nil
			if stored.row != nil {
				cancel()
				<-results
				*row = *stored.row
				return nil, true, nil
			}
			fresh, err := g.store.GatewayRequest(ctx, row.OrganizationID, row.ID)
			if err == nil && fresh.Terminal() {
				cancel()
				<-results
				*row = fresh
				return nil, true, nil
			}
		case r := <-results:
			var notFound *serviceerror.NotFound
			var deadline *serviceerror.DeadlineExceeded
			switch {
			case r.err == nil:
				return &r.res, true, nil
			case ctx.Err() != nil:
				return nil, false, ctx.Err()
			case wctx.Err() != nil || errors.As(r.err, &deadline):
				return nil, false, nil
			case errors.As(r.err, &notFound) && !restarted:
				// The run is gone (retention) or never started: start it again from the row.
				restarted = true
				if run, r.err = g.start(ctx, *row); r.err != nil {
					return nil, false, r.err
				}
				go getResult(run)
				continue
			}
			return nil, false, fmt.Errorf("get workflow result: %w", r.err)
		}
	}
}
