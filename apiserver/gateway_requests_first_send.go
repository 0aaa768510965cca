package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// The gateway cloud API's fast path (docs/decisions/0009-first-send-in-line.md): a proxied
// call that will wait for its answer is stored with its first send already begun and leased
// to this apiserver (one commit), and this apiserver sends it to the gateway itself, at
// once, without starting a workflow first. When the gateway's answer settles the request
// (nearly always), the outcome is stored (a second commit) and handed to the waiting
// handler; the request never needed its workflow. When it does not (not delivered, not
// answered, a read answered 5xx, a create's assignment conflict), the workflow is started
// with what the first send came to and does the rest, under the same rules as ever. While
// the call is in flight this apiserver renews the lease; if it stops, the lease lapses and
// the reconciler (or a poll that finds it so) starts the workflow, which finds the first
// send begun with unknown fate: the crash rules of DESIGN §6.2 apply (a hardware call is
// never sent again).

// firstSends makes first sends in this process and keeps their leases.
type firstSends struct {
	// sender sends and settles (the apiserver's own gateway worker's activities); nil turns
	// the fast path off, and every request is sent by its workflow.
	sender *activities.Activities
	lease  time.Duration
	log    log.Logger

	mu       sync.Mutex
	inflight map[uuid.UUID]struct{}
	wg       sync.WaitGroup
}

// DefaultFirstSendLease is how long an apiserver owns a first send it makes without renewing
// it; it renews every third of that.
const DefaultFirstSendLease = 10 * time.Second

func newFirstSends(sender *activities.Activities, lease time.Duration, logger *slog.Logger) *firstSends {
	if lease <= 0 {
		lease = DefaultFirstSendLease
	}
	return &firstSends{sender: sender, lease: lease, log: log.NewStructuredLogger(logger), inflight: map[uuid.UUID]struct{}{}}
}

// on says whether this apiserver makes first sends itself.
func (f *firstSends) on() bool { return f != nil && f.sender != nil }

func (f *firstSends) begin(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight[id] = struct{}{}
	f.wg.Add(1)
}

func (f *firstSends) end(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inflight, id)
	f.wg.Done()
}

// retryFor bounds how long a first send's owner keeps trying to store its outcome or start
// the workflow (Postgres or Temporal briefly away) before it lets the lease lapse.
const retryFor = 30 * time.Second

// retry runs fn until it succeeds, with a backoff from 100 ms to 500 ms (short: the owner
// should store its known outcome before anyone takes a lapsed lease over), for up to retryFor.
func (f *firstSends) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(retryFor)
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// renew pushes the leases of the first sends in flight forward.
func (f *firstSends) renew(ctx context.Context, st *store.Store) error {
	f.mu.Lock()
	ids := make([]uuid.UUID, 0, len(f.inflight))
	for id := range f.inflight {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	return st.RenewGatewayLeases(ctx, ids, f.lease)
}

// FirstSendRenewEvery is how often the first sends' leases are renewed: every third of
// their length (internal/maintenance runs RenewFirstSendLeases at this interval).
func (s *Server) FirstSendRenewEvery() time.Duration { return s.requests.first.lease / 3 }

// RenewFirstSendLeases pushes the leases of the first sends in flight in this apiserver
// forward (one pass of its loop); nothing when it makes none.
func (s *Server) RenewFirstSendLeases(ctx context.Context) error {
	if !s.requests.first.on() {
		return nil
	}
	if err := s.requests.first.renew(ctx, s.requests.store); err != nil {
		return fmt.Errorf("renew the leases of first sends in flight: %w", err)
	}
	return nil
}

// FinishFirstSends waits up to timeout for the first sends still in flight (renewing their
// leases meanwhile), so a stopping apiserver settles the calls it made; what is left when
// it returns is taken over once its lease lapses.
func (s *Server) FinishFirstSends(timeout time.Duration) {
	f := s.requests.first
	if !f.on() {
		return
	}
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t := time.NewTicker(s.FirstSendRenewEvery())
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			s.logger.Warn("stopping with first sends still in flight; their workflows take them over once the leases lapse")
			return
		case <-t.C:
			if err := s.RenewFirstSendLeases(ctx); err != nil {
				s.logger.Warn("while stopping", "err", err)
			}
		}
	}
}

