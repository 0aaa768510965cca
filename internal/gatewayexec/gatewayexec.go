// Package gatewayexec runs gateway requests (DESIGN §6.2, decision 0012): it stores a
// request, starts its gateway-request/<id> workflow (or meets the run already started: the id
// is fixed), waits for its outcome up to a caller's wait, reports a request as stored or, while
// it is pending, as its workflow's query says (bounded), and starts the workflows of requests
// that were stored but never started (reconcile.go). The gateway cloud API's proxied
// operations and polls and the app engine's access-code holds, opens and closes all go through
// it, so they share one wait: the workflow's result, or sooner the stored outcome (handed over
// in this process or announced by Postgres, outcomes.go), cut short when the server drains.
// It answers no HTTP: each surface of the apiserver renders a request its own way.
//
// Layering: apiserver → (gatewayexec, workflows) → activities → internal/{store,
// gatewayclient, gatewayreq, …}. This package is handed its store, Temporal client and
// settings; it never imports the apiserver or the activities.
package gatewayexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Settings are how an Executor runs requests; the apiserver gives them with its defaults
// applied (the gateway cloud API's settings).
type Settings struct {
	// TaskQueue runs the gateway-request workflows.
	TaskQueue string
	// Policy is recorded with every workflow this instance starts.
	Policy gatewayreq.Policy
	// DisableEagerStart starts the workflows without eager dispatch.
	DisableEagerStart bool
	// MaxWaiters bounds the requests this instance holds open waiting for a gateway (> 0).
	MaxWaiters int
}

// Deps are an Executor's collaborators.
type Deps struct {
	Store    *store.Store
	Temporal client.Client
	Logger   *slog.Logger
	// Registry takes the executor's metrics (lockernet_gateway_request_polls_total).
	Registry prometheus.Registerer
	// MarkPhase records the time a caller's answer spent in a phase since since (the
	// apiserver's Server-Timing: start, wait, query); nil records nothing.
	MarkPhase func(ctx context.Context, phase string, since time.Time)
	// Draining is closed when the server begins to stop: waits then end at once with what
	// is known.
	Draining <-chan struct{}
}

// Executor is the apiserver's one way of running gateway requests (see the package comment).
type Executor struct {
	store     *store.Store
	temporal  client.Client
	logger    *slog.Logger
	taskQueue string
	// policy is recorded with every workflow this instance starts.
	policy gatewayreq.Policy
	eager  bool
	// outcomes wakes waiters when Postgres announces an outcome (outcomes.go).
	outcomes *outcomeWaiters
	// waiters has one slot per request held open waiting for a gateway (MaxWaiters).
	waiters  chan struct{}
	draining <-chan struct{}
	// polls counts the polls of pending requests by where their answer came from.
	polls *prometheus.CounterVec
	// markPhase is Deps.MarkPhase (never nil).
	markPhase func(ctx context.Context, phase string, since time.Time)
}

// New builds an Executor and registers its metrics on d.Registry.
func New(d Deps, settings Settings) *Executor {
	mark := d.MarkPhase
	if mark == nil {
		mark = func(context.Context, string, time.Time) {}
	}
	g := &Executor{
		store: d.Store, temporal: d.Temporal, logger: d.Logger, taskQueue: settings.TaskQueue,
		policy: settings.Policy, eager: !settings.DisableEagerStart, outcomes: newOutcomeWaiters(),
		waiters: make(chan struct{}, settings.MaxWaiters), draining: d.Draining, markPhase: mark,
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_gateway_request_polls_total",
			Help: "Polls of gateway requests not yet terminal, by where the answer came from: the workflow's query (workflow) or the stored row (store).",
		}, []string{"source"}),
	}
	d.Registry.MustRegister(g.polls)
	return g
}

// HoldWaiter takes one of the instance's MaxWaiters slots for a request that will wait for a
// gateway; ok is false when all are taken (the caller answers 503 before storing anything).
func (g *Executor) HoldWaiter() (release func(), ok bool) {
	select {
	case g.waiters <- struct{}{}:
		return func() { <-g.waiters }, true
	default:
		return nil, false
	}
}

