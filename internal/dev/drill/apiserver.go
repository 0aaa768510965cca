package drill

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// drillRestartAPIServer: clients wait on the apiserver (Prefer: wait=30) when it is stopped
// (SIGTERM, then in a second round SIGKILL) and started again; they retry with the same
// Idempotency-Key until they get an answer. Every request must end with one answer,
// identical on replay, and no door may open twice nor a transaction be created twice.
func drillRestartAPIServer(ctx context.Context, o options) (r *result) {
	r = newResult("restart-apiserver", "restart an apiserver while clients wait")
	r.what = fmt.Sprintf("In each of two rounds, %d clients call the gateway cloud API at once, each with an `Idempotency-Key` of its own "+
		"and `Prefer: wait=30`: two in three open a locker of their own (hardware), one in three creates a transaction on "+
		"GW-0001 (write). GW-0001 is in `slow` mode and GW-0002 in `controller_slow` mode, %s each, so the clients are "+
		"waiting when the apiserver is stopped — with SIGTERM in the first round (it drains for up to 10 s, less than the "+
		"gateways' delay, then cuts the remaining connections) and SIGKILL in the second — and started again %s after it "+
		"exited. A client that gets an error or no answer sends the same call with the same key again every 200 ms, and "+
		"sends it again after a 202, until it gets the terminal answer. Afterwards every client replays its call once more "+
		"and must get the identical answer; the gateways' door counters and transactions are compared with the calls: "+
		"every open must end `completed` with its door moved exactly once.",
		o.apiClients, human(o.apiDelay), human(o.apiDown))
	r.settings = append(r.settings, "`LOCKERNET_GATEWAY_CALL_TIMEOUT=30s` (default 10 s): a transaction create on the slow gateway is answered "+
		"after "+human(o.apiDelay)+" instead of ending `gateway_unresponsive`, so every create has a result to replay.")
	sys := start(ctx, r, o, map[string]string{"LOCKERNET_GATEWAY_CALL_TIMEOUT": "30s"})
	if sys == nil {
		return r
	}
	defer sys.done(r)
	d := &apiDrill{o: o, r: r, sys: sys, c: sys.cloud(), gw1: sim{sys.gws[0]}, gw2: sim{sys.gws[1]}, pool: newLockerPool(sys)}
	runPhases(ctx, r,
		phase{"read the doors", d.readBaseline},
		phase{"SIGTERM round", d.round("SIGTERM")},
		phase{"SIGKILL round", d.round("SIGKILL")},
		phase{"check the doors", d.checkDoors},
	)
	return r
}

// apiDrill is what one phase of the restart-apiserver drill leaves for the next.
type apiDrill struct {
	o        options
	r        *result
	sys      *system
	c        *cloud
	gw1, gw2 sim
	pool     *lockerPool

	baseline                  doors.Actuations
	allOpens                  []openAnswer
	totalClients, totalStored int
	recoveries                []string
}

// apiRound is one round of the drill: the apiserver stopped with signal while its clients
// wait on the slow gateways.
type apiRound struct {
	signal     string
	txBefore   []string // GW-0001's transactions before the round
	targets    []target // each client's locker; none for a create
	start      time.Time
	stored     int // requests stored when the apiserver was stopped
	tStop      time.Time
	tExit      time.Time
	tReady     time.Time
	outs       []clientOutcome
	restartErr error
}

// isCreate: one client in three creates a transaction, the others open a locker.
func (apiRound) isCreate(i int) bool { return i%3 == 2 }

// setSlow puts GW-0001 in slow mode and GW-0002 in controller_slow mode (slow), or both
// back to none.
func (d *apiDrill) setSlow(ctx context.Context, slow bool) error {
	delayMs := int(d.o.apiDelay / time.Millisecond)
	m1, m2 := "none", "none"
	if slow {
		m1, m2 = "slow", "controller_slow"
	}
	if err := d.gw1.setFaults(ctx, m1, delayMs); err != nil {
		return err
	}
	return d.gw2.setFaults(ctx, m2, delayMs)
}

func (d *apiDrill) readBaseline(ctx context.Context) error {
	var err error
	d.baseline, err = d.sys.actuations(ctx)
	return err
}

