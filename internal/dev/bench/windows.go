package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// windowsResult is the pickup-windows scenario's outcome.
type windowsResult struct {
	Windows  int
	PickupBy time.Time
	// StartsDrainedBefore is how long before PickupBy the last workflow had been started.
	StartsDrainedBefore time.Duration
	// Marked is each window's parcel.overdue event's created_at after PickupBy; Within the
	// number recorded within 1 s; AllMarkedAfter when the last was.
	Marked         summary
	Within         int
	AllMarkedAfter time.Duration
	// Visible is when each mark could be read by another connection (its transaction had
	// committed), polled every 20 ms from before the end: VisibleWithin the marks visible
	// within 1 s, AllVisibleAfter when the last was. A mark's created_at is its transaction's
	// start; this is its commit as a reader sees it.
	Visible         summary
	VisibleWithin   int
	AllVisibleAfter time.Duration
	// Delivered are the distinct events the receiver got, Repeats the deliveries of an id
	// already received; Delivery is created_at → arrival; AllDeliveredAfter the last arrival
	// after PickupBy.
	Delivered, Repeats, Refused int
	Delivery                    summary
	AllDeliveredAfter           time.Duration
}

// runWindows opens n pickup windows on the bench lockers, all ending at the same second, each
// with its pickup-window workflow started as a drop-off's would be, and an
// endpoint of the bench organization for parcel.overdue pointed at a receiver in this process;
// then measures when each window's overdue mark was recorded (its event's created_at) against
// the common end, and when each event was delivered. The windows are made in SQL, on lockers
// that are otherwise free: the scenario measures the windows' timers, steps and events, not
// the drop-offs.
func runWindows(ctx context.Context, b *bench, n int) (windowsResult, error) {
	if err := resetBench(ctx, b.pool, b.data.orgID); err != nil {
		return windowsResult{}, err
	}
	n = min(n, len(b.data.flowLockers))
	rc, err := startReceiver(ctx, b, []string{"parcel.overdue"})
	if err != nil {
		return windowsResult{}, err
	}
	defer rc.close()
	// Aim the end well after the last start: the starts run at 40 to 150 a second here,
	// depending on what else the dev server has in flight; a run whose starts outlast the
	// end measures nothing and is refused below.
	pickupBy := time.Now().Add(time.Duration(float64(n)/25+30) * time.Second).Truncate(time.Second)
	res := windowsResult{Windows: n, PickupBy: pickupBy}
	items, err := openBenchWindows(ctx, b, n, pickupBy)
	if err != nil {
		return res, err
	}
	logf("pickup windows: %d windows end at %s; starting their workflows", n, pickupBy.Format(time.TimeOnly))
	if err := startWindowWorkflows(ctx, b, items); err != nil {
		return res, err
	}
	res.StartsDrainedBefore = time.Until(pickupBy)
	if res.StartsDrainedBefore < 5*time.Second {
		return res, fmt.Errorf("pickup windows: the workflows' starts ended %s before the common end (under 5 s): the run measures the starts, not the end", res.StartsDrainedBefore.Round(time.Second))
	}
	logf("pickup windows: every workflow started %s before the end", res.StartsDrainedBefore.Round(time.Second))

	// Watch the marks become visible until every window is marked (or nothing moved for
	// 2 min), then read when each was recorded.
	if err := watchMarks(ctx, b, &res); err != nil {
		return res, err
	}
	marked, err := readMarks(ctx, b, &res)
	if err != nil {
		return res, err
	}
	logf("pickup windows: %d of %d marked overdue within 1 s of the end (%d visible within 1 s); the last %s after it (visible %s after it)",
		res.Within, n, res.VisibleWithin, res.AllMarkedAfter.Round(time.Millisecond), res.AllVisibleAfter.Round(time.Millisecond))

	// Wait for the deliveries: every event, or nothing new for 2 min.
	if err := waitProgress(ctx, 2*time.Minute, func() (int, bool, error) {
		c := rc.count()
		return c, c >= marked, nil
	}); err != nil {
		return res, err
	}
	rc.mu.Lock()
	res.Delivered, res.Repeats, res.Refused = len(rc.arrived), rc.repeats, rc.refused
	for _, at := range rc.arrived {
		res.AllDeliveredAfter = max(res.AllDeliveredAfter, at.Sub(pickupBy))
	}
	rc.mu.Unlock()
	res.Delivery = rc.latency.summary()
	logf("pickup windows: %d of %d events delivered (%d repeats); the last %s after the end", res.Delivered, marked, res.Repeats,
		res.AllDeliveredAfter.Round(time.Second))
	return res, resetBench(ctx, b.pool, b.data.orgID)
}

