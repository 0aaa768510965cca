package drill

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// drillRestartAPIServer: clients wait on the apiserver (Prefer: wait=30) when it is stopped
// (SIGTERM, then in a second round SIGKILL) and started again; they retry with the same
// Idempotency-Key until they get an answer. Every request must end with one answer,
// identical on replay, and no door may open twice nor a transaction be created twice.
func drillRestartAPIServer(ctx context.Context, o options) (r *result) {
	r = newResult("restart-apiserver", "restart an apiserver while clients wait")
	delayMs := int(o.apiDelay / time.Millisecond)
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
	c := sys.cloud()
	gw1, gw2 := sim{sys.gws[0]}, sim{sys.gws[1]}
	faults := func(slow bool) error {
		m1, m2 := "none", "none"
		if slow {
			m1, m2 = "slow", "controller_slow"
		}
		if err := gw1.setFaults(ctx, m1, delayMs); err != nil {
			return err
		}
		return gw2.setFaults(ctx, m2, delayMs)
	}
	pool := newLockerPool(sys)
	var allOpens []openAnswer
	baseline, err := sys.actuations(ctx)
	if err != nil {
		r.err = err
		return r
	}
	totalClients, totalStored := 0, 0
	var recoveries []string
	for _, round := range []string{"SIGTERM", "SIGKILL"} {
		logf("  round %s", round)
		txBefore, err := gw1.transactions(ctx)
		if err != nil {
			r.err = err
			return r
		}
		if err := faults(true); err != nil {
			r.err = err
			return r
		}
		targets := make([]target, o.apiClients)
		isCreate := func(i int) bool { return i%3 == 2 }
		for i := range targets {
			if !isCreate(i) {
				if targets[i], err = pool.take(-1); err != nil {
					r.err = err
					return r
				}
			}
		}
		roundStart := time.Now()
		cctx, cancel := context.WithTimeout(ctx, o.settleLimit)
		clients := startWaiting(cctx, c, targets, 30, func(i int) (string, []byte, bool) {
			return fmt.Sprintf("/locations/%d/transactions", sys.gws[0].locationID), []byte(`{}`), isCreate(i)
		})
		// Stop the apiserver once every call is stored and waiting on the slow gateways.
		stored := sys.waitStored(ctx, roundStart, o.apiClients, 20*time.Second)
		time.Sleep(time.Second)
		tStop := time.Now()
		if round == "SIGTERM" {
			sys.api.stop(30 * time.Second)
		} else {
			sys.api.kill()
		}
		tExit := time.Now()
		time.Sleep(o.apiDown)
		restartErr := sys.api.start(ctx, 90*time.Second)
		tReady := time.Now()
		outs := clients.wait()
		cancel()
		if restartErr != nil {
			r.verify(false, round+": the apiserver starts again", "%v", restartErr)
			r.lost += o.apiClients
			return r
		}

		// Every client has its answer: the gateways may be quick again for the checks.
		if err := faults(false); err != nil {
			r.err = err
			return r
		}

		// What the clients got.
		tl := tallyOutcomes(outs)
		answered, errs, sends, multi, hit, states, settled, waits := tl.answered, tl.errors, tl.sends, tl.multi, tl.hit, tl.states, tl.settled, tl.waits
		lost := o.apiClients - answered
		r.lost += lost
		totalClients += o.apiClients
		storedNow, err := sys.storedSince(ctx, roundStart)
		if err != nil {
			r.err = err
			return r
		}
		totalStored += storedNow
		r.figure(round+": clients waiting when the apiserver stopped", "%d (%d of their requests stored)", o.apiClients, stored)
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
			recoveries = append(recoveries, fmt.Sprintf("%s: serving again after %s, last client answered after %s", round,
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
		mismatch := replayMismatches(ctx, c, outs)
		r.verify(mismatch == 0, round+": a replay with the same key answers identically (status, body, X-Request-Id, Idempotent-Replayed)",
			"%d of %d differ", mismatch, answered)

		// Transactions: one per create, none twice.
		txAfter, err := gw1.transactions(ctx)
		if err != nil {
			r.err = err
			return r
		}
		had := map[string]bool{}
		for _, t := range txBefore {
			had[t] = true
		}
		created := map[string]bool{}
		for _, t := range txAfter {
			if !had[t] {
				created[t] = true
			}
		}
		creates, completed201, missing := 0, 0, 0
		for i, out := range outs {
			if !isCreate(i) {
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

		for i, out := range outs {
			if !isCreate(i) {
				allOpens = append(allOpens, openAnswer{t: targets[i], answered: out.done, state: out.final.state, body: out.final.body})
			}
		}
	}

	time.Sleep(2 * time.Second)
	w := doorsNotCompleted
	w.figure = "Door actuations (both rounds)"
	if err := checkOpens(ctx, r, sys, baseline, allOpens, w); err != nil {
		r.err = err
		return r
	}
	r.figure("Requests stored", "%d for %d clients", totalStored, totalClients)
	r.figure("Time to recover (from the signal)", "%s", strings.Join(recoveries, "; "))
	return r
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