// round is the phase of one round: the clients start, the apiserver is stopped with signal
// and started again, and what the clients got is checked.
func (d *apiDrill) round(signal string) func(context.Context) error {
	return func(ctx context.Context) error {
		rd := &apiRound{signal: signal}
		if err := d.prepareRound(ctx, rd); err != nil {
			return err
		}
		d.stopWhileWaiting(ctx, rd)
		if rd.restartErr != nil {
			d.r.verify(false, signal+": the apiserver starts again", "%v", rd.restartErr)
			d.r.lost += d.o.apiClients
			return errCheckFailed
		}
		// Every client has its answer: the gateways may be quick again for the checks.
		if err := d.setSlow(ctx, false); err != nil {
			return err
		}
		if err := d.checkClients(ctx, rd); err != nil {
			return err
		}
		if err := d.checkTransactions(ctx, rd); err != nil {
			return err
		}
		for i, out := range rd.outs {
			if !rd.isCreate(i) {
				d.allOpens = append(d.allOpens, openAnswer{t: rd.targets[i], answered: out.done, state: out.final.state, body: out.final.body})
			}
		}
		return nil
	}
}

// prepareRound reads GW-0001's transactions, slows the gateways and takes a locker for each
// client that opens one.
func (d *apiDrill) prepareRound(ctx context.Context, rd *apiRound) error {
	var err error
	if rd.txBefore, err = d.gw1.transactions(ctx); err != nil {
		return err
	}
	if err := d.setSlow(ctx, true); err != nil {
		return err
	}
	rd.targets = make([]target, d.o.apiClients)
	for i := range rd.targets {
		if !rd.isCreate(i) {
			if rd.targets[i], err = d.pool.take(-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopWhileWaiting starts the clients, stops the apiserver once every call is stored and
// waiting on the slow gateways, starts it again and waits for every client's answer.
func (d *apiDrill) stopWhileWaiting(ctx context.Context, rd *apiRound) {
	o, sys := d.o, d.sys
	rd.start = time.Now()
	cctx, cancel := context.WithTimeout(ctx, o.settleLimit)
	defer cancel()
	clients := startWaiting(cctx, d.c, rd.targets, 30, func(i int) (string, []byte, bool) {
		return fmt.Sprintf("/locations/%d/transactions", sys.gws[0].locationID), []byte(`{}`), rd.isCreate(i)
	})
	rd.stored = sys.waitStored(ctx, rd.start, o.apiClients, 20*time.Second)
	time.Sleep(time.Second)
	rd.tStop = time.Now()
	if rd.signal == "SIGTERM" {
		sys.api.stop(30 * time.Second)
	} else {
		sys.api.kill()
	}
	rd.tExit = time.Now()
	time.Sleep(o.apiDown)
	rd.restartErr = sys.api.start(ctx, 90*time.Second)
	rd.tReady = time.Now()
	rd.outs = clients.wait()
}

// checkClients reports what the clients got and checks each got one terminal answer, one
// request per key and an identical replay.
func (d *apiDrill) checkClients(ctx context.Context, rd *apiRound) error {
	r, o, round := d.r, d.o, rd.signal
	tStop, tExit, tReady := rd.tStop, rd.tExit, rd.tReady
	tl := tallyOutcomes(rd.outs)
	answered, errs, sends, multi, hit, states, settled, waits := tl.answered, tl.errors, tl.sends, tl.multi, tl.hit, tl.states, tl.settled, tl.waits
	lost := o.apiClients - answered
	r.lost += lost
	d.totalClients += o.apiClients
	storedNow, err := d.sys.storedSince(ctx, rd.start)
	if err != nil {
		return err
	}
	d.totalStored += storedNow
	r.figure(round+": clients waiting when the apiserver stopped", "%d (%d of their requests stored)", o.apiClients, rd.stored)
	r.figure(round+": apiserver exit", "%s after the signal", secs(tExit.Sub(tStop)))
	if round == "SIGTERM" && tExit.Sub(tStop) >= 9*time.Second {
		r.note("On SIGTERM the apiserver took %s to exit: its handlers waiting on `Prefer: wait` are not told that the "+
			"server is stopping, so they hold the shutdown for the whole 10 s drain and their connections are then cut without an "+
			"answer. Nothing is lost — each client sent its call again with the same key and got the request's outcome from the "+
			"new process — but answering those waiters 202 with `Location` as soon as the drain begins would let them move on "+
			"at once and the process exit sooner.", secs(tExit.Sub(tStop)))
	}
	r.figure(round+": apiserver healthy again", "%s after the signal", secs(tReady.Sub(tStop)))
	if l := latest(settled); !l.IsZero() {
		r.figure(round+": signal → last client answered", "%s (the gateways alone take %s)", secs(l.Sub(tStop)), human(o.apiDelay))
		d.recoveries = append(d.recoveries, fmt.Sprintf("%s: serving again after %s, last client answered after %s", round,
			secs(tReady.Sub(tStop)), secs(l.Sub(tStop))))
	}
	r.figure(round+": what the clients saw", "%d of %d clients had their call cut or refused and sent it again; %d HTTP exchanges "+
		"in all, %d of them failed (mostly refused connections, retried every 200 ms); answers: %s",
		hit, o.apiClients, sends, errs, counts(states))
	r.figure(round+": client time to the terminal answer", "%s", durations(waits))
	r.verify(lost == 0, round+": every client got its terminal answer", "%d of %d without one", lost, o.apiClients)
	r.verify(multi == 0, round+": each Idempotency-Key stood for one request throughout (one X-Request-Id)", "%d keys saw more than one", multi)
	r.verify(storedNow == o.apiClients, round+": one stored gateway request per client", "%d stored for %d clients", storedNow, o.apiClients)

	// Replay each call once more: the identical answer, marked as a replay.
	mismatch := replayMismatches(ctx, d.c, rd.outs)
	r.verify(mismatch == 0, round+": a replay with the same key answers identically (status, body, X-Request-Id, Idempotent-Replayed)",
		"%d of %d differ", mismatch, answered)
	return nil
}

// checkTransactions checks GW-0001's transactions against the creates: one per create
// answered 201, none twice.
func (d *apiDrill) checkTransactions(ctx context.Context, rd *apiRound) error {
	r, round := d.r, rd.signal
	txAfter, err := d.gw1.transactions(ctx)
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, t := range rd.txBefore {
		had[t] = true
	}
	created := map[string]bool{}
	for _, t := range txAfter {
		if !had[t] {
			created[t] = true
		}
	}
	creates, completed201, missing := 0, 0, 0
	for i, out := range rd.outs {
		if !rd.isCreate(i) {
			continue
		}
		creates++
		if out.done && out.final.state == "completed" && out.final.status == http.StatusCreated {
			completed201++
			if !created[out.final.requestID] {
				missing++
			}
		}
	}
	extra := len(created) - completed201 + missing
	r.figure(round+": transactions created at the gateway", "%d for %d creates (%d answered 201)", len(created), creates, completed201)
	r.verify(extra == 0, round+": no create assigned a second locker (gateway transactions = creates answered 201)", "%d extra", extra)
	r.verify(missing == 0, round+": every create answered 201 exists at the gateway", "%d missing", missing)
	return nil
}

// checkDoors checks the opens of both rounds against the doors.
func (d *apiDrill) checkDoors(ctx context.Context) error {
	time.Sleep(2 * time.Second)
	w := doorsNotCompleted
	w.figure = "Door actuations (both rounds)"
	if err := checkOpens(ctx, d.r, d.sys, d.baseline, d.allOpens, w); err != nil {
		return err
	}
	d.r.figure("Requests stored", "%d for %d clients", d.totalStored, d.totalClients)
	d.r.figure("Time to recover (from the signal)", "%s", strings.Join(d.recoveries, "; "))
	return nil
}

// replayMismatches sends every answered call once more with its Idempotency-Key and counts
// the replays that differ from the client's terminal answer (status, body, X-Request-Id)
// or are not marked Idempotent-Replayed.
func replayMismatches(ctx context.Context, c *cloud, outs []clientOutcome) int {
	mismatch := 0
	var mu sync.Mutex
	parallel(len(outs), 16, func(i int) {
		out := outs[i]
		if !out.done {
			return
		}
		a, err := c.do(ctx, out.method, out.path, out.body, map[string]string{"Idempotency-Key": out.key, "Prefer": "wait=0"})
		if err != nil || a.status != out.final.status || !bytes.Equal(a.body, out.final.body) || a.requestID != out.final.requestID || !a.replayed {
			mu.Lock()
			mismatch++
			mu.Unlock()
			if err == nil {
				logf("  replay of %s differs: HTTP %d %q vs HTTP %d %q", out.key, a.status, loadclient.Excerpt(a.body), out.final.status, loadclient.Excerpt(out.final.body))
			}
		}
	})
	return mismatch
}