// openBenchWindows inserts n open windows on the first n bench lockers, all ending at pickupBy,
// and returns their workflows' starts.
func openBenchWindows(ctx context.Context, b *bench, n int, pickupBy time.Time) ([]store.OutboxItem, error) {
	ids := make([]int64, n)
	for i, l := range b.data.flowLockers[:n] {
		ids[i] = l.ID
	}
	rows, err := b.pool.Query(ctx, `
		INSERT INTO pickup_windows (id, organization_id, location_id, tower_id, locker_id, client_id, dropoff_token_id,
		                            opened_at, pickup_by, window_seconds, reminder_offsets_seconds, max_extensions,
		                            extension_seconds, on_expiry)
		SELECT gen_random_uuid(), k.organization_id, k.location_id, k.tower_id, k.id, $3, gen_random_uuid(),
		       now(), $2, greatest(1, extract(epoch FROM $2 - now())::int), '{}', 0, 0, 'notify'
		FROM lockers k WHERE k.id = ANY($1::bigint[])
		RETURNING id, organization_id, location_id, tower_id, locker_id`, ids, pickupBy, benchClientID)
	if err != nil {
		return nil, fmt.Errorf("open bench windows: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.OutboxItem, error) {
		w := store.PickupWindow{Status: store.WindowOpen, PickupBy: pickupBy}
		err := r.Scan(&w.ID, &w.OrgID, &w.LocationID, &w.TowerID, &w.LockerID)
		return outbox.PickupWindowItem(w, false), err
	})
}

// startWindowWorkflows starts the windows' workflows, 32 at a time, as the outbox's dispatcher
// would start each (a drop-off hands its window's start to the dispatcher right after its
// commit); the outbox's sweep alone starts about 40 a second, too slow to make 10,000 before a
// common end.
func startWindowWorkflows(ctx context.Context, b *bench, items []store.OutboxItem) error {
	if b.temporal == nil {
		return fmt.Errorf("pickup windows: Temporal cannot be reached")
	}
	var failed atomic.Int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := b.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: it.WorkflowID, TaskQueue: b.cfg.TaskQueue,
				WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				TypedSearchAttributes:    contract.KeywordAttributes(it.SearchAttributes)}, it.WorkflowType, it.Input)
			if err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("pickup windows: %d of %d workflow starts failed", f, len(items))
	}
	return nil
}

