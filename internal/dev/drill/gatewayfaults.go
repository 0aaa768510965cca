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
	d := &gatewayFaultsDrill{o: o, r: r, sys: sys, c: sys.cloud(), pool: newLockerPool(sys)}
	phases := []phase{{"both gateways online", d.waitOnline}}
	for _, f := range d.faults(ctx) {
		name := fmt.Sprintf("%s (%s)", f.name, sys.gws[f.gw].serial)
		phases = append(phases, phase{name, func(ctx context.Context) error { return d.run(ctx, f) }})
	}
	phases = append(phases, phase{"sum up the recoveries", d.sumUp})
	runPhases(ctx, r, phases...)
	return r
}

// gatewayFaultsDrill is what one phase of the gateway-faults drill leaves for the next.
type gatewayFaultsDrill struct {
	o          options
	r          *result
	sys        *system
	c          *cloud
	pool       *lockerPool
	recoveries []string
}

// gatewayFault is one fault of the drill: how it breaks and fixes a gateway and what its
// requests must end as.
type gatewayFault struct {
	name, state string
	gw          int
	httpStatus  int
	attempts    float64 // details.attempts of every open
	deadline    time.Duration
	breakIt     func(g *gatewayProc) error
	fixIt       func(g *gatewayProc) error
}

// faults are the drill's three faults, in order: a hang, a closed port, a killed process.
func (d *gatewayFaultsDrill) faults(ctx context.Context) []gatewayFault {
	return []gatewayFault{
		{name: "hang", state: "gateway_unresponsive", gw: 0, httpStatus: http.StatusGatewayTimeout, attempts: 1, deadline: d.o.gfHardwareTimeout,
			breakIt: func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "hang", 0) },
			fixIt:   func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "none", 0) }},
		{name: "unreachable", state: "dispatch_failed", gw: 1, httpStatus: http.StatusServiceUnavailable, attempts: 3,
			breakIt: func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "unreachable", 0) },
			fixIt:   func(g *gatewayProc) error { return sim{g}.setFaults(ctx, "none", 0) }},
		{name: "process killed", state: "dispatch_failed", gw: 0, httpStatus: http.StatusServiceUnavailable, attempts: 3,
			breakIt: func(g *gatewayProc) error { g.kill(); return nil },
			fixIt:   func(g *gatewayProc) error { return g.start(ctx, 90*time.Second) }},
	}
}

// waitOnline waits until both gateways show online.
func (d *gatewayFaultsDrill) waitOnline(ctx context.Context) error {
	for _, g := range d.sys.gws {
		if _, ok := waitFor(ctx, time.Minute, 250*time.Millisecond, func() bool {
			on, err := d.c.gatewayOnline(ctx, g.serial)
			return err == nil && on
		}); !ok {
			return fmt.Errorf("%s never showed online", g.serial)
		}
	}
	return nil
}

// faultRun is one fault's run: its gateway, when it went offline, and the opens whose doors
// are counted at its end.
type faultRun struct {
	gatewayFault
	g           *gatewayProc
	before      doors.Actuations
	tFault      time.Time
	wmu         sync.Mutex
	wentOffline time.Time
	opens       []openAnswer
}

// gatewayRequest is one open or read sent while the gateway is broken.
type gatewayRequest struct {
	t    target
	read bool
	id   string
	sent time.Time
	a    answer
}

// run runs one fault: the gateway broken with opens and reads in flight, their answers
// checked, the gateway brought back, and its doors counted.
func (d *gatewayFaultsDrill) run(ctx context.Context, f gatewayFault) error {
	fr := &faultRun{gatewayFault: f, g: d.sys.gws[f.gw]}
	var err error
	if fr.before, err = d.sys.actuations(ctx); err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	fr.tFault = time.Now()
	go d.watchOffline(wctx, fr)
	if err := f.breakIt(fr.g); err != nil {
		return err
	}
	reqs, err := d.sendRequests(ctx, fr)
	if err != nil {
		return err
	}
	if err := d.checkAnswers(ctx, fr, reqs); err != nil {
		return err
	}
	if err := d.bringBack(ctx, fr, stopWatch); err != nil {
		return err
	}
	return d.countDoors(ctx, fr)
}

