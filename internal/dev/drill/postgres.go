package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// towerCall is one tower API call of the load.
type towerCall struct {
	kind       string // reservation or dropoff-token
	start, end time.Time
	status     int
	retryAfter bool // the answer carried Retry-After
	err        string
	id         string
	expires    time.Time
	locker     string // the locker's tower API path, when the caller records it
}

func (c towerCall) ok() bool { return c.status == http.StatusCreated && c.id != "" }

// postTower asks for a hold (a reservation or a drop-off token) on the tower API, once.
func postTower(ctx context.Context, tower *towerAPI, kind, path string, body any) towerCall {
	c := towerCall{kind: kind, start: time.Now()}
	a, err := tower.post(ctx, path, body)
	c.end = time.Now()
	if err != nil {
		c.err = err.Error()
		return c
	}
	c.status = a.status
	c.retryAfter = a.header.Get("Retry-After") != ""
	if a.status != http.StatusCreated {
		c.err = fmt.Sprintf("HTTP %d: %s", a.status, loadclient.Excerpt(a.body))
		return c
	}
	var v struct {
		ID        string `json:"id"`
		ExpiresAt string `json:"expiresAt"`
	}
	if err := json.Unmarshal(a.body, &v); err != nil {
		c.err = "decode: " + err.Error()
		return c
	}
	c.id = v.ID
	c.expires, _ = time.Parse(time.RFC3339Nano, v.ExpiresAt)
	return c
}

// drillRestartPostgres: tower flows and gateway requests run while the drill's private
// Postgres is stopped and started again.
func drillRestartPostgres(ctx context.Context, o options) (r *result) {
	r = newResult("restart-postgres", "restart Postgres under load")
	r.what = fmt.Sprintf("For %s, an open-loop load runs %.0f tower flows a second (a reservation of %s on a tower locker of its own, "+
		"then, for every other flow, a drop-off token of %s on it) and %.0f gateway locker opens a second (each on a locker "+
		"of its own, with an `Idempotency-Key` and `Prefer: wait=10`, retried with the same key until it has a terminal "+
		"answer). %s into the load the drill's own PostgreSQL cluster is stopped (`pg_ctl stop -m fast`: every session is "+
		"cut) and started again %s later; the machine's shared server is never touched. Afterwards the drill waits until "+
		"every reservation and token has expired (plus 15 s, well inside the sweeper's 60 s grace, so expiry by the "+
		"workflows is what is checked) and checks every answer against Postgres and Temporal.",
		human(o.pgLoad), o.pgFlowRate, human(o.pgHold), human(o.pgHold), o.pgOpenRate, human(o.pgStopAfter), human(o.pgDown))
	sys := start(ctx, r, o, nil)
	if sys == nil {
		return r
	}
	defer sys.done(r)
	d := &pgDrill{underLoad: underLoad{o: o, r: r, sys: sys}, backlog: -1}
	runPhases(ctx, r,
		phase{"load", d.startLoad},
		phase{"restart Postgres under load", d.restartUnderLoad},
		phase{"check the tower API", d.checkTower},
		phase{"check the gateway opens", d.checkOpens},
		phase{"check the doors", d.checkDoors},
		phase{"check the expiries", d.checkExpiries},
	)
	return r
}

// pgDrill is what one phase of the restart-postgres drill leaves for the next.
type pgDrill struct {
	underLoad
	out       pgOutage
	backlog   int // outbox rows written before the restart, at the first look after it (-1: not looked)
	drainedAt time.Time
}

func (d *pgDrill) startLoad(ctx context.Context) error {
	return d.underLoad.startLoad(ctx, d.o.pgLockers, d.o.pgHold)
}