// waitProgress polls read until it says done, ctx ends, or its progress figure stayed the same
// for idle.
func waitProgress(ctx context.Context, idle time.Duration, read func() (progress int, done bool, err error)) error {
	last, lastProgress := time.Now(), 0
	for first := true; ; first = false {
		progress, done, err := read()
		if err != nil || done || ctx.Err() != nil {
			return err
		}
		if first || progress != lastProgress {
			last, lastProgress = time.Now(), progress
		}
		if time.Since(last) > idle {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watchMarks polls the bench windows still open every 20 ms from half a second before the end
// until none is (or the count stayed the same for 2 min), and puts into res when each mark
// was first seen: the k-th window counts as visible at the first poll that found k marked.
func watchMarks(ctx context.Context, b *bench, res *windowsResult) error {
	time.Sleep(time.Until(res.PickupBy.Add(-500 * time.Millisecond)))
	vis := newSample("overdue mark visible after the end")
	seen, last := 0, time.Now()
	for seen < res.Windows && time.Since(last) < 2*time.Minute {
		var left int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pickup_windows WHERE organization_id = $1 AND status = 'open'`,
			b.data.orgID).Scan(&left); err != nil {
			return fmt.Errorf("pickup windows: count open: %w", err)
		}
		at := time.Since(res.PickupBy)
		for ; seen < res.Windows-left; seen++ {
			vis.add(max(at, 0))
			if at <= time.Second {
				res.VisibleWithin++
			}
			res.AllVisibleAfter, last = at, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range res.Windows - seen {
		vis.fail()
	}
	res.Visible = vis.summary()
	return ctx.Err()
}

// readMarks reads the bench windows' parcel.overdue events into res (each one's lag after the
// end) and returns how many there are.
func readMarks(ctx context.Context, b *bench, res *windowsResult) (int, error) {
	rows, err := b.pool.Query(ctx, `
		SELECT e.created_at FROM webhook_events e
		WHERE e.organization_id = $1 AND e.type = 'parcel.overdue' AND e.created_at >= $2::timestamptz - interval '1 minute'`,
		b.data.orgID, res.PickupBy)
	if err != nil {
		return 0, err
	}
	ats, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return 0, err
	}
	marks := newSample("overdue mark recorded after the end")
	for _, at := range ats {
		lag := at.Sub(res.PickupBy)
		marks.add(lag)
		if lag <= time.Second {
			res.Within++
		}
		res.AllMarkedAfter = max(res.AllMarkedAfter, lag)
	}
	for range res.Windows - len(ats) {
		marks.fail()
	}
	res.Marked = marks.summary()
	return len(ats), nil
}

func (r *windowsResult) markdown(w writer) {
	w("### Pickup windows: %d running out together", r.Windows)
	w("")
	w("%d pickup windows on bench lockers, all ending at %s, each with its `pickup-window/<id>` workflow started by the load tool as the outbox's dispatcher starts one "+
		"(the last started %s before the end), and an endpoint for `parcel.overdue` pointed at a receiver on this machine. "+
		"A window is marked by the worker's due pass (`pickup_due`: every 250 ms, and at the end itself when one comes within the interval; "+
		"batches of 2,500 in 4 transactions at once, the deliveries started after the round's last commit) or by its workflow's "+
		"timer and step, 2 s after the end (`store.EndBackstop`), whichever comes first, with its event in the same transaction; the lag is the event's `created_at` (its transaction's start) after the end, "+
		"and the mark's visibility to another connection (its commit), polled every 20 ms. "+
		"Every event is delivered by its own `webhook-delivery` workflow, while the %d window workflows' timers fire too (each finds its mark made):",
		r.Windows, r.PickupBy.UTC().Format(time.TimeOnly), r.StartsDrainedBefore.Round(time.Second), r.Windows)
	w("")
	w(summaryHeader)
	w(r.Marked.row())
	w(r.Visible.row())
	w(r.Delivery.row())
	w("")
	w("Target: each marked within 1 s of its end: %d of %d recorded (%s), %d of %d visible (%s); the last recorded %s, visible %s after the end. "+
		"Every event delivered once: %d of %d delivered, %d repeats, %d refused signatures (%s); the last delivery %s after the end.",
		r.Within, r.Windows, verdict(r.Within >= r.Windows), r.VisibleWithin, r.Windows, verdict(r.VisibleWithin >= r.Windows),
		r.AllMarkedAfter.Round(time.Millisecond), r.AllVisibleAfter.Round(time.Millisecond),
		r.Delivered, r.Marked.Count, r.Repeats, r.Refused, verdict(r.Delivered == r.Windows && r.Repeats == 0), r.AllDeliveredAfter.Round(time.Second))
	w("")
}
