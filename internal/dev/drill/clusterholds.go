package drill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/lockernet/lockernet/workflows/contract"
)

// clusterShape is the one cluster-shape system the cluster drills share, started by the
// first of them and used by the next in turn (its start-up is the slow part).
type clusterShape struct {
	o   options
	sys *system
}

// system returns the running cluster shape, starting it if needed; a failure to start is
// recorded in r.
func (c *clusterShape) system(ctx context.Context, r *result) *system {
	if c.sys != nil {
		return c.sys
	}
	t := time.Now()
	logf("  starting the cluster shape (bin/dev/devstack -cluster)")
	sys, err := newClusterSystem(ctx, c.o)
	if err != nil {
		r.err = fmt.Errorf("start the cluster shape: %w", err)
		return nil
	}
	r.figure("Cluster shape started (for this and the next cluster drills)", "%s (Temporal's schema, the Temporal server, "+
		"2 apiservers, 2 workers, nginx, 2 gateways, the tower simulator; logs %s)", secs(time.Since(t)), sys.cluster.stack.logPath)
	c.sys = sys
	return sys
}

// release is called after each cluster drill: a system left with a child down is not
// trusted to the next drill, which starts a fresh one.
func (c *clusterShape) release() {
	if c.sys != nil && len(c.sys.notRunning()) > 0 {
		c.close()
	}
}

func (c *clusterShape) close() {
	if c.sys != nil {
		c.sys.close()
		c.sys = nil
	}
}

// holdHistory is what one hold's workflow did, read from its history.
type holdHistory struct {
	found       bool
	runs        int // executions of the workflow id
	completed   int // WorkflowExecutionCompleted events
	closedOther bool
	fires       int       // TimerFired events (none when its first task ran after the expiry: no wait)
	expiryAt    time.Time // the expiry activity first scheduled
	expiryRuns  int       // expiry activities completed
	attempts    int       // the expiry activity's last attempt
}

// expiryActivity is the activity a hold's workflow runs when its timer fires.
var expiryActivity = map[string]string{"reservation": "ExpireReservation", "dropoff-token": "ExpireToken"}