// restartUnderLoad runs the load while Postgres goes down and comes back.
func (d *pgDrill) restartUnderLoad(ctx context.Context) error {
	o, sys := d.o, d.sys
	lctx, lcancel := context.WithTimeout(ctx, o.pgLoad+o.settleLimit)
	defer lcancel()
	d.load.run(lctx, d.tower, d.c, d.pool, o.pgFlowRate, o.pgOpenRate, o.pgLoad, func() {
		if d.out = sys.restartPostgres(lctx, o.pgStopAfter, o.pgDown); d.out.err != nil {
			return
		}
		tUp0 := d.out.start0
		// The workflows of holds written before the stop start through the outbox: how long
		// until the last of them is dispatched?
		d.drainedAt, _ = waitFor(lctx, o.settleLimit, 100*time.Millisecond, func() bool {
			var n int
			if err := sys.st.Pool().QueryRow(lctx, `SELECT count(*) FROM workflow_outbox WHERE created_at < $1`, tUp0).Scan(&n); err != nil {
				return false
			}
			if d.backlog < 0 {
				d.backlog = n
			}
			return n == 0
		})
	})
	if d.out.err != nil {
		d.r.verify(false, "Postgres stops and starts again", "%v", d.out.err)
		return d.out.err
	}
	if d.load.gl.err != nil {
		return d.load.gl.err
	}
	out := d.out
	d.r.figure("Postgres down (stop issued → answering again)", "%s (the stop took %s, the start %s)", secs(out.up.Sub(out.stop0)),
		secs(out.stopped.Sub(out.stop0)), secs(out.up.Sub(out.start0)))
	return nil
}

// checkTower reports the tower API during and after the outage.
func (d *pgDrill) checkTower(context.Context) error {
	r, load := d.r, &d.load
	tDown0, tDown, tUp0, tUp := d.out.stop0, d.out.stopped, d.out.start0, d.out.up
	var failed, failedOutside int
	var firstOK, lastFail time.Time
	kinds := map[string]int{}
	errKinds := map[string]int{}
	for _, call := range load.calls {
		if call.ok() {
			kinds[call.kind+" 201"]++
			// Started once Postgres was down: it can only have succeeded once it was back.
			if call.start.After(tDown) && (firstOK.IsZero() || call.end.Before(firstOK)) {
				firstOK = call.end
			}
			continue
		}
		kinds[call.kind+" failed"]++
		failed++
		if call.status != 0 {
			errKinds[fmt.Sprintf("HTTP %d", call.status)]++
		} else {
			errKinds["no HTTP answer"]++
		}
		if call.end.Before(tDown0) || call.start.After(tUp.Add(5*time.Second)) {
			failedOutside++
			logf("  tower call failed outside the outage: %s", call.err)
		}
		if call.end.After(lastFail) {
			lastFail = call.end
		}
	}
	r.figure("Tower API calls", "%s (flows started: %d in %s; %d skipped for want of lockers)", counts(kinds),
		load.next.Load()-load.skipped.Load(), secs(load.finished.Sub(load.started)), load.skipped.Load())
	r.figure("Tower API errors", "%d during the outage (%s), %d outside it", failed-failedOutside, counts(errKinds), failedOutside)
	if !firstOK.IsZero() {
		// Measured from the start command: Postgres accepts connections some time before the
		// command returns, so a call may well succeed before tUp; that difference is reported
		// as measured (negative: before), never clamped.
		r.figure("Time to recover (Postgres start issued → first tower call answered 201)",
			"%s (the start command itself returned after %s; the first call was answered %s after it returned, negative: before)",
			secs(firstOK.Sub(tUp0)), secs(tUp.Sub(tUp0)), secs(firstOK.Sub(tUp)))
	}
	if !lastFail.IsZero() {
		r.figure("Last tower error", "%s after the stop was issued; %s after Postgres answered again (negative: before)",
			secs(lastFail.Sub(tDown0)), secs(lastFail.Sub(tUp)))
	}
	switch {
	case d.backlog > 0 && !d.drainedAt.IsZero():
		r.figure("Workflow starts and signals written before the stop, still in the outbox when Postgres was back", "%d, all dispatched %s after Postgres answered again",
			d.backlog, secs(d.drainedAt.Sub(tUp)))
	case d.backlog == 0:
		r.figure("Workflow starts and signals written before the stop, still in the outbox when Postgres was back", "none")
	}
	r.observe(failedOutside == 0, "no tower call failed more than 5 s away from the outage", "%d did", failedOutside)
	return nil
}

