package drill

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/workflows"
)

// The cluster drills run on the production shape of make run-cluster (clusterStack): the
// Temporal server as its own process on Postgres with 4 history shards, two apiservers and
// two workers behind nginx, and the dev stack's supervisor, which restarts what a drill
// kills. Clients go through nginx, the one public address.

// restartFigure reports the supervisor's restarts during the drill and checks that the
// killed child was restarted once and nothing else (reported only: a child that dies of
// the fault and comes back is not a failure as long as nothing is lost).
func restartFigure(r *result, sys *system, before map[string]int, killed string) {
	got := sys.cluster.restartsSince(before)
	r.figure("Supervisor restarts during the drill", "%s", counts(got))
	others := map[string]int{}
	for k, n := range got {
		if k != killed {
			others[k] = n
		}
	}
	if killed != "" {
		r.verify(got[killed] >= 1, "the supervisor restarted "+killed, "%d restarts", got[killed])
	}
	r.observe(len(others) == 0, "no other child died", "%s", counts(others))
}

// sweeperFigure reports whether the sweeper released anything during the drill: the
// workflows' timers should have, well inside its 60 s grace.
func sweeperFigure(r *result, sys *system, before int) {
	n := sys.cluster.stack.logCount("sweeper released lapsed holds") - before
	r.observe(n == 0, "the sweeper had nothing to release (the workflows did it)", "%d sweeps released something", n)
}

// drillClusterKillWorker: one of the two workers gets SIGKILL while gateway opens are in
// flight at slow gateways and tower holds come due; the supervisor restarts it.
func drillClusterKillWorker(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-worker", "cluster shape: kill -9 one of two workers with opens and tower flows in flight")
	r.what = fmt.Sprintf("On the cluster shape, %d locker opens are sent through nginx (`Prefer: respond-async`, an "+
		"`Idempotency-Key` each), alternating between the two gateways, each on a locker of its own; the gateways are slow "+
		"(GW-0001 `slow`, GW-0002 `controller_slow`, %s each), so the opens are in flight at the gateways. Then %d tower "+
		"flows (a reservation of %s on a tower locker of its own, and for every other flow a drop-off token of %s on it) "+
		"are made, so their timers come due just after the kill. Once every open has been sent to its gateway, worker-1 "+
		"gets SIGKILL and the supervisor restarts it. Every open is polled until terminal, the gateways' door counters are "+
		"compared with the opens, and once every hold has expired (plus 15 s) each hold's row and workflow history are checked.",
		o.ckwOpens, human(o.ckwDelay), o.ckwFlows, human(o.ckwHold), human(o.ckwHold))
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	sys := shape.system(ctx, r)
	if sys == nil {
		return r
	}
	defer shape.release()
	defer finish(r, sys)
	restartsBefore, sweepsBefore := sys.cluster.restarts(), sys.cluster.stack.logCount("sweeper released lapsed holds")
	back, err := slowGateways(ctx, sys, o.ckwDelay)
	defer back()
	if err != nil {
		r.err = err
		return r
	}
	baseline, err := sys.actuations(ctx)
	if err != nil {
		r.err = err
		return r
	}
	c := sys.cloud()
	inflight, err := submitOpens(ctx, c, sys.lockers(), o.ckwOpens)
	if err != nil {
		r.err = err
		return r
	}
	ids := inflight.ids()
	lockers, err := sys.freshTowerLockers(ctx, o.ckwFlows)
	if err != nil {
		r.err = err
		return r
	}
	tower, err := sys.tower(ctx)
	if err != nil {
		r.err = err
		return r
	}
	var cs census
	var flows flowCalls
	hold := int(o.ckwHold / time.Second)
	parallel(len(lockers), 8, func(i int) {
		flows.add(towerFlow(ctx, tower, lockers[i], hold, i%2 == 0, &cs), i%2 == 0)
	})
	sent, settledBefore, _ := sys.waitSent(ctx, ids)
	pids := map[string]int{}
	for _, n := range []string{"apiserver-1", "apiserver-2", "worker-1", "worker-2"} {
		pids[n], _ = sys.cluster.pid(n)
	}
	r.figure("In flight when worker-1 was killed", "%d opens sent to a gateway and unanswered (%d already settled); %s",
		sent, settledBefore, flows.summary())

	tKill := time.Now()
	pid, err := sys.cluster.kill("worker-1")
	if err != nil {
		r.err = err
		return r
	}
	tBack, err := sys.cluster.waitRestarted(ctx, "worker-1", pid, 90*time.Second)
	r.verify(err == nil, "the supervisor restarts worker-1 and it answers /healthz", "%v", orOK(err))
	if err == nil {
		r.figure("worker-1 healthy again", "%s after the kill", secs(tBack.Sub(tKill)))
	}

	pctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	inflight.settle(pctx, c)
	cancel()
	r.lost = inflight.lost() + flows.lost
	r.figure("Terminal states of the opens", "%s", counts(inflight.states()))
	if l := latest(inflight.settledAt()); !l.IsZero() {
		r.figure("Time to recover (kill → last open settled)", "%s (the gateways alone take %s)", secs(l.Sub(tKill)), human(o.ckwDelay))
	}
	r.verify(inflight.lost() == 0, "every open reached a terminal state (lost requests)", "%d of %d lost", inflight.lost(), len(inflight))
	r.verify(flows.lost == 0, "every tower flow was answered 201", "%d of %d not", flows.lost, flows.flows)
	of500, _ := cs.tally(true)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d did; failed exchanges: %s", of500, counts(cs.counts()))

	// Which processes ran the opens' workflows: the apiserver that accepted an open starts its
	// workflow eagerly and sends it there (LOCKERNET_API_GATEWAY_WORKER=true); a worker takes
	// one over only when that apiserver cannot go on.
	byProc := map[string]int{}
	names := map[string]string{}
	for n, p := range pids {
		names[strconv.Itoa(p)] = n
	}
	var mu sync.Mutex
	parallel(len(ids), 8, func(i int) {
		seen := taskPollers(ctx, sys, workflows.GatewayRequestWorkflowID(ids[i]))
		mu.Lock()
		defer mu.Unlock()
		for p := range seen {
			n := names[p]
			if n == "" {
				n = "another process"
			}
			byProc[n]++
		}
	})
	r.figure("Opens whose workflow tasks ran on each process", "%s", counts(byProc))

	waitPast(ctx, tKill.Add(o.ckwDelay+2*time.Second))
	if err := checkDoors(ctx, r, sys, baseline, inflight.answers(), doorsOtherThanCompleted); err != nil {
		r.err = err
		return r
	}

	waitOutboxDrained(ctx, r, sys, o.settleLimit, outboxDrains)
	if err := settleHolds(ctx, r, sys, flows.calls, tKill, tBack, "the kill", "worker-1 was"); err != nil {
		r.err = err
		return r
	}
	restartFigure(r, sys, restartsBefore, "worker-1")
	sweeperFigure(r, sys, sweepsBefore)
	r.note("In the cluster shape each apiserver runs a gateway-request worker of its own, so the workflow of an open starts " +
		"eagerly on the apiserver that accepted it and sends the open from there; the two workers run the reservation and " +
		"token workflows (their timers and expiry activities), webhooks and the gateway sync, and take a gateway request " +
		"over only when its apiserver cannot go on. The figure above counts where the opens' workflow tasks ran.")
	return r
}