// watchOffline records when the gateway of fr first shows offline, until ctx ends.
func (d *gatewayFaultsDrill) watchOffline(ctx context.Context, fr *faultRun) {
	for ctx.Err() == nil {
		if on, err := d.c.gatewayOnline(ctx, fr.g.serial); err == nil && !on {
			fr.wmu.Lock()
			if fr.wentOffline.IsZero() {
				fr.wentOffline = time.Now()
			}
			fr.wmu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sendRequests sends the opens and reads at once, `Prefer: respond-async`, and polls each
// to its end.
func (d *gatewayFaultsDrill) sendRequests(ctx context.Context, fr *faultRun) ([]*gatewayRequest, error) {
	g := fr.g
	reqs := make([]*gatewayRequest, 0, d.o.gfOpens+4)
	for i := 0; i < d.o.gfOpens; i++ {
		t, err := d.pool.take(fr.gw)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, &gatewayRequest{t: t})
	}
	for i := 0; i < 4; i++ {
		reqs = append(reqs, &gatewayRequest{t: target{gw: g}, read: true})
	}
	pctx, cancel := context.WithTimeout(ctx, d.o.settleLimit)
	defer cancel()
	parallel(len(reqs), len(reqs), func(i int) {
		q := reqs[i]
		method, path, hdr := http.MethodPost, openPath(g.locationID, q.t.locker), map[string]string{"Prefer": "respond-async", "Idempotency-Key": newKey()}
		if q.read {
			method, path, hdr = http.MethodGet, fmt.Sprintf("/locations/%d/lockers", g.locationID), map[string]string{"Prefer": "respond-async"}
		}
		q.sent = time.Now()
		a, err := d.c.do(pctx, method, path, nil, hdr)
		if err != nil || a.requestID == "" {
			return
		}
		q.id = a.requestID
		if a.terminal() {
			q.a = a
			return
		}
		q.a, _ = d.c.settle(pctx, q.id, 20)
	})
	return reqs, nil
}

// checkAnswers checks that every request ended in the fault's terminal state and that every
// open reports the fault's send attempts.
func (d *gatewayFaultsDrill) checkAnswers(ctx context.Context, fr *faultRun, reqs []*gatewayRequest) error {
	r := d.r
	lost, wrong, resent := 0, 0, 0
	states := map[string]int{}
	var openTimes, readTimes []time.Duration
	var ids []string
	for _, q := range reqs {
		if q.id != "" {
			ids = append(ids, q.id)
		}
	}
	rows, err := d.sys.requestRows(ctx, ids)
	if err != nil {
		return err
	}
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
		if q.a.state != fr.state || q.a.status != fr.httpStatus {
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
			if n, ok := detailsAttempts(q.a.body); !ok || n != fr.attempts {
				resent++
				logf("  open %s: details.attempts %v, want %v", q.id, n, fr.attempts)
			}
			fr.opens = append(fr.opens, openAnswer{t: q.t, answered: true, state: q.a.state, body: q.a.body})
		}
	}
	name := fr.name
	r.lost += lost
	r.figure(name+": answers", "%s", counts(states))
	r.figure(name+": request accepted → terminal (opens)", "%s", durations(openTimes))
	r.figure(name+": request accepted → terminal (reads)", "%s", durations(readTimes))
	r.verify(lost == 0, name+": every request reached a terminal state", "%d of %d lost", lost, len(reqs))
	r.verify(wrong == 0, fmt.Sprintf("%s: every request ended %s (%d)", name, fr.state, fr.httpStatus), "%d did not", wrong)
	what := "deliveries"
	if fr.attempts == 1 {
		what = "send (a delivered hardware call is never re-sent)"
	}
	r.verify(resent == 0, fmt.Sprintf("%s: every open reports %v %s in details.attempts", name, fr.attempts, what), "%d differ", resent)
	if fr.deadline > 0 && len(openTimes) > 0 {
		r.observe(minDur(openTimes) >= fr.deadline, fmt.Sprintf("%s: no open gave up before the %s hardware deadline", name, human(fr.deadline)),
			"shortest %s", secs(minDur(openTimes)))
	}
	return nil
}

// bringBack fixes the gateway and measures how long until a new open completes and until it
// shows online again; then the watch of its online state stops.
func (d *gatewayFaultsDrill) bringBack(ctx context.Context, fr *faultRun, stopWatch func()) error {
	r, o, g, name := d.r, d.o, fr.g, fr.name
	tBack := time.Now()
	if err := fr.fixIt(g); err != nil {
		r.verify(false, name+": "+g.serial+" comes back", "%v", err)
		return errCheckFailed
	}
	tFixed := time.Now()
	okAt, ok := waitFor(ctx, o.settleLimit, 250*time.Millisecond, func() bool {
		t, err := d.pool.take(fr.gw)
		if err != nil {
			return false
		}
		a, err := d.c.do(ctx, http.MethodPost, openPath(g.locationID, t.locker), nil, map[string]string{"Prefer": "wait=15", "Idempotency-Key": newKey()})
		if err == nil && a.state == "completed" {
			fr.opens = append(fr.opens, openAnswer{t: t, answered: true, state: a.state, body: a.body})
			return true
		}
		if err == nil && a.requestID != "" {
			// Not through yet: its outcome still counts for the doors.
			fa, _ := d.c.settle(ctx, a.requestID, 20)
			fr.opens = append(fr.opens, openAnswer{t: t, answered: fa.terminal(), state: fa.state, body: fa.body})
		}
		return false
	})
	r.verify(ok, name+": after "+g.serial+" is back, a new open completes", "%s", within(ok, okAt, tBack, o.settleLimit))
	onlineAt, online := waitFor(ctx, o.settleLimit, 250*time.Millisecond, func() bool {
		on, err := d.c.gatewayOnline(ctx, g.serial)
		return err == nil && on
	})
	stopWatch()
	r.verify(online, name+": "+g.serial+" shows online again (GET /locations)", "%s", within(online, onlineAt, tBack, o.settleLimit))
	fr.wmu.Lock()
	off := fr.wentOffline
	fr.wmu.Unlock()
	if !off.IsZero() {
		r.figure(name+": fault → shown offline", "%s", secs(off.Sub(fr.tFault)))
	} else {
		r.figure(name+": fault → shown offline", "never during the phase")
	}
	if name == "process killed" {
		r.figure(name+": gateway process restarted and healthy", "%s", secs(tFixed.Sub(tBack)))
	}
	if ok {
		r.figure(name+": gateway back → new open completed", "%s", secs(okAt.Sub(tBack)))
		d.recoveries = append(d.recoveries, fmt.Sprintf("%s %s", name, secs(okAt.Sub(tBack))))
	}
	if online {
		r.figure(name+": gateway back → shown online", "%s", secs(onlineAt.Sub(tBack)))
	}
	return nil
}

// countDoors reads the doors once the gateway is back: a late or repeated delivery would
// show now.
func (d *gatewayFaultsDrill) countDoors(ctx context.Context, fr *faultRun) error {
	r, name := d.r, fr.name
	time.Sleep(3 * time.Second)
	acts, err := d.sys.actuations(ctx)
	if err != nil {
		return err
	}
	before := fr.before
	if name == "process killed" {
		before = doors.Actuations{} // the restarted gateway counts from zero
		for serial, m := range acts {
			if serial != fr.g.serial {
				before[serial] = m
			}
		}
	}
	da := accountDoors(acts, before, fr.opens)
	r.duplicates += da.Duplicates
	r.figure(name+": door actuations", "%d doors moved, each for an open answered completed once the gateway was back; "+
		"%d moved for one of the %d opens that failed; %d extra actuations", da.Actuated-da.MovedUnconfirmed, da.MovedUnconfirmed, d.o.gfOpens, da.Duplicates)
	r.verify(da.Duplicates == 0, name+": no door opened more than once per open request (/sim/stats)", "%d extra", da.Duplicates)
	if fr.state == "dispatch_failed" {
		// Never delivered: a door that moved would be a request sent after all.
		r.verify(da.MovedUnconfirmed == 0, name+": no open that ended dispatch_failed moved a door, then or later", "%d did", da.MovedUnconfirmed)
	} else {
		// Delivered but unanswered: the door may have moved (DESIGN §6.2); it did not here.
		r.observe(da.MovedUnconfirmed == 0, name+": no unanswered open moved a door, then or later", "%d did", da.MovedUnconfirmed)
	}
	return nil
}

// sumUp reports the recoveries of the three faults together.
func (d *gatewayFaultsDrill) sumUp(context.Context) error {
	d.r.figure("Time to recover (gateway back → new open completed)", "%s", strings.Join(d.recoveries, "; "))
	return nil
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
