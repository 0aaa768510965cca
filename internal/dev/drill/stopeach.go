package drill

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
)

// The stop-each drills (stop-each on make run's shape, cluster-stop-each on the cluster
// shape) stop or kill every process of the stack in turn, the gateways included, each time
// with a batch of keyed opens in flight at slow lock controllers, and then hold every
// request's reported outcome against its door (doors.Disagreement): completed ⇒ the door
// moved exactly once; rejected or dispatch_failed ⇒ it did not move; gateway_unresponsive ⇒
// at most once, and only with details.outcome "unknown" (DESIGN §6.2).

// stopRound is one round of a stop-each drill: one process stopped with one signal while a
// batch of opens is in flight.
type stopRound struct {
	proc string         // the process, as its shape names it (apiserver, worker-1, GW-0001, gw-0001, temporal)
	sig  syscall.Signal // SIGTERM (a graceful stop) or SIGKILL
	gw   int            // the gateway stopped (index in system.gws), or -1: a process of the cloud
	// before, when set, runs just before the signal; what it returns runs once the round's
	// opens have settled, and says what the round's figure adds.
	before func() (after func() string)
}

func (rd stopRound) label() string {
	if rd.sig == syscall.SIGTERM {
		return rd.proc + " SIGTERM"
	}
	return rd.proc + " SIGKILL"
}

// stopShape is how a shape stops one of its processes and has it back.
type stopShape interface {
	// signal sends sig to the round's process; gone then reports whether that process has
	// exited.
	signal(rd stopRound) (gone func() bool, err error)
	// back returns once the process runs again (a new one) and answers its health check.
	back(ctx context.Context, rd stopRound) error
}

// stoppedRound is a round as it went.
type stoppedRound struct {
	stopRound
	batch         opens
	sent, settled int             // at the signal: sent to a gateway and unanswered; settled already
	out           map[string]bool // the requests sent (or settled) just before the signal
	tSig          time.Time
	tGone, tBack  time.Time
}

// stopEach runs the rounds of a stop-each drill on one system and checks them.
type stopEach struct {
	r           *result
	sys         *system
	shape       stopShape
	c           *cloud
	pool        *lockerPool
	n           int           // opens per round
	delay       time.Duration // how long a lock controller takes for each open
	settleLimit time.Duration
	logs        []string // the files holding the gateways' logs
	ledger      *doors.Ledger
	rounds      []*stoppedRound
}

// newStopEach puts every gateway's lock controllers in controller_slow mode (each open takes
// delay) and reads the doors' counts the drill starts from.
func newStopEach(ctx context.Context, r *result, sys *system, shape stopShape, n int, delay, settleLimit time.Duration,
	logs []string) (*stopEach, error) {
	for _, g := range sys.gws {
		if err := slowController(ctx, g, delay); err != nil {
			return nil, err
		}
	}
	baseline, err := sys.actuations(ctx)
	if err != nil {
		return nil, err
	}
	return &stopEach{r: r, sys: sys, shape: shape, c: sys.cloud(), pool: sys.lockers(), n: n, delay: delay,
		settleLimit: settleLimit, logs: logs, ledger: doors.NewLedger(baseline)}, nil
}

// slowController puts a gateway's lock controllers in controller_slow mode: each door open
// waits d at the controller before the lock is pulsed, so an open is in flight at the gateway
// for that long.
func slowController(ctx context.Context, g *gatewayProc, d time.Duration) error {
	return sim{g}.setFaults(ctx, "controller_slow", int(d/time.Millisecond))
}

