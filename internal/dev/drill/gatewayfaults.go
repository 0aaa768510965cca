package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
)

// drillGatewayFaults: a gateway that hangs, one that is unreachable, and one whose process
// dies. Requests must end in the terminal state of DESIGN §6.2 at the deadline, a
// delivered open is never sent again, and once the gateway is back new requests complete
// and the online state recovers.
func drillGatewayFaults(ctx context.Context, o options) (r *result) {
	r = newResult("gateway-faults", "gateway hang and gateway down")
	r.what = fmt.Sprintf("Three phases, each with %d locker opens (each on a locker of its own) and 4 locker-list reads sent with "+
		"`Prefer: respond-async` and polled to their terminal state: (1) GW-0001's simulator in `hang` mode (requests are "+
		"accepted and never answered), (2) GW-0002's simulator in `unreachable` mode (its port is closed), (3) GW-0001's "+
		"process killed with SIGKILL. After each phase the gateway is brought back (mode `none`, or the process started "+
		"again) and the drill measures how long until a new open completes and until `GET /locations` shows the gateway "+
		"online again. Door counters are read after the gateway is back, so an open delivered late or re-sent would show.",
		o.gfOpens)
	r.settings = append(r.settings,
		fmt.Sprintf("`LOCKERNET_GATEWAY_HARDWARE_TIMEOUT=%s` (default 65 s) and the gateways' open policy `-open-attempt-timeout 3s "+
			"-open-attempts 3 -open-retry-delay 1s` (default 20 s × 3, 1 s apart): the hardware deadline still covers the "+
			"gateway's whole open policy (3 × 3 s + 2 × 1 s = 11 s), as DESIGN §6.2 has it, at a fifth of the wait.", o.gfHardwareTimeout),
		fmt.Sprintf("`LOCKERNET_GATEWAY_CALL_TIMEOUT=%s` (default 10 s), the deadline of the reads.", o.gfCallTimeout))
	sys := start(ctx, r, o, map[string]string{
		"LOCKERNET_GATEWAY_HARDWARE_TIMEOUT": o.gfHardwareTimeout.String(),
		"LOCKERNET_GATEWAY_CALL_TIMEOUT":     o.gfCallTimeout.String(),
	}, "-open-attempt-timeout", "3s", "-open-attempts", "3", "-open-retry-delay", "1s")
	if sys == nil {
		return r
	}
	defer sys.done(r)
	c := sys.cloud()
	pool := newLockerPool(sys)

	// Both gateways online to begin with.
	for _, g := range sys.gws {
		if _, ok := waitFor(ctx, time.Minute, 250*time.Millisecond, func() bool {
			on, err := c.gatewayOnline(ctx, g.serial)
			return err == nil && on
		}); !ok {
			r.err = fmt.Errorf("%s never showed online", g.serial)
			return r
		}
	}

	phases := []struct {
		name, state string
		gw          int
		httpStatus  int
		attempts    float64 // details.attempts of every open
		deadline    time.Duration
		breakIt     func(g *gatewayProc) error
		fixIt       func(g *gatewayProc) error
	}{
		{name: "hang", state: "gateway_unresponsive", gw: 0, httpStatus: http.StatusGatewayTimeout, attempts: 1, deadline: o.gfHardwareTimeout,
			breakIt: func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "hang", 0) },
			fixIt:   func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "none", 0) }},
		{name: "unreachable", state: "dispatch_failed", gw: 1, httpStatus: http.StatusServiceUnavailable, attempts: 3,
			breakIt: func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "unreachable", 0) },
			fixIt:   func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "none", 0) }},
		{name: "process killed", state: "dispatch_failed", gw: 0, httpStatus: http.StatusServiceUnavailable, attempts: 3,
			breakIt: func(g *gatewayProc) error { g.kill(); return nil },
			fixIt:   func(g *gatewayProc) error { return g.start(ctx, 90*time.Second) }},
	}
	var recoveries []string
	for _, ph := range phases {
		g := sys.gws[ph.gw]
		logf("  phase %s (%s)", ph.name, g.serial)
		before, err := sys.actuations(ctx)
		if err != nil {
			r.err = err
			return r
		}
		// Watch the online state through the phase.
		wctx, stopWatch := context.WithCancel(ctx)
		var wmu sync.Mutex
		var wentOffline time.Time
		tFault := time.Now()
		go func() {
			for wctx.Err() == nil {
				if on, err := c.gatewayOnline(wctx, g.serial); err == nil && !on {
					wmu.Lock()
					if wentOffline.IsZero() {
						wentOffline = time.Now()
					}
					wmu.Unlock()
				}
				select {
				case <-wctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()
		if err := ph.breakIt(g); err != nil {
			stopWatch()
			r.err = err
			return r
		}

		// Opens and reads, sent at once and polled to the end.
		type req struct {
			t    target
			read bool
			id   string
			sent time.Time
			a    answer
		}
		reqs := make([]*req, 0, o.gfOpens+4)
		for i := 0; i < o.gfOpens; i++ {
			t, err := pool.take(ph.gw)
			if err != nil {
				stopWatch()
				r.err = err
				return r
			}
			reqs = append(reqs, &req{t: t})
		}
		for i := 0; i < 4; i++ {
			reqs = append(reqs, &req{t: target{gw: g}, read: true})
		}
		pctx, cancel := context.WithTimeout(ctx, o.settleLimit)
		parallel(len(reqs), len(reqs), func(i int) {
			q := reqs[i]
			method, path, hdr := http.MethodPost, openPath(g.locationID, q.t.locker), map[string]string{"Prefer": "respond-async", "Idempotency-Key": newKey()}
			if q.read {
				method, path, hdr = http.MethodGet, fmt.Sprintf("/locations/%d/lockers", g.locationID), map[string]string{"Prefer": "respond-async"}
			}
			q.sent = time.Now()
			a, err := c.do(pctx, method, path, nil, hdr)
			if err != nil || a.requestID == "" {
				return
			}
			q.id = a.requestID
			if a.terminal() {
				q.a = a
				return
			}
			q.a, _ = c.settle(pctx, q.id, 20)
		})
		cancel()
		lost, wrong, resent := 0, 0, 0
		states := map[string]int{}
		var openTimes, readTimes []time.Duration
		var ids []string
		for _, q := range reqs {
			if q.id != "" {
				ids = append(ids, q.id)
			}
		}
		rows, err := sys.requestRows(ctx, ids)
		if err != nil {
			stopWatch()
			r.err = err
			return r
		}
		var opens []openAnswer
		for _, q := range reqs {
			if !q.a.terminal() {
				lost++
				continue
			}
			kind := "open"
			if q.read {
				kind = "read"
			}
			states[kind+" "+q.a.state+" "+fmt.Sprint(q.a.status)]++
			if q.a.state != ph.state || q.a.status != ph.httpStatus {
				wrong++
			}
			if row, ok := rows[q.id]; ok && row.completed != nil {
				if q.read {
					readTimes = append(readTimes, row.completed.Sub(row.created))
				} else {
					openTimes = append(openTimes, row.completed.Sub(row.created))
				}
			}
			if !q.read {
				if n, ok := detailsAttempts(q.a.body); !ok || n != ph.attempts {
					resent++
					logf("  open %s: details.attempts %v, want %v", q.id, n, ph.attempts)
				}
				opens = append(opens, openAnswer{t: q.t, answered: true, state: q.a.state, body: q.a.body})
			}
		}
		r.lost += lost
		r.figure(ph.name+": answers", "%s", counts(states))
		r.figure(ph.name+": request accepted → terminal (opens)", "%s", durations(openTimes))
		r.figure(ph.name+": request accepted → terminal (reads)", "%s", durations(readTimes))
		r.verify(lost == 0, ph.name+": every request reached a terminal state", "%d of %d lost", lost, len(reqs))
		r.verify(wrong == 0, fmt.Sprintf("%s: every request ended %s (%d)", ph.name, ph.state, ph.httpStatus), "%d did not", wrong)
		what := "deliveries"
		if ph.attempts == 1 {
			what = "send (a delivered hardware call is never re-sent)"
		}
		r.verify(resent == 0, fmt.Sprintf("%s: every open reports %v %s in details.attempts", ph.name, ph.attempts, what), "%d differ", resent)
		if ph.deadline > 0 && len(openTimes) > 0 {
			r.observe(minDur(openTimes) >= ph.deadline, fmt.Sprintf("%s: no open gave up before the %s hardware deadline", ph.name, human(ph.deadline)),
				"shortest %s", secs(minDur(openTimes)))
		}

		// Bring the gateway back; how long until it serves again?
		tBack := time.Now()
		if err := ph.fixIt(g); err != nil {
			stopWatch()
			r.verify(false, ph.name+": "+g.serial+" comes back", "%v", err)
			return r
		}
		tFixed := time.Now()
		var okAt time.Time
		okAt, ok := waitFor(ctx, o.settleLimit, 250*time.Millisecond, func() bool {
			t, err := pool.take(ph.gw)
			if err != nil {
				return false
			}
			a, err := c.do(ctx, http.MethodPost, openPath(g.locationID, t.locker), nil, map[string]string{"Prefer": "wait=15", "Idempotency-Key": newKey()})
			if err == nil && a.state == "completed" {
				opens = append(opens, openAnswer{t: t, answered: true, state: a.state, body: a.body})
				return true
			}
			if err == nil && a.requestID != "" {
				// Not through yet: its outcome still counts for the doors.
				fa, _ := c.settle(ctx, a.requestID, 20)
				opens = append(opens, openAnswer{t: t, answered: fa.terminal(), state: fa.state, body: fa.body})
			}
			return false
		})
		r.verify(ok, ph.name+": after "+g.serial+" is back, a new open completes", "%s", within(ok, okAt, tBack, o.settleLimit))
		onlineAt, online := waitFor(ctx, o.settleLimit, 250*time.Millisecond, func() bool {
			on, err := c.gatewayOnline(ctx, g.serial)
			return err == nil && on
		})
		stopWatch()
		r.verify(online, ph.name+": "+g.serial+" shows online again (GET /locations)", "%s", within(online, onlineAt, tBack, o.settleLimit))
		wmu.Lock()
		off := wentOffline
		wmu.Unlock()
		if !off.IsZero() {
			r.figure(ph.name+": fault → shown offline", "%s", secs(off.Sub(tFault)))
		} else {
			r.figure(ph.name+": fault → shown offline", "never during the phase")
		}
		if ph.name == "process killed" {
			r.figure(ph.name+": gateway process restarted and healthy", "%s", secs(tFixed.Sub(tBack)))
		}
		if ok {
			r.figure(ph.name+": gateway back → new open completed", "%s", secs(okAt.Sub(tBack)))
			recoveries = append(recoveries, fmt.Sprintf("%s %s", ph.name, secs(okAt.Sub(tBack))))
		}
		if online {
			r.figure(ph.name+": gateway back → shown online", "%s", secs(onlineAt.Sub(tBack)))
		}

		// Doors, read once the gateway is back: a late or repeated delivery would show now.
		time.Sleep(3 * time.Second)
		acts, err := sys.actuations(ctx)
		if err != nil {
			r.err = err
			return r
		}
		if ph.name == "process killed" {
			before = doors.Actuations{} // the restarted gateway counts from zero
			for serial, m := range acts {
				if serial != g.serial {
					before[serial] = m
				}
			}
		}
		d := accountDoors(acts, before, opens)
		r.duplicates += d.Duplicates
		r.figure(ph.name+": door actuations", "%d doors moved, each for an open answered completed once the gateway was back; "+
			"%d moved for one of the %d opens that failed; %d extra actuations", d.Actuated-d.MovedUnconfirmed, d.MovedUnconfirmed, o.gfOpens, d.Duplicates)
		r.verify(d.Duplicates == 0, ph.name+": no door opened more than once per open request (/sim/stats)", "%d extra", d.Duplicates)
		if ph.state == "dispatch_failed" {
			// Never delivered: a door that moved would be a request sent after all.
			r.verify(d.MovedUnconfirmed == 0, ph.name+": no open that ended dispatch_failed moved a door, then or later", "%d did", d.MovedUnconfirmed)
		} else {
			// Delivered but unanswered: the door may have moved (DESIGN §6.2); it did not here.
			r.observe(d.MovedUnconfirmed == 0, ph.name+": no unanswered open moved a door, then or later", "%d did", d.MovedUnconfirmed)
		}
	}
	r.figure("Time to recover (gateway back → new open completed)", "%s", strings.Join(recoveries, "; "))
	return r
}

func detailsAttempts(body []byte) (float64, bool) {
	var e struct {
		Details map[string]any `json:"details"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	n, ok := e.Details["attempts"].(float64)
	return n, ok
}

func minDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds[1:] {
		m = min(m, d)
	}
	return m
}

// within describes how long something took against its limit.
func within(ok bool, at, from time.Time, limit time.Duration) string {
	if !ok {
		return "not within " + human(limit)
	}
	return fmt.Sprintf("after %s (limit %s)", secs(at.Sub(from)), human(limit))
}