// taskPollers returns the pids of the processes that ran a workflow's workflow tasks (the
// Go SDK's identity is pid@host@).
func taskPollers(ctx context.Context, sys *system, wfID string) map[string]bool {
	out := map[string]bool{}
	it := sys.tc.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return out
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
			id := ev.GetWorkflowTaskStartedEventAttributes().GetIdentity()
			if p, _, ok := strings.Cut(id, "@"); ok {
				out[p] = true
			}
		}
	}
	return out
}

// drillClusterKillAPIServer: clients wait behind nginx on slow door opens when one of the
// two apiservers gets SIGKILL; they send their call again with the same Idempotency-Key.
func drillClusterKillAPIServer(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-apiserver", "cluster shape: kill -9 one of two apiservers while clients wait behind nginx")
	r.what = fmt.Sprintf("On the cluster shape, %d clients open a locker each through nginx at once, each with an "+
		"`Idempotency-Key` of its own and `Prefer: wait=30`; the gateways are slow (GW-0001 `slow`, GW-0002 "+
		"`controller_slow`, %s each), so the clients are waiting, about half of them on each apiserver, when apiserver-1 "+
		"gets SIGKILL and the supervisor restarts it. A client whose call is cut or refused sends the same call with the "+
		"same key again every 200 ms (nginx sends it to the apiserver still up), and again after a 202, until it has the "+
		"terminal answer; afterwards every client replays its call once more and must get the identical answer, and the "+
		"gateways' door counters are compared with the opens.", o.ckaClients, human(o.ckaDelay))
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	sys := shape.system(ctx, r)
	if sys == nil {
		return r
	}
	defer shape.release()
	defer finish(r, sys)
	restartsBefore := sys.cluster.restarts()
	back, err := slowGateways(ctx, sys, o.ckaDelay)
	defer back()
	if err != nil {
		r.err = err
		return r
	}
	baseline, err := sys.actuations(ctx)
	if err != nil {
		r.err = err
		return r
	}
	c := sys.cloud()
	targets := make([]target, o.ckaClients)
	for i := range targets {
		if targets[i], err = sys.lockers().take(-1); err != nil {
			r.err = err
			return r
		}
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	defer cancel()
	clients := startWaiting(cctx, c, targets, 30, nil)
	stored := sys.waitStored(ctx, start, o.ckaClients, 20*time.Second)
	time.Sleep(time.Second)
	tKill := time.Now()
	pid, err := sys.cluster.kill("apiserver-1")
	if err != nil {
		r.err = err
		return r
	}
	tBack, restartErr := sys.cluster.waitRestarted(ctx, "apiserver-1", pid, 90*time.Second)
	outs := clients.wait()
	back()

	tl := tallyOutcomes(outs)
	var cs census
	cs.addAll(tl.failures)
	var settled []time.Duration
	for _, t := range tl.retried {
		settled = append(settled, t.Sub(tKill))
	}
	last := latest(tl.settled)
	r.lost = o.ckaClients - tl.answered
	r.figure("Clients waiting when apiserver-1 was killed", "%d (%d of their requests stored)", o.ckaClients, stored)
	r.verify(restartErr == nil, "the supervisor restarts apiserver-1 and it answers /healthz", "%v", orOK(restartErr))
	if restartErr == nil {
		r.figure("apiserver-1 healthy again", "%s after the kill", secs(tBack.Sub(tKill)))
	}
	if !last.IsZero() {
		r.figure("Time to recover (kill → last client answered)", "%s (the gateways alone take %s)", secs(last.Sub(tKill)), human(o.ckaDelay))
	}
	r.figure("What the clients saw", "%d of %d had their call cut or refused and sent it again; %d HTTP exchanges in all; "+
		"failed exchanges: %s; answers: %s", tl.hit, o.ckaClients, tl.sends, counts(cs.counts()), counts(tl.states))
	r.figure("Kill → terminal answer, clients whose call was cut", "%s", durations(settled))
	r.figure("Client time to the terminal answer", "%s", durations(tl.waits))
	r.verify(r.lost == 0, "every client got its terminal answer (lost requests)", "%d of %d without one", r.lost, o.ckaClients)
	r.verify(tl.multi == 0, "each Idempotency-Key stood for one request throughout (one X-Request-Id)", "%d keys saw more than one", tl.multi)
	storedNow, err := sys.storedSince(ctx, start)
	if err != nil {
		r.err = err
		return r
	}
	r.verify(storedNow == o.ckaClients, "one stored gateway request per client", "%d stored for %d clients", storedNow, o.ckaClients)
	of500, _ := cs.tally(true)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d did", of500)
	mismatch := replayMismatches(ctx, c, outs)
	r.verify(mismatch == 0, "a replay with the same key answers identically (status, body, X-Request-Id, Idempotent-Replayed)",
		"%d of %d differ", mismatch, tl.answered)

	time.Sleep(2 * time.Second)
	if err := checkDoors(ctx, r, sys, baseline, openAnswers(outs, targets), doorsNotCompleted); err != nil {
		r.err = err
		return r
	}
	restartFigure(r, sys, restartsBefore, "apiserver-1")
	r.note("nginx (docker/nginx.conf) never re-sends a POST to the other apiserver once it was sent: a client whose " +
		"connection to apiserver-1 was cut gets a 502 from nginx or a cut connection, and sends its call again with the " +
		"same key; the answer then comes from apiserver-2, which finds the request by its key and waits for its outcome. " +
		"An open whose send was cut with its apiserver is settled without a second send (DESIGN §6.2).")
	return r
}

// drillClusterKillTemporal: the Temporal server gets SIGKILL while tower holds are being
// made and coming due; the supervisor restarts it.
func drillClusterKillTemporal(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-temporal", "cluster shape: kill -9 the Temporal server with timers pending")
	r.what = fmt.Sprintf("On the cluster shape, for %s an open-loop load makes %.0f tower flows a second through nginx (a "+
		"reservation of %s on a tower locker of its own, and for every other flow a drop-off token of %s on it; a call "+
		"answered 503 is sent again after its Retry-After). %s into the load the Temporal server process gets SIGKILL and "+
		"the supervisor restarts it (same Postgres databases, 4 history shards). So some holds come due before the kill, "+
		"some while Temporal is down or recovering, and some are made while it is down (their workflow starts wait in the "+
		"outbox). Once every hold has expired (plus 15 s, inside the sweeper's 60 s grace) each hold's row, its workflow's "+
		"runs and its history are checked: the timer fired, late but once, and the expiry was applied once, by its workflow.",
		human(o.cktLoad), o.cktRate, human(o.cktHold), human(o.cktHold), human(o.cktKillAfter))
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	sys := shape.system(ctx, r)
	if sys == nil {
		return r
	}
	defer shape.release()
	defer finish(r, sys)
	restartsBefore, sweepsBefore := sys.cluster.restarts(), sys.cluster.stack.logCount("sweeper released lapsed holds")
	lockers, err := sys.freshTowerLockers(ctx, int(o.cktRate*o.cktLoad.Seconds())+1)
	if err != nil {
		r.err = err
		return r
	}
	tower, err := sys.tower(ctx)
	if err != nil {
		r.err = err
		return r
	}
	var cs census
	var flows flowCalls
	var tKill, tBack time.Time
	var restartErr error
	hold := int(o.cktHold / time.Second)
	lctx, lcancel := context.WithTimeout(ctx, o.cktLoad+o.settleLimit)
	defer lcancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(o.cktKillAfter)
		tKill = time.Now()
		pid, err := sys.cluster.kill("temporal")
		if err != nil {
			restartErr = err
			return
		}
		tBack, restartErr = sys.cluster.waitRestarted(lctx, "temporal", pid, 3*time.Minute)
	}()
	var next sync.Mutex
	n := 0
	loadclient.OpenLoop(lctx, o.cktRate, o.cktLoad, 0, func(ctx context.Context, _ int, _ time.Time) {
		next.Lock()
		i := n
		n++
		next.Unlock()
		if i >= len(lockers) {
			return
		}
		flows.add(towerFlow(ctx, tower, lockers[i], hold, i%2 == 0, &cs), i%2 == 0)
	})
	wg.Wait()
	r.verify(restartErr == nil, "the supervisor restarts the Temporal server and it answers", "%v", orOK(restartErr))
	if restartErr != nil {
		r.err = restartErr
		return r
	}
	r.figure("Time to recover (kill → the restarted Temporal server answers)", "%s", secs(tBack.Sub(tKill)))
	during := 0
	for _, c := range flows.calls {
		if c.ok() && c.end.After(tKill) && c.end.Before(tBack) {
			during++
		}
	}
	r.figure("Tower calls", "%s; %d holds answered 201 while Temporal was down; failed exchanges: %s",
		flows.summary(), during, counts(cs.counts()))
	r.lost = flows.lost
	r.verify(flows.lost == 0, "every tower flow was answered 201 (lost requests)", "%d of %d not", flows.lost, flows.flows)
	of500, _ := cs.tally(true)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d did", of500)
	waitOutboxDrained(ctx, r, sys, o.settleLimit, outboxDrains)

	if err := settleHolds(ctx, r, sys, flows.calls, tKill, tBack, "the kill", "Temporal was"); err != nil {
		r.err = err
		return r
	}
	restartFigure(r, sys, restartsBefore, "temporal")
	sweeperFigure(r, sys, sweepsBefore)
	return r
}