// checkOpens checks the gateway requests: each answered, one request per key, one stored
// per open.
func (d *pgDrill) checkOpens(ctx context.Context) error {
	r, sys := d.r, d.sys
	tUp0, tUp, gOuts := d.out.start0, d.out.up, d.load.gl.outs
	tl := tallyOutcomes(gOuts)
	lost, multi, gErrs, states, gSettled := tl.lost, tl.multi, tl.errors, tl.states, tl.retried
	r.lost = lost
	r.figure("Gateway opens", "%d sent; answers: %s; %d exchanges failed during the outage and were retried with the same key",
		len(gOuts), counts(states), gErrs)
	if l := latest(gSettled); !l.IsZero() {
		r.figure("Postgres back → last retried gateway open answered", "%s", secs(l.Sub(tUp)))
	}
	// The opens clients had kept retrying all arrive at once when Postgres is back: how
	// long did they take from being stored to their outcome?
	var gIDs []string
	for _, out := range gOuts {
		if out.done {
			gIDs = append(gIDs, out.final.requestID)
		}
	}
	if rows, err := sys.requestRows(ctx, gIDs); err == nil {
		var burst []time.Duration
		for _, row := range rows {
			if row.completed != nil && !row.created.Before(tUp0) && row.created.Before(tUp.Add(time.Second)) {
				burst = append(burst, row.completed.Sub(row.created))
			}
		}
		r.figure("Gateway opens stored in the first second after the restart: stored → outcome", "%s", durations(burst))
		if len(burst) > 0 {
			r.note("The gateway opens that clients kept retrying through the outage are all stored within a second of Postgres " +
				"answering again, together with the reservation and token expiries that had failed meanwhile and are retried; " +
				"that burst is worked off over the next seconds, which is why those opens took longer from being stored to their " +
				"outcome than the opens of the steady load.")
		}
	}
	r.verify(lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", lost, len(gOuts))
	r.verify(multi == 0, "each Idempotency-Key stood for one request (one X-Request-Id)", "%d keys saw more than one", multi)
	var stored int
	if err := sys.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_requests`).Scan(&stored); err != nil {
		return err
	}
	r.verify(stored == len(gOuts), "one stored gateway request per open", "%d stored for %d opens", stored, len(gOuts))
	return nil
}

func (d *pgDrill) checkDoors(ctx context.Context) error {
	time.Sleep(2 * time.Second)
	return d.checkLoadDoors(ctx)
}

// checkExpiries checks that every workflow start and signal written to the outbox has gone
// out and that every hold was released by its workflow, once past the last expiry.
func (d *pgDrill) checkExpiries(ctx context.Context) error {
	waitOutboxDrained(ctx, d.r, d.sys, d.o.settleLimit, "the workflow outbox drains")
	if err := waitHoldsExpired(ctx, d.load.calls); err != nil {
		return err
	}
	if err := checkHolds(ctx, d.r, d.sys, d.load.calls); err != nil {
		return err
	}
	sweeperFigure(d.r, d.sys.worker.logCount(sweeperReleased))
	return nil
}

// checkHolds checks every reservation and token the load got: stored, with its workflow,
// and released by now; and no locker held past its expiry.
func checkHolds(ctx context.Context, r *result, sys *system, calls []towerCall) error {
	type kindCheck struct {
		table             string
		ids               []string
		missing, noWF     int
		writtenBackNoWF   int
		activePastExpiry  int
		withWorkflow      int
		statuses          map[string]int
		workflowStatusErr error
	}
	checks := map[string]*kindCheck{
		"reservation":   {table: "reservations", statuses: map[string]int{}},
		"dropoff-token": {table: "locker_tokens", statuses: map[string]int{}},
	}
	for _, c := range calls {
		if c.ok() {
			checks[c.kind].ids = append(checks[c.kind].ids, c.id)
		}
	}
	for kind, k := range checks {
		rows, err := sys.st.Pool().Query(ctx, `SELECT id::text, status, expires_at < now() - interval '10 seconds' FROM `+k.table+` WHERE id::text = ANY($1)`, k.ids)
		if err != nil {
			return fmt.Errorf("read %s: %w", k.table, err)
		}
		status := map[string]string{}
		for rows.Next() {
			var id, st string
			var past bool
			if err := rows.Scan(&id, &st, &past); err != nil {
				rows.Close()
				return err
			}
			status[id] = st
			k.statuses[st]++
			if st == "active" && past {
				k.activePastExpiry++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var mu sync.Mutex
		parallel(len(k.ids), 16, func(i int) {
			id := k.ids[i]
			_, err := sys.tc.DescribeWorkflowExecution(ctx, holdWorkflowID(kind, id), "")
			var nf *serviceerror.NotFound
			mu.Lock()
			defer mu.Unlock()
			st, exists := status[id]
			switch {
			case !exists:
				k.missing++
			case err == nil:
				k.withWorkflow++
			case errors.As(err, &nf) && st != "active":
				k.writtenBackNoWF++
			case errors.As(err, &nf):
				k.noWF++
			default:
				k.workflowStatusErr = err
			}
		})
		if k.workflowStatusErr != nil {
			return fmt.Errorf("describe workflows: %w", k.workflowStatusErr)
		}
		r.figure(fmt.Sprintf("%ss answered 201", kind), "%d: %d with their workflow, %d without one but written back; now %s",
			len(k.ids), k.withWorkflow, k.writtenBackNoWF, counts(k.statuses))
		r.verify(k.missing == 0, fmt.Sprintf("every %s answered 201 exists in Postgres", kind), "%d missing", k.missing)
		r.verify(k.noWF == 0, fmt.Sprintf("every %s answered 201 has its workflow (or is written back)", kind), "%d have neither", k.noWF)
		r.verify(k.activePastExpiry == 0, fmt.Sprintf("no %s is still active 10 s after its expiry", kind), "%d are", k.activePastExpiry)
	}
	var stranded int
	if err := sys.st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM lockers WHERE status IN (2, 3, 5) AND hold_expires_at < now() - interval '10 seconds'`).Scan(&stranded); err != nil {
		return fmt.Errorf("count stranded lockers: %w", err)
	}
	r.verify(stranded == 0, "no locker stranded (reserved, rented or declined 10 s past its expiry)", "%d stranded", stranded)
	var held int
	if err := sys.st.Pool().QueryRow(ctx, `SELECT count(*) FROM lockers WHERE status <> 1`).Scan(&held); err != nil {
		return fmt.Errorf("count held lockers: %w", err)
	}
	r.figure("Tower lockers not available after every expiry", "%d", held)
	return nil
}