// sendFirst makes the first send of a request just stored with its lease (created by this
// handler), and waits up to wait for the request's outcome: stored here from the first
// send, or, when the workflow took over, its result. The send goes on when the wait ends
// first (the client left, the wait ran out, the server drains): the request is carried
// out once stored, and a poll finds its outcome.
func (g *gatewayRequests) sendFirst(ctx context.Context, row store.GatewayRequest, gw store.Gateway, wait time.Duration) (store.GatewayRequest, error) {
	stored, stop := g.outcomes.wait(row.ID)
	defer stop()
	handed := make(chan client.WorkflowRun, 1)
	g.first.begin(row.ID)
	go g.runFirstSend(context.WithoutCancel(ctx), row, gw, handed)

	began := time.Now()
	defer markTiming(ctx, "wait", began)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-stored.done:
		if stored.row != nil {
			return *stored.row, nil
		}
	case run := <-handed:
		if run != nil {
			res, done, err := g.waitOutcome(ctx, run, &row, time.Until(began.Add(wait)), stored)
			return g.afterWait(ctx, row, res, done, err)
		}
	case <-timer.C:
	case <-g.draining:
	case <-ctx.Done():
	}
	return g.current(ctx, row), nil
}

// runFirstSend sends the request to gw and settles it from the answer, or starts its
// workflow to carry on (handing the run to the waiting handler, or nil when it could not be
// started: the lease then lapses and the reconciler starts it).
func (g *gatewayRequests) runFirstSend(ctx context.Context, row store.GatewayRequest, gw store.Gateway, handed chan<- client.WorkflowRun) {
	defer g.first.end(row.ID)
	spec := row.Spec(g.policy)
	res, err := g.first.sender.SendFirst(ctx, g.first.log, gw, activities.SendGatewayRequestInput{
		RequestID: spec.RequestID, Send: 1, Method: spec.Method, Path: spec.Path, Body: spec.Body,
		Timeout: spec.Policy.WithDefaults().Timeout(spec.Class),
	})
	if err == nil {
		if fin, ok := workflows.SettleFirstSend(spec, res); ok {
			// Postgres may be briefly away (a restart): the outcome is known here only, so keep
			// trying (the lease is renewed meanwhile) before handing it to the workflow.
			var out activities.FinishGatewayRequestResult
			ferr := g.first.retry(ctx, func() error {
				var err error
				out, err = g.first.sender.Finish(ctx, g.first.log, fin)
				return err
			})
			if ferr == nil {
				g.outcomes.handOff(row.WithResult(out.Result))
				return
			}
			g.logger.WarnContext(ctx, "store a first send's outcome; its workflow stores it", "requestId", row.ID, "err", ferr)
		}
		spec.FirstSend = &res
	} else {
		g.logger.WarnContext(ctx, "first send of a gateway request; its workflow settles it", "requestId", row.ID, "err", err)
	}
	var run client.WorkflowRun
	err = g.first.retry(ctx, func() error {
		var err error
		run, err = g.startSpec(ctx, row, spec)
		return err
	})
	if err != nil {
		g.logger.WarnContext(ctx, "start the workflow of a gateway request after its first send; it is started once its lease lapses",
			"requestId", row.ID, "err", err)
		handed <- nil
		return
	}
	handed <- run
}

// awaitOwner waits, up to wait, for a request whose first send another handler (here or on
// another apiserver) is making under its lease: for the outcome, announced here or by
// Postgres. owned is false when the owner no longer carries it (its lease lapsed, or it
// handed the request to its workflow): the caller then starts the workflow, or meets it.
func (g *gatewayRequests) awaitOwner(ctx context.Context, row store.GatewayRequest, wait time.Duration,
	stored *outcomeWaiter) (out store.GatewayRequest, owned bool, err error) {
	deadline := time.Now().Add(wait)
	announced := stored.done
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return row, true, nil
		}
		// A little past the lease, so the owner's last renewal has landed.
		check := min(time.Until(*row.LeaseUntil)+100*time.Millisecond, remaining)
		timer := time.NewTimer(max(check, 10*time.Millisecond))
		select {
		case <-g.draining:
			timer.Stop()
			return g.current(ctx, row), true, nil
		case <-ctx.Done():
			timer.Stop()
			return row, true, ctx.Err()
		case <-announced:
			timer.Stop()
			announced = nil
			if stored.row != nil {
				return *stored.row, true, nil
			}
		case <-timer.C:
		}
		fresh, ferr := g.store.GatewayRequest(ctx, row.OrganizationID, row.ID)
		if ferr != nil {
			return row, true, nil
		}
		row = fresh
		switch {
		case row.Terminal():
			return row, true, nil
		case row.LeaseUntil == nil, !time.Now().Before(*row.LeaseUntil):
			return row, false, nil
		}
	}
}

// current is the request as stored now, or as last known when it cannot be read.
func (g *gatewayRequests) current(ctx context.Context, row store.GatewayRequest) store.GatewayRequest {
	if fresh, err := g.store.GatewayRequest(context.WithoutCancel(ctx), row.OrganizationID, row.ID); err == nil {
		return fresh
	}
	return row
}