// drillClusterRestartPostgres: tower flows and gateway opens run through nginx while the
// private Postgres, which the Temporal server shares, is stopped and started again.
func drillClusterRestartPostgres(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-restart-postgres", "cluster shape: restart Postgres under load")
	r.what = fmt.Sprintf("On the cluster shape, for %s an open-loop load runs through nginx %.0f tower flows a second (a "+
		"reservation of %s on a tower locker of its own, and for every other flow a drop-off token of %s on it) and %.0f "+
		"gateway locker opens a second (each on a locker of its own, with an `Idempotency-Key` and `Prefer: wait=10`, sent "+
		"again with the same key until terminal). A call answered 503 is sent again after its Retry-After. %s into the load "+
		"the drill's own PostgreSQL cluster — the application's database and the Temporal server's two — is stopped "+
		"(`pg_ctl stop -m fast`) and started again %s later. Every failed exchange a client saw is counted by kind: the "+
		"contract is 503 with Retry-After, never 500. Once every hold has expired (plus 15 s) each hold's row, its "+
		"workflow's runs and its history are checked.",
		human(o.cpgLoad), o.cpgFlowRate, human(o.cpgHold), human(o.cpgHold), o.cpgOpenRate, human(o.cpgStopAfter), human(o.cpgDown))
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	sys := shape.system(ctx, r)
	if sys == nil {
		return r
	}
	defer shape.release()
	defer finish(r, sys)
	restartsBefore, sweepsBefore := sys.cluster.restarts(), sys.cluster.stack.logCount("sweeper released lapsed holds")
	lockers, err := sys.freshTowerLockers(ctx, int(o.cpgFlowRate*o.cpgLoad.Seconds())+1)
	if err != nil {
		r.err = err
		return r
	}
	tower, err := sys.tower(ctx)
	if err != nil {
		r.err = err
		return r
	}
	c := sys.cloud()
	baseline, err := sys.actuations(ctx)
	if err != nil {
		r.err = err
		return r
	}
	var (
		cs            census
		flows         flowCalls
		out           pgOutage
		gl            openLoad
		next          sync.Mutex
		n             int
		hold          = int(o.cpgHold / time.Second)
		lctx, lcancel = context.WithTimeout(ctx, o.cpgLoad+o.settleLimit)
		wg            sync.WaitGroup
		firstOKAfter  time.Time
	)
	defer lcancel()
	wg.Add(3)
	go func() {
		defer wg.Done()
		out = sys.restartPostgres(lctx, o.cpgStopAfter, o.cpgDown)
	}()
	go func() {
		defer wg.Done()
		loadclient.OpenLoop(lctx, o.cpgFlowRate, o.cpgLoad, 0, func(ctx context.Context, _ int, _ time.Time) {
			next.Lock()
			i := n
			n++
			next.Unlock()
			if i >= len(lockers) {
				return
			}
			flows.add(towerFlow(ctx, tower, lockers[i], hold, i%2 == 0, &cs), i%2 == 0)
		})
	}()
	go func() {
		defer wg.Done()
		gl.run(lctx, c, sys.lockers(), o.cpgOpenRate, o.cpgLoad)
	}()
	wg.Wait()
	if out.err != nil {
		r.err = out.err
		return r
	}
	if gl.err != nil {
		r.err = gl.err
		return r
	}
	tDown0, tUp0, tUp, gOuts := out.stop0, out.start0, out.up, gl.outs
	r.figure("Postgres down (stop issued → start returned)", "%s", secs(tUp.Sub(tDown0)))
	for _, call := range flows.calls {
		if call.ok() && call.end.After(tUp0) && (firstOKAfter.IsZero() || call.end.Before(firstOKAfter)) {
			firstOKAfter = call.end
		}
	}
	tl := tallyOutcomes(gOuts)
	cs.addAll(tl.failures)
	lastFailure := latest(tl.retried)
	lost, multi, retried, states := tl.lost, tl.multi, tl.hit, tl.states
	if !firstOKAfter.IsZero() {
		r.figure("Time to recover (Postgres start issued → first tower hold answered 201)", "%s", secs(firstOKAfter.Sub(tUp0)))
	}
	if !lastFailure.IsZero() {
		r.figure("Postgres start issued → last retried gateway open answered", "%s", secs(lastFailure.Sub(tUp0)))
	}
	r.figure("Tower calls", "%s", flows.summary())
	r.figure("Gateway opens", "%d sent; answers: %s; %d were sent again after a failed exchange", len(gOuts), counts(states), retried)
	r.figure("Failed exchanges clients saw (tower and gateway, every retry counted)", "%s", counts(cs.counts()))
	r.lost = lost + flows.lost
	r.verify(flows.lost == 0, "every tower flow was answered 201 (lost requests)", "%d of %d not", flows.lost, flows.flows)
	r.verify(lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", lost, len(gOuts))
	r.verify(multi == 0, "each Idempotency-Key stood for one request (one X-Request-Id)", "%d keys saw more than one", multi)
	of500, others := cs.tally(false)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d answers were 500", of500)
	r.verify(others == 0, "every refused call was answered 503 with Retry-After (no other status, no cut connection)", "%d were not", others)
	stored, err := sys.storedSince(ctx, r.started)
	if err != nil {
		r.err = err
		return r
	}
	r.verify(stored == len(gOuts), "one stored gateway request per open", "%d stored for %d opens", stored, len(gOuts))
	time.Sleep(2 * time.Second)
	if err := checkDoors(ctx, r, sys, baseline, openAnswers(gOuts, gl.targets), doorsNotCompleted); err != nil {
		r.err = err
		return r
	}
	waitOutboxDrained(ctx, r, sys, o.settleLimit, outboxDrains)

	if err := settleHolds(ctx, r, sys, flows.calls, tDown0, tUp, "the stop", "Postgres was"); err != nil {
		r.err = err
		return r
	}
	restartFigure(r, sys, restartsBefore, "")
	sweeperFigure(r, sys, sweepsBefore)
	return r
}

func orOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
