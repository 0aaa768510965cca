package drill

import (
	enumspb "go.temporal.io/api/enums/v1"

	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/workflows/contract"
)

// drillClusterKillWorker: one of the two workers gets SIGKILL while gateway opens are in
// flight at slow gateways and tower holds come due; the supervisor restarts it.
func drillClusterKillWorker(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-kill-worker", "cluster shape: kill -9 one of two workers with opens and tower flows in flight")
	r.what = fmt.Sprintf("On the cluster shape, %d locker opens are sent through nginx (`Prefer: respond-async`, an "+
		"`Idempotency-Key` each), alternating between the two gateways, each on a locker of its own; the gateways are slow "+
		"(GW-0001 `slow`, GW-0002 `controller_slow`, %s each), so the opens are in flight at the gateways. Then %d tower "+
		"flows (a reservation of %s on a tower locker of its own, and for every other flow a drop-off token of %s on it) "+
		"are made, so their timers come due just after the kill. Once every open has been sent to its gateway, worker-1 "+
		"gets SIGKILL and the supervisor restarts it. Every open is polled until terminal and must end `completed`, its "+
		"call sent once more with its key must answer the same outcome, the gateways' door counters must show every door "+
		"moved exactly once, and once every hold has expired (plus 15 s) each hold's row and workflow history are checked.",
		o.ckwOpens, human(o.ckwDelay), o.ckwFlows, human(o.ckwHold), human(o.ckwHold))
	cr := startCluster(ctx, r, shape, o.ckwDelay)
	if cr == nil {
		return r
	}
	defer cr.done()
	sys := cr.sys
	c := sys.cloud()
	inflight, err := submitOpens(ctx, c, sys.lockers(), o.ckwOpens)
	if err != nil {
		r.err = err
		return r
	}
	ids := inflight.ids()
	load, err := newTowerLoad(ctx, sys, o.ckwFlows, o.ckwHold)
	if err != nil {
		r.err = err
		return r
	}
	parallel(len(load.lockers), 8, func(i int) { load.flow(ctx, i) })
	sent, settledBefore, _ := sys.waitSent(ctx, ids)
	pids := map[string]int{}
	for _, n := range []string{"apiserver-1", "apiserver-2", "worker-1", "worker-2"} {
		pids[n], _ = sys.cluster.pid(n)
	}
	r.figure("In flight when worker-1 was killed", "%d opens sent to a gateway and unanswered (%d already settled); %s",
		sent, settledBefore, load.flows.summary())

	tKill, tBack, err := cr.killChild(ctx, "worker-1")
	if err != nil {
		r.err = err
		return r
	}

	pctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	inflight.settle(pctx, c)
	cancel()
	r.lost = inflight.lost() + load.flows.lost
	r.figure("Terminal states of the opens", "%s", counts(inflight.states()))
	if l := latest(inflight.settledAt()); !l.IsZero() {
		r.figure("Time to recover (kill → last open settled)", "%s (the gateways alone take %s)", secs(l.Sub(tKill)), human(o.ckwDelay))
	}
	r.verify(inflight.lost() == 0, "every open reached a terminal state (lost requests)", "%d of %d lost", inflight.lost(), len(inflight))
	r.verify(load.flows.lost == 0, "every tower flow was answered 201", "%d of %d not", load.flows.lost, load.flows.flows)
	of500, _ := load.cs.tally(true)
	r.verify(of500 == 0, "no client saw an HTTP 500", "%d did; failed exchanges: %s", of500, counts(load.cs.counts()))

	// Which processes ran the opens' workflows: the apiserver that accepted an open starts
	// its workflow eagerly and runs its first task and send there
	// (LOCKERNET_API_GATEWAY_WORKER=true, decision 0012); a worker takes one over only when
	// that apiserver cannot go on.
	byProc := map[string]int{}
	names := map[string]string{}
	for n, p := range pids {
		names[strconv.Itoa(p)] = n
	}
	var mu sync.Mutex
	parallel(len(ids), 8, func(i int) {
		seen := taskPollers(ctx, sys, contract.GatewayRequestWorkflowID(ids[i]))
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			byProc["none (no workflow task found)"]++
		}
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
	checkReplays(ctx, r, c, inflight)
	if err := checkOpens(ctx, r, sys, cr.baseline, inflight.answers(), doorsOtherThanCompleted); err != nil {
		r.err = err
		return r
	}
	if err := cr.checkHolds(ctx, o.settleLimit, load.flows.calls, tKill, tBack, "the kill", "worker-1 was", "worker-1"); err != nil {
		r.err = err
		return r
	}
	r.note("In the cluster shape each apiserver runs a gateway-request worker of its own: the apiserver that accepted an " +
		"open sends it to the gateway itself, and starts its workflow (eagerly, there) only when that send did not settle it; " +
		"the two workers run the reservation and token workflows (their timers and expiry activities), webhooks and the " +
		"gateway sync, and take a gateway request over only when its apiserver cannot go on. The figure above counts where " +
		"the opens' workflow tasks ran, and the opens that needed none.")
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
