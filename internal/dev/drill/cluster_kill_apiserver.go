package drill

import (
	"context"
	"fmt"
	"time"
)

// drillClusterKillAPIServer: clients wait behind nginx on slow door opens when one of the
// two apiservers gets SIGKILL; they send their call again with the same Idempotency-Key.
func drillClusterKillAPIServer(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-apiserver", "cluster shape: kill -9 one of two apiservers while clients wait behind nginx")
	r.what = fmt.Sprintf("On the cluster shape, %d clients open a locker each through nginx at once, each with an "+
		"`Idempotency-Key` of its own and `Prefer: wait=30`; the gateways are slow (GW-0001 `slow`, GW-0002 "+
		"`controller_slow`, %s each), so the clients are waiting, about half of them on each apiserver, when apiserver-1 "+
		"gets SIGKILL and the supervisor restarts it. A client whose call is cut or refused sends the same call with the "+
		"same key again every 200 ms (nginx sends it to the apiserver still up), and again after a 202, until it has the "+
		"terminal answer; afterwards every client replays its call once more and must get the identical answer, every "+
		"open must have ended `completed`, and the gateways' door counters must show every door moved exactly once.", o.ckaClients, human(o.ckaDelay))
	cr := startCluster(ctx, r, shape, o.ckaDelay)
	if cr == nil {
		return r
	}
	defer cr.done()
	sys := cr.sys
	c := sys.cloud()
	targets := make([]target, o.ckaClients)
	var err error
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
	r.figure("Clients waiting when apiserver-1 was killed", "%d (%d of their requests stored)", o.ckaClients, stored)
	tKill, _, err := cr.killChild(ctx, "apiserver-1")
	if err != nil {
		r.err = err
		return r
	}
	outs := clients.wait()
	cr.back()

	tl := tallyOutcomes(outs)
	var cs census
	cs.addAll(tl.failures)
	var settled []time.Duration
	for _, t := range tl.retried {
		settled = append(settled, t.Sub(tKill))
	}
	last := latest(tl.settled)
	r.lost = o.ckaClients - tl.answered
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
	if err := checkOpens(ctx, r, sys, cr.baseline, openAnswers(outs, targets), doorsNotCompleted); err != nil {
		r.err = err
		return r
	}
	restartFigure(r, sys, cr.restarts, "apiserver-1")
	r.note("nginx (docker/nginx.conf) never re-sends a POST to the other apiserver once it was sent: a client whose " +
		"connection to apiserver-1 was cut gets a 502 from nginx or a cut connection, and sends its call again with the " +
		"same key; the answer then comes from apiserver-2, which finds the request by its key and waits for its outcome. " +
		"An open whose send was cut with its apiserver is sent again by the workflow with its key once the send's " +
		"heartbeat lapses, and the gateway answers with what the first send did (DESIGN §6.2): it completes, its door moved once.")
	return r
}