// round sends a batch of opens (all on the gateway the round stops, else on both in turn),
// waits until they have been sent and the gateways have received them, stops the round's
// process, has it back, and polls every open to its terminal state.
func (e *stopEach) round(ctx context.Context, rd stopRound) error {
	logf("  round %s", rd.label())
	targets := make([]target, e.n)
	received := map[*gatewayProc]int64{}
	for i := range targets {
		t, err := e.pool.take(rd.gw)
		if err != nil {
			return err
		}
		targets[i] = t
		received[t.gw] = 0
	}
	for g := range received {
		st, err := sim{g}.stats(ctx)
		if err != nil {
			return err
		}
		received[g] = st.Requests
	}
	sr := &stoppedRound{stopRound: rd, batch: sendOpens(ctx, e.c, targets)}
	e.rounds = append(e.rounds, sr)
	// Not until every one is out, as the kill drills wait: right after a start, or a worker's
	// restart, one request's first workflow task has been seen to wait longer than the
	// controllers' delay before a worker ran it, and the rest of the batch would be done by
	// then. The signal waits for the rest a third of that delay at most after the first send.
	ids := sr.batch.ids()
	var firstOut time.Time
	waitFor(ctx, 30*time.Second, 50*time.Millisecond, func() bool {
		sent, settled, err := e.sys.sentCounts(ctx, ids)
		if err != nil {
			return false
		}
		sr.sent, sr.settled = sent, settled
		if sent+settled > 0 && firstOut.IsZero() {
			firstOut = time.Now()
		}
		return sent+settled >= len(ids) || (!firstOut.IsZero() && time.Since(firstOut) >= e.delay/3)
	})
	out, err := e.sys.sentIDs(ctx, ids)
	if err != nil {
		return err
	}
	sr.out = out
	// Sent is recorded before the call goes out: wait until the gateways have had those sent
	// (their request counters count the cloud's health checks besides, hence the pause after),
	// so that the signal finds the opens at the lock controllers.
	expect := map[*gatewayProc]int{}
	for _, q := range sr.batch {
		if out[q.id] {
			expect[q.t.gw]++
		}
	}
	waitFor(ctx, e.delay/3, 50*time.Millisecond, func() bool {
		for g, n := range expect {
			st, err := sim{g}.stats(ctx)
			if err != nil || st.Requests < received[g]+int64(n) {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond)
	var after func() string
	if rd.before != nil {
		after = rd.before()
	}
	sr.tSig = time.Now()
	if err := e.stop(ctx, rd); err != nil {
		return err
	}
	sr.tGone = time.Now()
	if err := e.shape.back(ctx, rd); err != nil {
		e.r.verify(false, rd.label()+": "+rd.proc+" runs again and answers its health check", "%v", err)
		return err
	}
	sr.tBack = time.Now()
	if rd.gw >= 0 {
		// A new gateway process starts with its controllers quick.
		if err := slowController(ctx, e.sys.gws[rd.gw], e.delay); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, e.settleLimit)
	sr.batch.settle(pctx, e.c)
	cancel()
	note := ""
	if after != nil {
		note = "; " + after()
	}
	last := "not every open settled"
	if l := latest(sr.batch.settledAt()); !l.IsZero() {
		last = "the last open settled " + secs(l.Sub(sr.tSig)) + " after the signal"
	}
	at := "at both gateways"
	if rd.gw >= 0 {
		at = "at " + e.sys.gws[rd.gw].serial
	}
	e.r.figure("Round "+rd.label(), "%d opens %s (at the signal %d sent and unanswered, %d not sent yet, %d settled): %s; "+
		"the process exited %s after the signal and answered again %s after it; %s%s",
		len(sr.batch), at, sr.sent, len(sr.batch)-sr.sent-sr.settled, sr.settled, counts(sr.batch.states()),
		secs(sr.tGone.Sub(sr.tSig)), secs(sr.tBack.Sub(sr.tSig)), last, note)
	return nil
}

// stop stops the round's process and returns once it has exited. A simulated gateway counts
// its doors in its own memory, so for a gateway it keeps the last counts of the process in
// the ledger: read just before a SIGKILL, and every 20 ms during a SIGTERM for as long as
// that process is there (a read counts only if the process was still there after it).
func (e *stopEach) stop(ctx context.Context, rd stopRound) error {
	var g *gatewayProc
	var last map[int]int
	read := func() (map[int]int, bool) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		st, err := sim{g}.stats(rctx)
		if err != nil {
			return nil, false
		}
		m, err := lockerCounts(g, st)
		return m, err == nil
	}
	if rd.gw >= 0 {
		g = e.sys.gws[rd.gw]
		var ok bool
		if last, ok = read(); !ok {
			return fmt.Errorf("read %s's door counters before the signal", g.serial)
		}
	}
	gone, err := e.shape.signal(rd)
	if err != nil {
		return err
	}
	const limit = 2 * time.Minute
	if _, ok := waitFor(ctx, limit, 20*time.Millisecond, func() bool {
		if g != nil && rd.sig != syscall.SIGKILL {
			if m, ok := read(); ok && !gone() {
				last = m
			}
		}
		return gone()
	}); !ok {
		return fmt.Errorf("%s did not exit within %s of the signal", rd.proc, limit)
	}
	if g != nil {
		e.ledger.Ended(g.serial, last)
	}
	return nil
}

// check holds every request's final poll against its door, once nothing sent can still be on
// its way to one, and checks what each round's stop must not change: after a cloud process
// was stopped every open completed, and after a gateway was stopped gracefully every open
// that had been sent to it.
func (e *stopEach) check(ctx context.Context) error {
	if len(e.rounds) == 0 {
		return nil
	}
	if !waitPast(ctx, e.rounds[len(e.rounds)-1].tSig.Add(e.delay+2*time.Second)) {
		return ctx.Err()
	}
	var all opens
	for _, sr := range e.rounds {
		all = append(all, sr.batch...)
	}
	moved, fromLog, err := e.movedDoors(ctx, all)
	if err != nil {
		return err
	}
	e.checkOutcomes(all, moved, fromLog)
	e.checkRounds(moved)
	checkReplays(ctx, e.r, e.c, all)
	return nil
}

// movedDoors is how often each door moved since the drill began, by the simulators' counters
// and, for the opens of all, by the gateways' logs where those count more (fromLog: the
// actuations counted from a log only).
func (e *stopEach) movedDoors(ctx context.Context, all opens) (moved doors.Actuations, fromLog int, err error) {
	now, err := e.sys.actuations(ctx)
	if err != nil {
		return nil, 0, err
	}
	moved = e.ledger.Moved(now)
	// A gateway that stopped after its last read of the counters still wrote a "door opened"
	// line for each door it moved: its log is the account of those.
	logged := map[int]int{}
	for _, path := range e.logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, fmt.Errorf("open a gateway's log: %w", err)
		}
		m, err := doors.Logged(f)
		f.Close()
		if err != nil {
			return nil, 0, err
		}
		for id, n := range m {
			logged[id] += n
		}
	}
	for _, q := range all {
		serial, id := q.t.gw.serial, q.t.locker
		if n := logged[id]; n > moved[serial][id] {
			fromLog += n - moved[serial][id]
			if moved[serial] == nil {
				moved[serial] = map[int]int{}
			}
			moved[serial][id] = n
		}
	}
	return moved, fromLog, nil
}