// Submit stores a new request. With an idempotency claim, a key that already stands for a
// request returns that request with created false (store.CreateGatewayRequest).
func (g *Executor) Submit(ctx context.Context, r store.NewGatewayRequest, idem *store.IdempotencyClaim) (store.GatewayRequest, bool, error) {
	return g.store.CreateGatewayRequest(ctx, r, idem)
}

// State returns one of the organization's requests as stored: pending, or with its outcome.
func (g *Executor) State(ctx context.Context, orgID int64, id uuid.UUID) (store.GatewayRequest, error) {
	return g.store.GatewayRequest(ctx, orgID, id)
}

// Await waits up to wait for the request's outcome and returns the request as it stands
// then: terminal with its outcome, or still pending as stored. A submitted request's
// workflow is started first (or met); a poll attaches to the run and starts it again only
// if it is gone. When the workflow cannot be started the stored request answers at once:
// the reconciler starts it once Temporal answers again. With no wait (respond-async, wait=0,
// a poll without a wait: DESIGN §6.2 "at once") nothing waits: the caller answers from the
// stored row (a poll then asks the workflow's query, bounded: live). err reports a wait that
// failed (the client left, Temporal failed); the request returned is then the best known.
func (g *Executor) Await(ctx context.Context, row store.GatewayRequest, wait time.Duration, poll bool) (store.GatewayRequest, error) {
	stored, stop := g.outcomes.wait(row.ID)
	defer stop()
	var run client.WorkflowRun
	var err error
	if poll {
		run = g.temporal.GetWorkflow(ctx, contract.GatewayRequestWorkflowID(row.ID.String()), "")
	} else {
		began := time.Now()
		run, err = g.start(ctx, row)
		g.markPhase(ctx, "start", began)
	}
	if err != nil {
		g.logger.WarnContext(ctx, "start gateway request workflow", "requestId", row.ID, "err", err)
		return row, nil
	}
	if wait <= 0 {
		return row, nil
	}
	began := time.Now()
	res, done, err := g.waitOutcome(ctx, run, &row, wait, stored)
	g.markPhase(ctx, "wait", began)
	return g.afterWait(ctx, row, res, done, err)
}

// pollQueryTimeout bounds a poll's query of the workflow (DESIGN §6.2: 250 ms); past it, or
// when the query fails, the poll answers from the stored row.
const pollQueryTimeout = 250 * time.Millisecond

// Live is a pending request as its workflow's query reports it now (DESIGN §6.2: "polls go
// through the workflow's query"): its state, attempts, last cause and next attempt. The
// query is bounded by pollQueryTimeout; when it cannot answer in time, or the workflow
// says the request is settled (its outcome is in Postgres by then), the stored row answers.
// Each answer is counted by its source.
func (g *Executor) Live(ctx context.Context, row store.GatewayRequest) LiveRequest {
	if row.Terminal() {
		return LiveRequest{GatewayRequest: row}
	}
	if gatewayreq.FirstSendOut(row.Status, row.Attempts, row.LastSend) {
		// The first send is out inside the workflow's first task, which a query would wait
		// for (DESIGN §6.2): the stored row answers at once.
		g.polls.WithLabelValues("store").Inc()
		return LiveRequest{GatewayRequest: row}
	}
	qctx, cancel := context.WithTimeout(ctx, pollQueryTimeout)
	defer cancel()
	began := time.Now()
	st, err := g.query(qctx, row.ID)
	g.markPhase(ctx, "query", began)
	if err == nil && !gatewayreq.Terminal(st.Status) {
		g.polls.WithLabelValues("workflow").Inc()
		row.Status, row.Attempts = st.Status, max(row.Attempts, st.Attempts)
		if st.UpdatedAt.After(row.UpdatedAt) {
			row.UpdatedAt = st.UpdatedAt
		}
		out := LiveRequest{GatewayRequest: row, LastError: st.LastError}
		if !st.NextAttemptAt.IsZero() {
			next := st.NextAttemptAt
			out.NextAttemptAt = &next
		}
		return out
	}
	if err != nil && ctx.Err() == nil {
		g.logger.InfoContext(ctx, "query a pending gateway request; answering from the store", "requestId", row.ID, "err", err)
	}
	if err == nil {
		// Settled since the row was read: the stored outcome answers.
		row = g.current(ctx, row)
	}
	g.polls.WithLabelValues("store").Inc()
	return LiveRequest{GatewayRequest: row}
}

