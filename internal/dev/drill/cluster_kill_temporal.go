package drill

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// drillClusterKillTemporal: the Temporal server gets SIGKILL while door opens are in flight
// at slow gateways and tower holds are being made and coming due; the supervisor restarts
// it. Only the cluster shape runs the Temporal server as a process of its own: make run's
// shape embeds it in the dev stack's process (and a drill's make run system in the drill's),
// so killing it there is killing the whole system, which no drill pretends to do.
func drillClusterKillTemporal(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-temporal", "cluster shape: kill -9 the Temporal server with opens in flight and timers pending")
	r.what = fmt.Sprintf("On the cluster shape, for %s an open-loop load makes %.0f tower flows a second through nginx (a "+
		"reservation of %s on a tower locker of its own, and for every other flow a drop-off token of %s on it; a call "+
		"answered 503 is sent again after its Retry-After). %s into the load the Temporal server process gets SIGKILL and "+
		"the supervisor restarts it (same Postgres databases, 4 history shards). So some holds come due before the kill, "+
		"some while Temporal is down or recovering, and some are made while it is down (their workflow starts wait in the "+
		"outbox). Once every hold has expired (plus 15 s, inside the sweeper's 60 s grace) each hold's row, its workflow's "+
		"runs and its history are checked: the timer fired, late but once, and the expiry was applied once, by its workflow. "+
		"Just before the kill, %d locker opens are sent through nginx (`Prefer: respond-async`, an `Idempotency-Key` each), "+
		"alternating between the two gateways, each on a locker of its own; the gateways are slow (GW-0001 `slow`, GW-0002 "+
		"`controller_slow`, %s each), and the kill comes once every open has been sent to its gateway, so they are in flight "+
		"at the gateways when Temporal dies. Every open is polled until terminal and must end `completed`, its call sent once "+
		"more with its key must answer the same outcome, and the gateways' door counters must show every door moved exactly once.",
		human(o.cktLoad), o.cktRate, human(o.cktHold), human(o.cktHold), human(o.cktKillAfter), o.cktOpens, human(o.cktDelay))
	cr := startCluster(ctx, r, shape, o.cktDelay)
	if cr == nil {
		return r
	}
	defer cr.done()
	sys := cr.sys
	c := sys.cloud()
	load, err := newTowerLoad(ctx, sys, int(o.cktRate*o.cktLoad.Seconds())+1, o.cktHold)
	if err != nil {
		r.err = err
		return r
	}
	var tKill, tBack time.Time
	var restartErr, opensErr error
	var inflight opens
	var sent, settledBefore int
	lctx, lcancel := context.WithTimeout(ctx, o.cktLoad+o.settleLimit)
	defer lcancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(o.cktKillAfter)
		inflight, opensErr = submitOpens(lctx, c, sys.lockers(), o.cktOpens)
		if opensErr != nil {
			return
		}
		sent, settledBefore, _ = sys.waitSent(lctx, inflight.ids())
		tKill = time.Now()
		pid, err := sys.cluster.kill("temporal")
		if err != nil {
			restartErr = err
			return
		}
		tBack, restartErr = sys.cluster.waitRestarted(lctx, "temporal", pid, 3*time.Minute)
	}()
	load.openLoop(lctx, o.cktRate, o.cktLoad)
	wg.Wait()
	if opensErr != nil {
		r.err = opensErr
		return r
	}
	r.figure("In flight when the Temporal server was killed", "%d opens sent to a gateway and unanswered (%d already settled, %d never accepted)",
		sent, settledBefore, len(inflight)-len(inflight.ids()))
	r.verify(restartErr == nil, "the supervisor restarts the Temporal server and it answers", "%v", orOK(restartErr))
	if restartErr != nil {
		r.err = restartErr
		return r
	}
	r.figure("Time to recover (kill → the restarted Temporal server answers)", "%s", secs(tBack.Sub(tKill)))
	during := 0
	for _, c := range load.flows.calls {
		if c.ok() && c.end.After(tKill) && c.end.Before(tBack) {
			during++
		}
	}
	r.figure("Tower calls", "%s; %d holds answered 201 while Temporal was down; failed exchanges: %s",
		load.flows.summary(), during, counts(load.cs.counts()))
	r.lost = load.flows.lost
	r.verify(load.flows.lost == 0, "every tower flow was answered 201", "%d of %d not", load.flows.lost, load.flows.flows)
	of500, _ := load.cs.tally(true)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d did", of500)

	pctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	inflight.settle(pctx, c)
	cancel()
	cr.back()
	r.lost += inflight.lost()
	r.figure("Terminal states of the opens", "%s", counts(inflight.states()))
	if l := latest(inflight.settledAt()); !l.IsZero() {
		r.figure("Kill → last open settled", "%s (the gateways alone take %s)", secs(l.Sub(tKill)), human(o.cktDelay))
	}
	r.verify(inflight.lost() == 0, "every open reached a terminal state (lost requests)", "%d of %d lost", inflight.lost(), len(inflight))
	checkReplays(ctx, r, c, inflight)
	waitPast(ctx, tKill.Add(o.cktDelay+2*time.Second))
	if err := checkOpens(ctx, r, sys, cr.baseline, inflight.answers(), doorsOtherThanCompleted); err != nil {
		r.err = err
		return r
	}
	if err := cr.checkHolds(ctx, o.settleLimit, load.flows.calls, tKill, tBack, "the kill", "Temporal was", "temporal"); err != nil {
		r.err = err
		return r
	}
	r.note("Only the cluster shape runs the Temporal server as a process of its own. In make run's shape it is embedded " +
		"in the dev stack's process (internal/dev/devstack, internal/dev/devtemporal), and in a drill's make run system in " +
		"the drill's own process: killing it there kills the whole dev system, so no make run drill kills Temporal alone.")
	return r
}