// checkOutcomes holds every open's reported outcome against its door and reports the doors
// and the recovery of each round.
func (e *stopEach) checkOutcomes(all opens, moved doors.Actuations, fromLog int) {
	states, reasons := map[string]int{}, map[string]int{}
	lost, disagree, once, still, twice := 0, 0, 0, 0, 0
	list := make([]doors.Open, len(all))
	for i, q := range all {
		n := moved[q.t.gw.serial][q.t.locker]
		list[i] = doors.Open{Gateway: q.t.gw.serial, Locker: q.t.locker}
		switch {
		case n == 0:
			still++
		case n == 1:
			once++
		default:
			twice++
		}
		if !q.final.terminal() {
			lost++
			continue
		}
		states[q.final.state]++
		if why := doors.Disagreement(doors.ReportedOf(q.final.state, q.final.status, q.final.body), n); why != "" {
			disagree++
			reasons[why]++
			logf("  disagreement: request %s (%s locker %d): %s; body %s", q.id, q.t.gw.serial, q.t.locker, why, oneLine(string(q.final.body)))
		}
	}
	acc := doors.Count(moved, doors.Actuations{}, list)
	unasked := acc.Duplicates
	for _, q := range list {
		if n := moved[q.Gateway][q.Locker]; n > 1 {
			unasked -= n - 1
		}
	}
	e.r.lost = lost
	e.r.duplicates = acc.Duplicates
	e.r.figure("Requests", "%d opens in %d rounds: %s", len(all), len(e.rounds), counts(states))
	e.r.figure("Disagreements (reported outcome against the door)", "%d%s", disagree, paren(counts(reasons), disagree > 0))
	e.r.figure("Doors moved twice", "%d", twice)
	e.r.figure("Doors", "%d moved once, %d did not move, %d moved more than once; %d doors nobody asked for moved; "+
		"%d actuations counted from a gateway's log only (its process ended before the simulator's counters were read after them)",
		once, still, twice, unasked, fromLog)
	var recovery, byRound []string
	for _, sr := range e.rounds {
		if l := latest(sr.batch.settledAt()); !l.IsZero() {
			recovery = append(recovery, sr.label()+" "+secs(l.Sub(sr.tSig)))
		}
		byRound = append(byRound, sr.label()+": "+counts(doorCounts(sr.batch, moved)))
	}
	e.r.figure("Doors by round", "%s", strings.Join(byRound, "; "))
	e.r.figure("Time to recover (signal → last open of the round settled)", "%s", strings.Join(recovery, "; "))

	e.r.verify(lost == 0, "every open reached a terminal state (lost requests)", "%d of %d lost", lost, len(all))
	e.r.verify(disagree == 0, "every request's reported outcome agrees with its door: completed ⇒ moved exactly once; "+
		"rejected, dispatch_failed ⇒ did not move; gateway_unresponsive ⇒ at most once, with details.outcome unknown",
		"%d disagree%s", disagree, paren(counts(reasons), disagree > 0))
	e.r.verify(twice == 0 && unasked == 0, "no door moved twice, and none that no open asked for (/sim/stats)",
		"%d moved twice, %d unasked moved", twice, unasked)
}

