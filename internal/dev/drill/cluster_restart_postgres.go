package drill

import (
	"context"
	"fmt"
	"sync"
	"time"
)

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
	cr := startCluster(ctx, r, shape, 0)
	if cr == nil {
		return r
	}
	defer cr.done()
	sys := cr.sys
	load, err := newTowerLoad(ctx, sys, int(o.cpgFlowRate*o.cpgLoad.Seconds())+1, o.cpgHold)
	if err != nil {
		r.err = err
		return r
	}
	c := sys.cloud()
	var (
		out           pgOutage
		gl            openLoad
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
		load.openLoop(lctx, o.cpgFlowRate, o.cpgLoad)
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
	for _, call := range load.flows.calls {
		if call.ok() && call.end.After(tUp0) && (firstOKAfter.IsZero() || call.end.Before(firstOKAfter)) {
			firstOKAfter = call.end
		}
	}
	tl := tallyOutcomes(gOuts)
	load.cs.addAll(tl.failures)
	lastFailure := latest(tl.retried)
	lost, multi, retried, states := tl.lost, tl.multi, tl.hit, tl.states
	if !firstOKAfter.IsZero() {
		r.figure("Time to recover (Postgres start issued → first tower hold answered 201)", "%s", secs(firstOKAfter.Sub(tUp0)))
	}
	if !lastFailure.IsZero() {
		r.figure("Postgres start issued → last retried gateway open answered", "%s", secs(lastFailure.Sub(tUp0)))
	}
	r.figure("Tower calls", "%s", load.flows.summary())
	r.figure("Gateway opens", "%d sent; answers: %s; %d were sent again after a failed exchange", len(gOuts), counts(states), retried)
	r.figure("Failed exchanges clients saw (tower and gateway, every retry counted)", "%s", counts(load.cs.counts()))
	r.lost = lost + load.flows.lost
	r.verify(load.flows.lost == 0, "every tower flow was answered 201 (lost requests)", "%d of %d not", load.flows.lost, load.flows.flows)
	r.verify(lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", lost, len(gOuts))
	r.verify(multi == 0, "each Idempotency-Key stood for one request (one X-Request-Id)", "%d keys saw more than one", multi)
	of500, others := load.cs.tally(false)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d answers were 500", of500)
	r.verify(others == 0, "every refused call was answered 503 with Retry-After (no other status, no cut connection)", "%d were not", others)
	stored, err := sys.storedSince(ctx, r.started)
	if err != nil {
		r.err = err
		return r
	}
	r.verify(stored == len(gOuts), "one stored gateway request per open", "%d stored for %d opens", stored, len(gOuts))
	time.Sleep(2 * time.Second)
	if err := checkDoors(ctx, r, sys, cr.baseline, openAnswers(gOuts, gl.targets), doorsNotCompleted); err != nil {
		r.err = err
		return r
	}
	if err := cr.checkHolds(ctx, o.settleLimit, load.flows.calls, tDown0, tUp, "the stop", "Postgres was", ""); err != nil {
		r.err = err
		return r
	}
	return r
}