// checkTimersOnce checks the holds of calls once every one has expired: each expired hold
// was released by its own workflow, whose durable timer fired at most once and whose expiry
// activity completed exactly once, in the one run of that workflow, which completed; no
// hold is still active and no locker stranded. phase names when a hold came due relative to
// the fault, for the lateness figures (expiry activity scheduled − expiry).
func checkTimersOnce(ctx context.Context, r *result, sys *system, calls []towerCall, phase func(due time.Time) string) error {
	var holds []*timedHold
	ids := map[string][]string{}
	for _, c := range calls {
		if !c.ok() {
			continue
		}
		holds = append(holds, &timedHold{call: c, wfID: holdWorkflowID(c.kind, c.id)})
		ids[c.kind] = append(ids[c.kind], c.id)
	}
	if err := readTimedHolds(ctx, sys, holds, ids); err != nil {
		return err
	}
	byKind, late, phases := tallyTimedHolds(holds, phase)
	reportTimedHolds(r, byKind, late, phases)
	var stranded int
	if err := sys.st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM lockers WHERE status IN (2, 3, 5) AND hold_expires_at < now() - interval '10 seconds'`).Scan(&stranded); err != nil {
		return fmt.Errorf("count stranded lockers: %w", err)
	}
	r.verify(stranded == 0, "no locker stranded (reserved, rented or declined 10 s past its expiry)", "%d stranded", stranded)
	return nil
}

// timedHold is one hold of checkTimersOnce: the call that made it, its workflow's id and
// history, and its row's status now.
type timedHold struct {
	call towerCall
	wfID string
	h    holdHistory
	row  string
}

// readTimedHolds reads each hold's row (ids: the holds' ids by kind), the runs of its
// workflow id from Temporal's own executions table, and its workflow's history.
func readTimedHolds(ctx context.Context, sys *system, holds []*timedHold, ids map[string][]string) error {
	// Rows.
	rows := map[string]string{}
	for kind, table := range map[string]string{"reservation": "reservations", "dropoff-token": "locker_tokens"} {
		rs, err := sys.st.Pool().Query(ctx, `SELECT id::text, status FROM `+table+` WHERE id::text = ANY($1)`, ids[kind])
		if err != nil {
			return fmt.Errorf("read %s: %w", table, err)
		}
		for rs.Next() {
			var id, st string
			if err := rs.Scan(&id, &st); err != nil {
				rs.Close()
				return err
			}
			rows[kind+"/"+id] = st
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
	}
	// Runs of each workflow id, from Temporal's own executions table: a hold's workflow
	// started twice (a start sent again after Temporal came back) would show as two.
	runs := map[string]int{}
	wfIDs := make([]string, len(holds))
	for i, h := range holds {
		wfIDs[i] = h.wfID
	}
	conn, err := pgx.Connect(ctx, sys.cluster.temporalDB)
	if err != nil {
		return fmt.Errorf("connect to Temporal's database: %w", err)
	}
	rs, err := conn.Query(ctx, `SELECT workflow_id, count(*) FROM executions WHERE workflow_id = ANY($1) GROUP BY workflow_id`, wfIDs)
	if err != nil {
		conn.Close(ctx)
		return fmt.Errorf("count workflow runs: %w", err)
	}
	for rs.Next() {
		var id string
		var n int
		if err := rs.Scan(&id, &n); err != nil {
			rs.Close()
			conn.Close(ctx)
			return err
		}
		runs[id] = n
	}
	rs.Close()
	conn.Close(ctx)

	var mu sync.Mutex
	var histErr error
	parallel(len(holds), 8, func(i int) {
		h := holds[i]
		hh, err := readHoldHistory(ctx, sys, h.wfID, expiryActivity[h.call.kind])
		mu.Lock()
		defer mu.Unlock()
		if err != nil && histErr == nil {
			histErr = err
		}
		h.h = hh
		h.h.runs = runs[h.wfID]
		h.row = rows[h.call.kind+"/"+h.call.id]
	})
	return histErr
}

// holdTally counts one kind of hold by what its row and its workflow's history show.
type holdTally struct {
	n, missing, active, noWF, runsOff, notCompleted, firedTwice, expiryTwice, expiredNoActivity, retried, startedLate, early int
	statuses                                                                                                                 map[string]int
}

// tallyTimedHolds counts the holds by kind and gathers the lateness of the expired ones by
// phase (when each came due relative to the fault), the phases in the order first seen.
func tallyTimedHolds(holds []*timedHold, phase func(due time.Time) string) (byKind map[string]*holdTally, late map[string][]time.Duration, phases []string) {
	byKind = map[string]*holdTally{}
	late = map[string][]time.Duration{}
	for _, h := range holds {
		t := byKind[h.call.kind]
		if t == nil {
			t = &holdTally{statuses: map[string]int{}}
			byKind[h.call.kind] = t
		}
		t.n++
		t.statuses[h.row]++
		switch {
		case h.row == "":
			t.missing++
		case h.row == "active":
			t.active++
		}
		switch {
		case !h.h.found:
			t.noWF++
			continue
		case h.h.runs != 1:
			t.runsOff++
		}
		if h.h.completed != 1 || h.h.closedOther {
			t.notCompleted++
		}
		if h.h.fires > 1 {
			t.firedTwice++
		}
		if h.h.expiryRuns > 1 {
			t.expiryTwice++
		}
		if h.row == "expired" && h.h.expiryRuns != 1 {
			t.expiredNoActivity++
		}
		if h.h.attempts > 1 {
			t.retried++
		}
		if h.h.fires == 0 && !h.h.expiryAt.IsZero() && !h.h.expiryAt.Before(h.call.expires) {
			t.startedLate++
		}
		if !h.h.expiryAt.IsZero() && h.h.expiryAt.Before(h.call.expires) {
			t.early++
		}
		if h.row == "expired" && !h.h.expiryAt.IsZero() {
			p := phase(h.call.expires)
			if _, ok := late[p]; !ok {
				phases = append(phases, p)
			}
			late[p] = append(late[p], h.h.expiryAt.Sub(h.call.expires))
		}
	}
	return byKind, late, phases
}

// reportTimedHolds reports and checks each kind's tally, then the lateness by phase.
func reportTimedHolds(r *result, byKind map[string]*holdTally, late map[string][]time.Duration, phases []string) {
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		t := byKind[kind]
		r.figure(fmt.Sprintf("%ss answered 201", kind), "%d; now %s; %d whose workflow's first task ran after the expiry (no timer to wait for); "+
			"%d whose expiry activity needed more than one attempt", t.n, counts(t.statuses), t.startedLate, t.retried)
		r.verify(t.missing == 0, fmt.Sprintf("every %s answered 201 exists in Postgres", kind), "%d missing", t.missing)
		r.verify(t.active == 0, fmt.Sprintf("no %s is still active after its expiry", kind), "%d are", t.active)
		r.verify(t.noWF == 0, fmt.Sprintf("every %s answered 201 has its workflow", kind), "%d have none", t.noWF)
		r.verify(t.runsOff == 0, fmt.Sprintf("each %s's workflow ran once (one execution of its workflow id)", kind), "%d did not", t.runsOff)
		r.verify(t.notCompleted == 0, fmt.Sprintf("each %s's workflow completed, once", kind), "%d did not", t.notCompleted)
		r.verify(t.firedTwice == 0 && t.expiryTwice == 0, fmt.Sprintf("no %s's timer fired twice nor its expiry ran twice", kind),
			"%d timers fired twice, %d expiries ran twice", t.firedTwice, t.expiryTwice)
		r.verify(t.expiredNoActivity == 0, fmt.Sprintf("every expired %s was expired by its own workflow's expiry activity, once", kind),
			"%d were not", t.expiredNoActivity)
		r.observe(t.early == 0, fmt.Sprintf("no %s's workflow ran its expiry activity before the expiry", kind),
			"%d did (each found the %s no longer active and changed nothing)", t.early, kind)
	}
	if t := byKind["reservation"]; t != nil && t.early > 0 {
		r.note("%d consumed reservations had their workflow run its expiry activity at once, before the reservation's expiry. "+
			"The drop-off token that consumes a reservation signals its workflow with signal-with-start (apiserver/tower_tokens.go, "+
			"`outbox.ReservationItem` built from a reservation without `ExpiresAt`); when that outbox item reaches Temporal "+
			"before the reservation's own start item, the workflow starts with a zero expiry, its timer is due at once, and "+
			"it ends as expired instead of consumed. The expiry activity finds the reservation consumed and changes nothing, "+
			"so no locker is freed early and nothing is doubled; only the workflow's recorded outcome is wrong.", t.early)
	}
	sort.Strings(phases)
	for _, p := range phases {
		r.figure("Expired holds: expiry activity scheduled − expiry, "+p, "%s", durations(late[p]))
	}
}

// readHoldHistory reads what a hold's workflow did from its history.
func readHoldHistory(ctx context.Context, sys *system, wfID, activity string) (holdHistory, error) {
	var h holdHistory
	it := sys.tc.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	expiry := map[int64]bool{}
	for it.HasNext() {
		ev, err := it.Next()
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return h, nil
		}
		if err != nil {
			return h, fmt.Errorf("read the history of %s: %w", wfID, err)
		}
		h.found = true
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			h.fires++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activity {
				expiry[ev.GetEventId()] = true
				if h.expiryAt.IsZero() {
					h.expiryAt = ev.GetEventTime().AsTime()
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); expiry[a.GetScheduledEventId()] {
				h.attempts = int(a.GetAttempt())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if expiry[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				h.expiryRuns++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			h.completed++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			h.closedOther = true
		}
	}
	return h, nil
}

// waitPast sleeps until t; false if ctx ended first.
func waitPast(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// waitHoldsExpired waits until every hold of calls answered 201 is 15 s past its expiry:
// well inside the sweeper's 60 s grace, so what released a hold by then was its workflow.
func waitHoldsExpired(ctx context.Context, calls []towerCall) error {
	settleAt := latestExpiry(calls).Add(15 * time.Second)
	logf("  waiting %s for every hold to expire", secs(time.Until(settleAt)))
	if !waitPast(ctx, settleAt) {
		return ctx.Err()
	}
	return nil
}

// holdWorkflowID is the id of the workflow of a hold (kind reservation or dropoff-token).
func holdWorkflowID(kind, id string) string {
	if kind == "dropoff-token" {
		return contract.LockerTokenWorkflowID(id)
	}
	return contract.ReservationWorkflowID(id)
}

// latestExpiry is the latest expiry of the holds answered 201.
func latestExpiry(calls []towerCall) time.Time {
	var ts []time.Time
	for _, c := range calls {
		if c.ok() {
			ts = append(ts, c.expires)
		}
	}
	return latest(ts)
}

// settleHolds waits until every tower hold of calls is past its expiry (plus 15 s), then
// checks that each was released by its own workflow's timer exactly once, reporting the holds
// by when they fell due: before the fault (event, at from), while it lasted (subject, until to;
// a zero to means it never came back) or after.
func settleHolds(ctx context.Context, r *result, sys *system, calls []towerCall, from, to time.Time, event, subject string) error {
	if err := waitHoldsExpired(ctx, calls); err != nil {
		return err
	}
	return checkTimersOnce(ctx, r, sys, calls, func(due time.Time) string {
		switch {
		case due.Before(from):
			return "holds due before " + event
		case to.IsZero() || due.Before(to):
			return "holds due while " + subject + " down"
		default:
			return "holds due after " + subject + " back"
		}
	})
}