type towerLocker struct {
	towerID string
	id      int64
}

// path is the locker's tower API path, with its trailing slash.
func (k towerLocker) path() string {
	return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/", k.towerID, k.id)
}

// addDrillTowers adds n tower lockers (towers of 100) to a location of the demo
// organization, so every flow of the load has a fresh locker.
func addDrillTowers(ctx context.Context, sys *system, n int) ([]towerLocker, error) {
	org := sys.creds.OrganizationID
	typeID, err := sys.st.UpsertLockerType(ctx, org, store.LockerType{Name: "small", SortOrder: 1})
	if err != nil {
		return nil, err
	}
	loc, err := sys.st.UpsertLocation(ctx, store.NewLocation{OrganizationID: org, Name: "Drill Yard", Lat: 34.05, Lon: -118.25,
		Address1: "1 Drill Way", City: "Los Angeles", State: "CA", Zip: "90012", Country: "US"})
	if err != nil {
		return nil, err
	}
	var out []towerLocker
	for t := 0; len(out) < n; t++ {
		id := fmt.Sprintf("0d%014x", t+1)
		secret := []byte(fmt.Sprintf("drill-tower-secret-%018d", t+1))
		if _, err := sys.st.EnsureTower(ctx, store.Tower{ID: id, OrganizationID: org, LocationID: loc, Name: fmt.Sprintf("Drill tower %d", t+1),
			SecretSealed: sys.ring.Seal(keyring.TowerSecretPurpose(id), secret)}); err != nil {
			return nil, err
		}
		for k := 1; k <= 100 && len(out) < n; k++ {
			lid, err := sys.st.EnsureLocker(ctx, store.NewLocker{TowerID: id, Name: fmt.Sprint(k), TypeID: typeID})
			if err != nil {
				return nil, err
			}
			out = append(out, towerLocker{towerID: id, id: lid})
		}
	}
	return out, nil
}