// query asks the request's workflow for its state.
func (g *Executor) query(ctx context.Context, id uuid.UUID) (contract.GatewayRequestState, error) {
	var st contract.GatewayRequestState
	v, err := g.temporal.QueryWorkflow(ctx, contract.GatewayRequestWorkflowID(id.String()), "", contract.QueryGatewayRequestState)
	if err != nil {
		return st, fmt.Errorf("query gateway request workflow: %w", err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decode gateway request state: %w", err)
	}
	return st, nil
}

// LiveRequest is a request as a poll answers it: the stored row, with what only the
// workflow knows while it runs.
type LiveRequest struct {
	store.GatewayRequest
	// LastError says why the last send did not settle the request (the workflow's query).
	LastError string
	// NextAttemptAt is when the workflow sends again while it waits to (the query).
	NextAttemptAt *time.Time
}

// current is the request as stored now, or as last known when it cannot be read.
func (g *Executor) current(ctx context.Context, row store.GatewayRequest) store.GatewayRequest {
	if fresh, err := g.store.GatewayRequest(context.WithoutCancel(ctx), row.OrganizationID, row.ID); err == nil {
		return fresh
	}
	return row
}

// afterWait is the request as a wait for its outcome left it (waitOutcome's results).
func (g *Executor) afterWait(ctx context.Context, row store.GatewayRequest, res *gatewayreq.Result, done bool,
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
// starts it identically. Started eagerly, its first workflow task comes back with the start
// call to this process's gateway worker, which then runs the first send here too.
func (g *Executor) start(ctx context.Context, row store.GatewayRequest) (client.WorkflowRun, error) {
	id := row.ID.String()
	opts := client.StartWorkflowOptions{
		ID:                       contract.GatewayRequestWorkflowID(id),
		TaskQueue:                g.taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A process that dies during the first task (the first send is out in it) is
		// noticed after this, not the default 10 s (decision 0018).
		WorkflowTaskTimeout: gatewayreq.TaskTimeout,
		EnableEagerStart:    g.eager,
		TypedSearchAttributes: contract.SearchAttrs{OrganizationID: row.OrganizationID, LocationID: row.LocationID,
			RequestKind: gatewayreq.SearchKind(row.GatewaySerial, row.Kind)}.Typed(),
		Memo: map[string]any{"gatewaySerial": row.GatewaySerial, "method": row.Method, "path": row.Path},
	}
	run, err := g.temporal.ExecuteWorkflow(ctx, opts, contract.GatewayRequestWorkflowName, row.Spec(g.policy))
	if err != nil {
		return nil, fmt.Errorf("start workflow %s: %w", opts.ID, err)
	}
	return run, nil
}

// waitOutcome waits up to wait for the request's outcome: the workflow's result, or (sooner)
// the outcome stored: handed over in this process, or announced by Postgres. done is false when it did not finish in
// time; with done, res is the workflow result, or nil when row now holds the stored outcome
// instead.
func (g *Executor) waitOutcome(ctx context.Context, run client.WorkflowRun, row *store.GatewayRequest, wait time.Duration,
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
			// The outcome is stored: answer now. The workflow's result is no longer wanted;
			// its long poll ends with wctx (cancelled on return) and its goroutine leaves the
			// result in the buffered channel, so the answer does not wait for that round trip.
			announced = nil
			if stored.row != nil {
				*row = *stored.row
				return nil, true, nil
			}
			fresh, err := g.store.GatewayRequest(ctx, row.OrganizationID, row.ID)
			if err == nil && fresh.Terminal() {
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