// checkRounds checks each round by what its process promises: a cloud process's opens all
// complete; a gateway stopped gracefully completes the opens it had; a gateway killed is
// reported.
func (e *stopEach) checkRounds(moved doors.Actuations) {
	for _, sr := range e.rounds {
		switch {
		case sr.gw < 0:
			done := sr.batch.states()["completed"]
			e.r.verify(done == len(sr.batch), sr.label()+": every open completed (a send cut by the stop was sent again with its key)",
				"%d of %d", done, len(sr.batch))
		case sr.sig == syscall.SIGKILL:
			e.r.note("%s: %s; their doors: %s. A gateway killed mid-open answers nothing, and a hardware call delivered "+
				"without an answer is not sent again (DESIGN §6.2): the cloud cannot know whether the door moved.",
				sr.label(), counts(sr.batch.states()), counts(doorCounts(sr.batch, moved)))
		default:
			// Only the opens already out: one that reaches a stopping gateway is refused, not
			// carried out, and goes out again within the dispatch budget.
			inFlight := opens{}
			for _, q := range sr.batch {
				if sr.out[q.id] {
					inFlight = append(inFlight, q)
				}
			}
			done := inFlight.states()["completed"]
			e.r.verify(done == len(inFlight), sr.label()+": every open sent before the signal completed (a gateway's graceful "+
				"stop lets the requests in flight finish and answer, DESIGN §7)", "%d of %d", done, len(inFlight))
			if done < len(inFlight) {
				e.r.note("%s: of the %d opens sent to the gateway before the signal, %d did not complete (%s; their doors: %s). "+
					"The gateway exited %s after the signal, while each open waits %s at its lock controller: its stop did not "+
					"let the requests in flight finish, which DESIGN §7 asks of a graceful stop.", sr.label(), len(inFlight),
					len(inFlight)-done, counts(inFlight.states()), counts(doorCounts(inFlight, moved)), secs(sr.tGone.Sub(sr.tSig)), human(e.delay))
			}
		}
	}
}

// doorCounts counts the doors of b by how often they moved.
func doorCounts(b opens, moved doors.Actuations) map[string]int {
	out := map[string]int{}
	for _, q := range b {
		switch n := moved[q.t.gw.serial][q.t.locker]; n {
		case 0:
			out["did not move"]++
		case 1:
			out["moved once"]++
		default:
			out["moved more than once"]++
		}
	}
	return out
}

func paren(s string, on bool) string {
	if !on {
		return ""
	}
	return " (" + s + ")"
}

// runStopper stops the processes of a make run system, and starts them again itself.
type runStopper struct{ sys *system }

func (s runStopper) proc(rd stopRound) *proc {
	switch {
	case rd.gw >= 0:
		return s.sys.gws[rd.gw].proc
	case rd.proc == "worker":
		return s.sys.worker
	}
	return s.sys.api
}

