package drill

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// clusterStopper stops the supervised children of the cluster shape; the supervisor starts
// them again.
type clusterStopper struct {
	c    *clusterStack
	mu   sync.Mutex
	pids map[string]int // the pid each round signalled
}

func (s *clusterStopper) signal(rd stopRound) (func() bool, error) {
	pid, err := s.c.pid(rd.proc)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, rd.sig); err != nil {
		return nil, fmt.Errorf("signal %s (pid %d): %w", rd.proc, pid, err)
	}
	logf("  %s sent to pid %d", rd.label(), pid)
	s.mu.Lock()
	s.pids[rd.proc] = pid
	s.mu.Unlock()
	return func() bool { return syscall.Kill(pid, 0) != nil }, nil
}

func (s *clusterStopper) back(ctx context.Context, rd stopRound) error {
	s.mu.Lock()
	old := s.pids[rd.proc]
	s.mu.Unlock()
	limit := 90 * time.Second
	if rd.proc == "temporal" {
		limit = 3 * time.Minute
	}
	_, err := s.c.waitRestarted(ctx, rd.proc, old, limit)
	return err
}

// unknownFate is the log line of a send that a gateway request's workflow found begun with its
// fate unknown (activities.SendGatewayRequest), which says whether the gateway honours keys.
const unknownFate = "gateway send begun before with unknown fate"

// forgetKeysHonoured clears every gateway's recorded honours_idempotency_keys and keeps it
// cleared, as it is before any gateway sync or answer has recorded it, until the returned
// func is called; a send whose fate is unknown meanwhile is decided on what the gateway
// itself says (its /health). The func reports what was cleared and how the sends were decided.
func forgetKeysHonoured(ctx context.Context, sys *system) func() string {
	clear := func() int64 {
		tag, err := sys.st.Pool().Exec(ctx, `UPDATE gateways SET honours_idempotency_keys = false WHERE honours_idempotency_keys`)
		if err != nil {
			logf("  clear gateways.honours_idempotency_keys: %v", err)
			return 0
		}
		return tag.RowsAffected()
	}
	log := sys.cluster.stack
	unknown0, honoured0 := log.logLines(unknownFate), log.logLines(unknownFate, "keysHonoured=true")
	first := clear()
	cctx, cancel := context.WithCancel(ctx)
	var again atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-cctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			again.Add(clear())
		}
	}()
	return func() string {
		cancel()
		<-done
		return fmt.Sprintf("`gateways.honours_idempotency_keys` cleared just before the signal (%d of 2 gateways had it recorded) "+
			"and kept cleared until the round's opens settled (found recorded again and cleared %d times); sends found "+
			"begun with their fate unknown: %d, decided with keysHonoured=true: %d", first, again.Load(),
			log.logLines(unknownFate)-unknown0, log.logLines(unknownFate, "keysHonoured=true")-honoured0)
	}
}

// drillClusterStopEach: on the cluster shape, each process in turn — both apiservers, both
// workers, the Temporal server, each gateway — is stopped with keyed opens in flight, and the
// supervisor restarts it; every request's outcome must agree with its door. The first kill
// comes right after the shape's start, with the gateways' recorded honours flag cleared.
func drillClusterStopEach(ctx context.Context, o options, shape *clusterShape) (r *result) {
	r = newResult("cluster-stop-each", "cluster shape: stop or kill each process with keyed opens in flight")
	r.what = fmt.Sprintf("On a freshly started cluster shape, each process in turn is stopped while a batch of %d locker "+
		"opens is in flight: apiserver-1 with SIGKILL, apiserver-2 with SIGTERM, worker-1 with SIGKILL, worker-2 with "+
		"SIGTERM, the Temporal server with SIGKILL, then gw-0001 and gw-0002 each with SIGTERM, then with SIGKILL. The first kill comes "+
		"right after the shape's start, with no wait for the gateway sync: just before it every gateway's recorded "+
		"`honours_idempotency_keys` is cleared in Postgres, and kept cleared until that round's opens have settled, so "+
		"that a send the kill cut is decided on what the gateway itself says (its `/health`) — as after a crash in the "+
		"first seconds after a start. %s", o.cseOpens, stopEachWhat(o.cseDelay, "The drill waits until the process has "+
		"exited and the supervisor has started it again and it answers its health check"))
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	if shape.sys != nil {
		// The first kill is to come right after a start: not on a system other drills used.
		logf("  starting a fresh cluster shape for this drill")
		shape.close()
	}
	sys := shape.system(ctx, r)
	if sys == nil {
		return r
	}
	tUp := time.Now()
	cr := &clusterRun{r: r, sys: sys, shape: shape, restarts: sys.cluster.restarts(),
		sweeps: sys.cluster.stack.logCount(sweeperReleased), back: func() {
			for _, g := range sys.gws {
				_ = sim{g}.setFaults(context.WithoutCancel(ctx), "none", 0)
			}
		}}
	defer cr.done()
	e, err := newStopEach(ctx, r, sys, &clusterStopper{c: sys.cluster, pids: map[string]int{}}, o.cseOpens, o.cseDelay,
		o.settleLimit, []string{sys.cluster.stack.logPath})
	if err != nil {
		r.err = err
		return r
	}
	rounds := []stopRound{
		{proc: "apiserver-1", sig: syscall.SIGKILL, gw: -1, before: func() func() string {
			r.figure("First signal", "%s after the cluster shape was up", secs(time.Since(tUp)))
			return forgetKeysHonoured(ctx, sys)
		}},
		{proc: "apiserver-2", sig: syscall.SIGTERM, gw: -1},
		{proc: "worker-1", sig: syscall.SIGKILL, gw: -1},
		{proc: "worker-2", sig: syscall.SIGTERM, gw: -1},
		{proc: "temporal", sig: syscall.SIGKILL, gw: -1},
		{proc: "gw-0001", sig: syscall.SIGTERM, gw: 0},
		{proc: "gw-0001", sig: syscall.SIGKILL, gw: 0},
		{proc: "gw-0002", sig: syscall.SIGTERM, gw: 1},
		{proc: "gw-0002", sig: syscall.SIGKILL, gw: 1},
	}
	stopped := map[string]bool{}
	for _, rd := range rounds {
		stopped[rd.proc] = true
		if err := e.round(ctx, rd); err != nil {
			r.err = err
			return r
		}
	}
	if err := e.check(ctx); err != nil {
		r.err = err
		return r
	}
	got := sys.cluster.restartsSince(cr.restarts)
	r.figure("Supervisor restarts during the drill", "%s", counts(got))
	var missing, others []string
	for name := range stopped {
		if got[name] == 0 {
			missing = append(missing, name)
		}
	}
	for name, n := range got {
		if !stopped[name] {
			others = append(others, fmt.Sprintf("%s %d", name, n))
		}
	}
	sort.Strings(missing)
	sort.Strings(others)
	r.verify(len(missing) == 0, "the supervisor restarted every process the drill stopped", "not restarted: %s", noneIfEmpty(missing))
	r.observe(len(others) == 0, "no other child died", "restarted besides: %s", noneIfEmpty(others))
	return r
}

func noneIfEmpty(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
