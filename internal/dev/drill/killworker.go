package drill

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
)

// drillKillWorker: door opens in flight at the gateways, the worker is killed with SIGKILL,
// a new worker starts, and every request must reach its terminal state with no door
// opened twice.
func drillKillWorker(ctx context.Context, o options) (r *result) {
	r = newResult("kill-worker", "kill -9 a worker with hardware opens in flight")
	r.what = fmt.Sprintf("%d locker opens are sent through the gateway cloud API (`Prefer: respond-async`, an `Idempotency-Key` each), "+
		"alternating between the two gateways, every one on a locker of its own. Both simulated gateways are slow: GW-0001 in "+
		"`slow` mode (each local-API request waits %s before it is handled), GW-0002 in `controller_slow` mode (each door open "+
		"waits %s at the lock controller), so the opens are genuinely in flight at the gateways, sent by their workflows' send "+
		"activities on the worker. Once every one of them has been sent to its gateway, the worker process gets SIGKILL. While no worker "+
		"runs, %d more opens are accepted; %s after the kill a new worker starts. Every request is then polled "+
		"(`GET /requests/{id}`, `Prefer: wait=20`) until it is terminal, each open's call is sent once more with its key (a "+
		"client's retry) and must answer the same outcome, and the simulators' `/sim/stats` door counters are "+
		"compared with the opens sent, per locker, once nothing sent before the kill can still be on its way.",
		o.kwOpens, human(o.kwDelay), human(o.kwDelay), o.kwDuring, human(o.kwRestartAfter))
	sys := start(ctx, r, o, nil)
	if sys == nil {
		return r
	}
	defer sys.done(r)
	d := &killWorkerDrill{o: o, r: r, sys: sys, c: sys.cloud()}
	runPhases(ctx, r,
		phase{"slow the gateways", d.slowGateways},
		phase{"send the opens", d.sendOpens},
		phase{"kill the worker", d.killWorker},
		phase{"settle the requests", d.settle},
		phase{"check the stored outcomes", d.checkStored},
		phase{"check the doors", d.checkDoors},
	)
	return r
}

// killWorkerDrill is what one phase of the kill-worker drill leaves for the next.
type killWorkerDrill struct {
	o   options
	r   *result
	sys *system
	c   *cloud

	baseline doors.Actuations
	pool     *lockerPool
	inflight opens    // the opens in flight at the kill
	ids      []string // their request ids
	during   opens    // the opens accepted while no worker ran
	tKill    time.Time
	tStart   time.Time // the new worker started
}