func (s runStopper) signal(rd stopRound) (func() bool, error) {
	p := s.proc(rd)
	if err := p.send(rd.sig); err != nil {
		return nil, err
	}
	logf("  %s sent to %s", rd.label(), p.name)
	return func() bool { return !p.running() }, nil
}

func (s runStopper) back(ctx context.Context, rd stopRound) error {
	return s.proc(rd).start(ctx, 90*time.Second)
}

// drillStopEach: on make run's shape, each process in turn — the apiserver, the worker, each
// gateway — is stopped with keyed opens in flight and started again; every request's outcome
// must agree with its door.
func drillStopEach(ctx context.Context, o options) (r *result) {
	r = newResult("stop-each", "stop or kill each process with keyed opens in flight")
	r.what = fmt.Sprintf("On make run's shape (a system of the drill's own: one apiserver, one worker, two simulated "+
		"gateways), each process in turn is stopped while a batch of %d locker opens is in flight: the apiserver with "+
		"SIGTERM, then with SIGKILL; then the worker, GW-0001 and GW-0002 likewise. %s", o.seOpens, stopEachWhat(o.seDelay, "The drill waits until the process has exited and starts it again"))
	sys := start(ctx, r, o, nil)
	if sys == nil {
		return r
	}
	defer sys.done(r)
	var logs []string
	for _, g := range sys.gws {
		logs = append(logs, g.logPath)
	}
	e, err := newStopEach(ctx, r, sys, runStopper{sys}, o.seOpens, o.seDelay, o.settleLimit, logs)
	if err != nil {
		r.err = err
		return r
	}
	for _, rd := range []stopRound{
		{proc: "apiserver", sig: syscall.SIGTERM, gw: -1},
		{proc: "apiserver", sig: syscall.SIGKILL, gw: -1},
		{proc: "worker", sig: syscall.SIGTERM, gw: -1},
		{proc: "worker", sig: syscall.SIGKILL, gw: -1},
		{proc: "GW-0001", sig: syscall.SIGTERM, gw: 0},
		{proc: "GW-0001", sig: syscall.SIGKILL, gw: 0},
		{proc: "GW-0002", sig: syscall.SIGTERM, gw: 1},
		{proc: "GW-0002", sig: syscall.SIGKILL, gw: 1},
	} {
		if err := e.round(ctx, rd); err != nil {
			r.err = err
			return r
		}
	}
	if err := e.check(ctx); err != nil {
		r.err = err
	}
	return r
}

// stopEachWhat is what both stop-each drills do with each round, for their reports; how
// names how the stopped process comes back.
func stopEachWhat(delay time.Duration, how string) string {
	return fmt.Sprintf("Both gateways' lock controllers are in `controller_slow` mode (each door open waits %s at the "+
		"controller). Each batch is sent through the gateway cloud API (`Prefer: respond-async`, an `Idempotency-Key` "+
		"each, every open on a locker of its own: all on the gateway to be stopped, else on both in turn), and the signal "+
		"comes once every open has been sent and the gateways have received them (once the first is out, the drill waits "+
		"at most a third of the controllers' delay for the rest, then half a second). %s, then polls every open to its "+
		"terminal state (`GET /requests/{id}`, `Prefer: wait=20`). Afterwards each request's final poll — its HTTP "+
		"status, `X-Request-State` and the error body's `details.outcome` — is held against its door's actuations as "+
		"the simulators count them (`/sim/stats`): `completed` ⇒ the door moved exactly once; `rejected` or "+
		"`dispatch_failed` ⇒ it did not move; `gateway_unresponsive` ⇒ at most once, and only with `details.outcome` "+
		"`unknown` (and each state with its own status: 502, 503, 504). A simulated gateway counts its doors in its "+
		"own memory, so a stopped gateway's last counts are read just before a SIGKILL and every 20 ms during a SIGTERM "+
		"until its process has gone; a door that moved after that last read counts from the gateway's `door opened` "+
		"log line. Besides, every open of a round that stopped a cloud process must have completed, and so must every "+
		"open sent to a gateway before it was stopped gracefully; and a retry of each open with its key must answer the "+
		"same outcome.", human(delay), how)
}