// slowGateways makes both gateways slow (once they honour keys), zeroes their stats and
// reads the doors.
func (d *killWorkerDrill) slowGateways(ctx context.Context) error {
	sys := d.sys
	waitKeysHonoured(ctx, d.r, sys)
	gw1, gw2 := sim{sys.gws[0]}, sim{sys.gws[1]}
	for _, step := range []func() error{
		func() error { _, err := slowGateways(ctx, sys, d.o.kwDelay); return err },
		func() error { return gw1.resetStats(ctx) },
		func() error { return gw2.resetStats(ctx) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	var err error
	if d.baseline, err = sys.actuations(ctx); err != nil {
		return err
	}
	d.pool = newLockerPool(sys)
	return nil
}

// sendOpens sends the opens that will be in flight and waits until the worker has sent every
// one of them to its gateway.
func (d *killWorkerDrill) sendOpens(ctx context.Context) error {
	r := d.r
	sendStart := time.Now()
	var err error
	if d.inflight, err = submitOpens(ctx, d.c, d.pool, d.o.kwOpens); err != nil {
		return err
	}
	d.ids = d.inflight.ids()
	r.figure("Opens sent", "%d accepted in %s (%d never accepted)", len(d.ids), secs(time.Since(sendStart)), len(d.inflight)-len(d.ids))

	sent, settledBefore, all := d.sys.waitSent(ctx, d.ids)
	if !all {
		r.note("Not every open had been sent to its gateway a minute after submission; the worker was killed anyway.")
	}
	st1, _ := sim{d.sys.gws[0]}.stats(ctx)
	st2, _ := sim{d.sys.gws[1]}.stats(ctx)
	r.figure("In flight when the worker was killed", "%d sent to a gateway and unanswered, %d already settled "+
		"(local-API requests the gateways had received: GW-0001 %d, GW-0002 %d)", sent, settledBefore, st1.Requests, st2.Requests)
	return nil
}

// killWorker kills the worker, accepts more opens while none runs and starts a new one.
func (d *killWorkerDrill) killWorker(ctx context.Context) error {
	r, sys := d.r, d.sys
	d.tKill = time.Now()
	sys.worker.kill()
	logf("  worker killed")
	var err error
	if d.during, err = submitOpens(ctx, d.c, d.pool, d.o.kwDuring); err != nil {
		return err
	}
	if !waitPast(ctx, d.tKill.Add(d.o.kwRestartAfter)) {
		return ctx.Err()
	}
	d.tStart = time.Now()
	if err := sys.worker.start(ctx, 90*time.Second); err != nil {
		r.verify(false, "a new worker starts", "%v", err)
		r.lost = len(d.inflight) + len(d.during)
		return errCheckFailed
	}
	tReady := time.Now()
	r.figure("New worker healthy", "%s after the kill (started %s after it)", secs(tReady.Sub(d.tKill)), secs(d.tStart.Sub(d.tKill)))
	return nil
}

// settle polls every request to its terminal state and checks that each reached one.
func (d *killWorkerDrill) settle(ctx context.Context) error {
	r, o, inflight, during := d.r, d.o, d.inflight, d.during
	pctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	var wg sync.WaitGroup
	for _, batch := range []opens{inflight, during} {
		wg.Go(func() { batch.settle(pctx, d.c) })
	}
	wg.Wait()
	cancel()

	lost := inflight.lost()
	states := inflight.states()
	settledAt := inflight.settledAt()
	r.lost = lost + during.lost()
	r.figure("Terminal states of the opens in flight", "%s", counts(states))
	if last := latest(settledAt); !last.IsZero() {
		r.figure("Time to recover (kill → last request settled)", "%s", secs(last.Sub(d.tKill)))
		r.figure("New worker started → last request settled", "%s", secs(last.Sub(d.tStart)))
	}
	r.verify(lost == 0, "every open in flight reached a terminal state (lost requests)", "%d of %d lost", lost, len(inflight))
	if len(during) > 0 {
		dStates := during.states()
		if l := latest(during.settledAt()); !l.IsZero() {
			r.figure("Opens accepted while no worker ran", "%d: %s; last settled %s after the new worker started (the gateways take %s per open)",
				len(during), counts(dStates), secs(l.Sub(d.tStart)), human(o.kwDelay))
		}
		r.verify(during.lost() == 0, "every open accepted while no worker ran reached a terminal state", "%d of %d lost", during.lost(), len(during))
		r.verify(dStates["completed"] == len(during), "every open accepted while no worker ran was sent by the new worker and completed",
			"%d of %d", dStates["completed"], len(during))
	}
	return nil
}

// checkStored checks that every request's outcome is stored in Postgres and that a client's
// retry with its key answers the same outcome.
func (d *killWorkerDrill) checkStored(ctx context.Context) error {
	r := d.r
	rows, err := d.sys.requestRows(ctx, append(d.ids, d.during.ids()...))
	if err != nil {
		return err
	}
	var stored []time.Time
	notStored := 0
	for _, id := range d.ids {
		if row, ok := rows[id]; ok && row.completed != nil {
			stored = append(stored, *row.completed)
		} else {
			notStored++
		}
	}
	if l := latest(stored); !l.IsZero() {
		r.figure("Kill → last outcome stored in Postgres", "%s", secs(l.Sub(d.tKill)))
	}
	r.verify(notStored == 0, "every request's outcome is stored in Postgres", "%d without a stored outcome", notStored)
	checkReplays(ctx, r, d.c, append(append(opens{}, d.inflight...), d.during...))
	return nil
}

// checkDoors counts the door actuations once nothing sent before the kill can still be on
// its way at a gateway.
func (d *killWorkerDrill) checkDoors(ctx context.Context) error {
	r, sys := d.r, d.sys
	time.Sleep(time.Until(d.tKill.Add(d.o.kwDelay + 2*time.Second)))
	w := doorsOtherThanCompleted
	w.duplicates = "no door opened more than once per open request, none opened unasked (/sim/stats)"
	if err := checkOpens(ctx, r, sys, d.baseline, append(d.inflight.answers(), d.during.answers()...), w); err != nil {
		return err
	}
	r.verify(sys.worker.running(), "the new worker keeps running", "worker starts: %d", sys.worker.runs)
	r.note("The gateways honour `Idempotency-Key` and the cloud sends each request's id as its key (DESIGN §6.2): an " +
		"open whose send was cut by the kill is sent again, and the gateway answers with what the first send did — it " +
		"carries a keyed open through even when its caller hung up — so the open ends `completed` and its door moved once. " +
		"A gateway that does not honour keys keeps the old rule: such an open ends `gateway_unresponsive` (504) without a second send.")
	return nil
}

func (b opens) ids() []string {
	var ids []string
	for _, q := range b {
		if q.id != "" {
			ids = append(ids, q.id)
		}
	}
	return ids
}

// settle polls every accepted open until it is terminal or ctx ends.
func (b opens) settle(ctx context.Context, c *cloud) {
	parallel(len(b), max(len(b), 1), func(i int) {
		q := b[i]
		if q.id == "" {
			return
		}
		a, err := c.settle(ctx, q.id, 20)
		if err != nil {
			logf("  %v", err)
			return
		}
		q.final = a
	})
}

// lost counts opens never accepted or never terminal.
func (b opens) lost() int {
	n := 0
	for _, q := range b {
		if !q.final.terminal() {
			n++
		}
	}
	return n
}

func (b opens) states() map[string]int {
	m := map[string]int{}
	for _, q := range b {
		if q.final.terminal() {
			m[q.final.state]++
		}
	}
	return m
}

func (b opens) settledAt() []time.Time {
	var ts []time.Time
	for _, q := range b {
		if q.final.terminal() {
			ts = append(ts, q.final.at)
		}
	}
	return ts
}

func (b opens) answers() []openAnswer {
	out := make([]openAnswer, len(b))
	for i, q := range b {
		out[i] = openAnswer{t: q.t, answered: q.final.terminal(), state: q.final.state, body: q.final.body}
	}
	return out
}

// cloud returns a gateway cloud API client with the demo key.
func (s *system) cloud() *cloud {
	return &cloud{base: "http://" + s.apiAddr + "/api/customer/v1", key: s.creds.GatewayAPIKey}
}
