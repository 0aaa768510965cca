package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/lockernet/lockernet/internal/dev/devtemporal"
	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/workflows/contract"
)

// drillRestore: tower flows and gateway opens run; the whole system is backed up twice with
// lockernet-admin backup while they do, they go on a while, the system is stopped, restored
// with lockernet-admin restore (the first backup's Temporal state, the second's database) and
// started again. What was made before the database's backup must be held and expire on
// time, re-armed where Temporal's state lacks its workflow; what was made after it must be
// gone, its locker free; no door may move twice.
func drillRestore(ctx context.Context, o options) (r *result) {
	r = newResult("restore", "back up, keep loading, stop, restore, start")
	r.what = fmt.Sprintf("An open-loop load runs %.0f tower flows a second (a reservation of %s on a tower locker of its own, then, "+
		"for every other flow, a drop-off token of %s on it) and %.0f gateway locker opens a second (each on a locker of its "+
		"own, with an `Idempotency-Key` and `Prefer: wait=10`, sent again with the same key until it has a terminal answer). "+
		"%s into the load `lockernet-admin backup` copies the embedded Temporal server's SQLite files (`VACUUM INTO`) and then "+
		"dumps the application's database (`pg_dump` from an exported snapshot); %s later it takes a second backup; the load "+
		"goes on until %s after the first and ends with every open answered. Then the apiserver, the worker and the Temporal "+
		"server are stopped (the simulated gateways, the hardware, keep running and keep counting their door actuations), "+
		"and `lockernet-admin restore` puts back the first backup's Temporal files with the second backup's database — "+
		"Temporal's state older than the database's, as when each is backed up on its own schedule, so the holds made between "+
		"the two have rows but no workflows — and re-arms the workflows of the active rows through the outbox; everything is "+
		"started again. The drill checks each hold against the two backups, probes every locker taken after the second with "+
		"a new reservation, waits until every hold kept has expired (plus 15 s, inside the sweeper's 60 s grace, so expiry by "+
		"the workflows is what is checked) and counts every door's actuations.",
		o.rsFlowRate, human(o.rsHold), human(o.rsHold), o.rsOpenRate, human(o.rsBefore), human(o.rsGap), human(o.rsAfter))
	sys := start(ctx, r, o, nil)
	if sys == nil {
		return r
	}
	defer sys.done(r)

	n := int((o.rsBefore+o.rsAfter).Seconds()*o.rsFlowRate) + 10
	load, c, baseline, pool, err := startLoad(ctx, sys, n, o.rsHold)
	if err != nil {
		r.err = err
		return r
	}
	bins, err := findBinaries(o.binDir)
	if err != nil {
		r.err = err
		return r
	}
	admin := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bins, "lockernet-admin"), args...)
		cmd.Env = append(os.Environ(), sys.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("lockernet-admin %s: %w: %s", args[0], err, loadclient.Excerpt(out))
		}
		return string(out), nil
	}
	backupDir := filepath.Join(sys.dir, "backup")
	temporalFile := filepath.Join(sys.dir, "temporal.db")

	var (
		mu        sync.Mutex
		calls     []towerCall
		nextFlow  atomic.Int64
		backupErr error
		bm1, bm2  backupTimes
	)
	lctx, lcancel := context.WithTimeout(ctx, o.rsBefore+o.rsAfter+o.settleLimit)
	defer lcancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-lctx.Done():
			return
		case <-time.After(o.rsBefore):
		}
		take := func(dir string) (backupTimes, error) {
			logf("  backing up into %s", dir)
			var t backupTimes
			if _, err := admin("backup", "-out", dir, "-temporal-sqlite", temporalFile); err != nil {
				return t, err
			}
			raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err == nil {
				err = json.Unmarshal(raw, &t)
			}
			return t, err
		}
		if bm1, backupErr = take(backupDir + "-1"); backupErr != nil {
			return
		}
		if !waitPast(lctx, bm1.TemporalTakenAt.Add(o.rsGap)) {
			return
		}
		if bm2, backupErr = take(backupDir + "-2"); backupErr != nil {
			return
		}
		// The backup restored: the first one's Temporal files with the second one's database.
		backupErr = mixBackups(backupDir+"-1", backupDir+"-2", backupDir)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		loadclient.OpenLoop(lctx, o.rsFlowRate, o.rsBefore+o.rsAfter, 0, func(ctx context.Context, _ int, _ time.Time) {
			load.flowOnce(ctx, int(nextFlow.Add(1))-1, func(c towerCall) {
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			})
		})
	}()
	var gl openLoad
	wg.Add(1)
	go func() {
		defer wg.Done()
		gl.run(lctx, c, pool, o.rsOpenRate, o.rsBefore+o.rsAfter)
	}()
	wg.Wait()
	if backupErr != nil {
		r.verify(false, "lockernet-admin backup succeeds under load", "%v", backupErr)
		r.err = backupErr
		return r
	}
	if gl.err != nil {
		r.err = gl.err
		return r
	}
	for i, bm := range []backupTimes{bm1, bm2} {
		r.figure(fmt.Sprintf("Backup %d under load", i+1), "%s (Temporal's files copied in %s, then the database dumped in %s)",
			secs(bm.FinishedAt.Sub(bm.TemporalTakenAt)), secs(bm.AppTakenAt.Sub(bm.TemporalTakenAt)), secs(bm.FinishedAt.Sub(bm.AppTakenAt)))
	}
	r.figure("Restored", "Temporal's files of backup 1 with the database of backup 2, taken %s later", secs(bm2.AppTakenAt.Sub(bm1.AppTakenAt)))

	// Stop, restore, start.
	tStop := time.Now()
	sys.api.stop(10 * time.Second)
	sys.worker.stop(10 * time.Second)
	sys.tc.Close()
	sys.tc = nil
	if err := sys.temporal.Stop(); err != nil {
		logf("  stop temporal: %v", err)
	}
	sys.temporal = nil
	sys.st.Close()
	sys.st = nil
	tRestore := time.Now()
	// Restored beside the old file, not over it: the Temporal server's SQLite plugin keeps its
	// connection to a file for the life of the process (its pool never closes one), and the
	// drill's server runs in this process, so a server started again on the same path would
	// read the old file through it. make run, one process, starts again on the path itself.
	restoredFile := filepath.Join(sys.dir, "temporal-restored.db")
	restoreOut, err := admin("restore", "-from", backupDir, "-temporal-sqlite", restoredFile)
	if err != nil {
		r.verify(false, "lockernet-admin restore succeeds", "%v", err)
		r.err = err
		return r
	}
	tStart := time.Now()
	// Between Temporal's start and the apiserver's, the rows the restore re-armed whose
	// workflow the restored Temporal state lacks: the outbox starts those.
	missing := -1
	countMissing := func() error {
		var err error
		missing, err = sys.activeWithoutWorkflow(ctx)
		return err
	}
	if err := sys.restartAfterRestore(ctx, restoredFile, countMissing); err != nil {
		r.err = fmt.Errorf("start after the restore: %w", err)
		return r
	}
	tUp := time.Now()
	rearmed := regexp.MustCompile(`re-armed .*`).FindString(restoreOut)
	r.figure("Stopped → restored → started", "%s in all: stop %s, restore %s (%s), start %s",
		secs(tUp.Sub(tStop)), secs(tRestore.Sub(tStop)), secs(tStart.Sub(tRestore)), orNone(rearmed), secs(tUp.Sub(tStart)))
	r.figure("Active reservations and tokens in the restored database without their workflow in the restored Temporal state", "%d (the outbox started them)", missing)
	waitOutboxDrained(ctx, r, sys, o.settleLimit, "the workflow outbox drains after the restore (the re-armed workflows started)")

	// Each hold against the backups: made before the first (answered before its Temporal copy
	// began: row and workflow restored), between the two (asked for after the first's
	// database snapshot, answered before the second's: the row restored, its workflow not —
	// the restore re-arms it), after the second (asked for after its snapshot: gone), or
	// while one ran.
	var before, gap, after []towerCall
	var during, fivexx int
	kinds := map[string]int{}
	for _, call := range calls {
		if call.status >= 500 {
			fivexx++
		}
		if !call.ok() {
			kinds[call.kind+" failed"]++
			continue
		}
		switch {
		case call.end.Before(bm1.TemporalTakenAt):
			before = append(before, call)
			kinds[call.kind+" before backup 1"]++
		case call.start.After(bm1.AppTakenAt) && call.end.Before(bm2.TemporalTakenAt):
			gap = append(gap, call)
			kinds[call.kind+" between the backups"]++
		case call.start.After(bm2.AppTakenAt):
			after = append(after, call)
			kinds[call.kind+" after backup 2"]++
		default:
			during++
			kinds[call.kind+" during a backup"]++
		}
	}
	r.figure("Tower API holds", "%s", counts(kinds))
	r.verify(fivexx == 0, "no tower API call answered 5xx", "%d did", fivexx)

	// Made before: still held now, each with its workflow.
	// A locker's hold is its latest one made before the backup: a drop-off token consumes
	// the reservation before it. Lockers with a hold answered during the backup are left out.
	heldNow, notHeld, running, noRun, rearmedHeld := 0, 0, 0, 0, 0
	latestBefore := map[string]towerCall{}
	inGap := map[string]bool{}
	duringLocker := map[string]bool{}
	for _, call := range calls {
		if !call.ok() {
			continue
		}
		switch {
		case call.end.Before(bm1.TemporalTakenAt):
			latestBefore[call.locker] = call // calls are in the order they were answered per locker
		case call.start.After(bm1.AppTakenAt) && call.end.Before(bm2.TemporalTakenAt):
			latestBefore[call.locker] = call
			inGap[call.id] = true
		case !call.start.After(bm2.AppTakenAt):
			duringLocker[call.locker] = true
		}
	}
	var pending []towerCall
	for locker, call := range latestBefore {
		if !duringLocker[locker] && time.Until(call.expires) > 5*time.Second {
			pending = append(pending, call)
		}
	}
	for _, call := range pending {
		table, wfID := "reservations", contract.ReservationWorkflowID(call.id)
		if call.kind == "dropoff-token" {
			table, wfID = "locker_tokens", contract.LockerTokenWorkflowID(call.id)
		}
		var held bool
		err := sys.st.Pool().QueryRow(ctx, `
			SELECT t.status = 'active' AND locker_status(k.status, k.hold_expires_at) <> 1
			FROM `+table+` t JOIN lockers k ON k.id = t.locker_id WHERE t.id = $1`, call.id).Scan(&held)
		if err == nil && held {
			heldNow++
			if inGap[call.id] {
				rearmedHeld++
			}
		} else {
			notHeld++
		}
		d, err := sys.tc.DescribeWorkflowExecution(ctx, wfID, "")
		if err == nil && d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			running++
		} else {
			noRun++
		}
	}
	r.figure("Holds made before backup 2's database snapshot (each locker's latest) and not yet expired after the start",
		"%d: %d held with their locker (%d of them made between the backups, their workflows re-armed), %d with a running workflow",
		len(pending), heldNow, rearmedHeld, running)
	r.verify(notHeld == 0, "every hold made before the database's backup is held after the restore", "%d are not", notHeld)
	r.verify(noRun == 0, "every hold made before the database's backup has its running workflow after the restore", "%d have none", noRun)

	// Made after: gone, and the locker takes a new reservation.
	gone, present, free, refused := 0, 0, 0, 0
	for _, call := range after {
		table := "reservations"
		if call.kind == "dropoff-token" {
			table = "locker_tokens"
		}
		var exists bool
		if err := sys.st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1)`, call.id).Scan(&exists); err != nil {
			r.err = err
			return r
		}
		if exists {
			present++
		} else {
			gone++
		}
	}
	var probeMu sync.Mutex
	var probes []towerCall
	afterLockers := lockersOf(after)
	parallel(len(afterLockers), 8, func(i int) {
		p := postTower(ctx, load.tower, "reservation", afterLockers[i]+"reservations", map[string]any{"duration": 30})
		probeMu.Lock()
		probes = append(probes, p)
		probeMu.Unlock()
	})
	for _, p := range probes {
		if p.ok() {
			free++
		} else {
			refused++
			if p.status >= 500 {
				fivexx++
			}
			logf("  probe of a locker taken after the backup: %s", p.err)
		}
	}
	r.figure("Holds made after backup 2", "%d: %d gone after the restore; their %d lockers: %d took a new reservation, %d refused",
		len(after), gone, len(afterLockers), free, refused)
	r.verify(present == 0, "every hold made after the database's backup is gone after the restore", "%d are still there", present)
	r.verify(refused == 0, "every locker taken after the database's backup is free again (a new reservation is answered 201)", "%d refused", refused)
	r.verify(fivexx == 0, "no tower API call after the restore answered 5xx", "%d did", fivexx)

	// Doors: every open of both phases moved its door once, none twice, none again after the restore.
	time.Sleep(2 * time.Second)
	tl := tallyOutcomes(gl.outs)
	r.lost = tl.lost
	r.figure("Gateway opens", "%d sent (before, between and after the backups); answers: %s", len(gl.outs), counts(tl.states))
	r.verify(tl.lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", tl.lost, len(gl.outs))
	if err := checkDoors(ctx, r, sys, baseline, openAnswers(gl.outs, gl.targets), doorsNotCompleted); err != nil {
		r.err = err
		return r
	}

	// The holds made before the database's backup expire on time, by their workflows.
	kept := append(append([]towerCall{}, before...), gap...)
	if len(kept) > 0 {
		settleAt := latestExpiry(append(append([]towerCall{}, kept...), probes...)).Add(15 * time.Second)
		logf("  waiting %s for every hold to expire", secs(time.Until(settleAt)))
		if !waitPast(ctx, settleAt) {
			r.err = ctx.Err()
			return r
		}
		var late []time.Duration
		for _, call := range pending {
			wfID := contract.ReservationWorkflowID(call.id)
			if call.kind == "dropoff-token" {
				wfID = contract.LockerTokenWorkflowID(call.id)
			}
			d, err := sys.tc.DescribeWorkflowExecution(ctx, wfID, "")
			if err == nil && d.WorkflowExecutionInfo.GetCloseTime() != nil {
				late = append(late, d.WorkflowExecutionInfo.GetCloseTime().AsTime().Sub(call.expires))
			}
		}
		r.figure("Holds made before the database's backup: workflow closed → after its expiry", "%s", durations(late))
		if err := checkHolds(ctx, r, sys, append(append([]towerCall{}, kept...), probes...)); err != nil {
			r.err = err
			return r
		}
		sweeps := sys.worker.logCount("sweeper released lapsed holds")
		r.observe(sweeps == 0, "the sweeper had nothing to release (the workflows did it)", "%d sweeps released something", sweeps)
	}
	if during > 0 {
		r.note("%d holds were answered while a backup ran (between a Temporal copy's start and its database snapshot): "+
			"each is either in the restored database, with its workflow re-armed, or not; the checks above leave them out.", during)
	}
	return r
}

// backupTimes are the moments a backup's manifest records.
type backupTimes struct {
	TemporalTakenAt, AppTakenAt, FinishedAt time.Time
}

// mixBackups makes dst a backup of temporalDir's Temporal files and appDir's database, its
// manifest with appDir's moments: Temporal's state older than the database's, as when the two
// are backed up on their own schedules.
func mixBackups(temporalDir, appDir, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	var mt, ma map[string]any
	for dir, m := range map[string]*map[string]any{temporalDir: &mt, appDir: &ma} {
		raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, m); err != nil {
			return err
		}
	}
	mt["appTakenAt"], mt["finishedAt"] = ma["appTakenAt"], ma["finishedAt"]
	raw, _ := json.MarshalIndent(mt, "", "  ")
	if err := os.WriteFile(filepath.Join(dst, "manifest.json"), raw, 0o600); err != nil {
		return err
	}
	for name, dir := range map[string]string{"temporal.db": temporalDir, "temporal-visibility.db": temporalDir, "app.dump": appDir} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// lockersOf is the tower API path of the locker of each reservation of holds.
func lockersOf(holds []towerCall) []string {
	var out []string
	for _, h := range holds {
		if h.kind == "reservation" && h.locker != "" {
			out = append(out, h.locker)
		}
	}
	return out
}

// restartAfterRestore starts the embedded Temporal server again on its (restored) file and
// port, reconnects, and starts the apiserver and the worker.
func (s *system) restartAfterRestore(ctx context.Context, temporalFile string, beforeServices func() error) error {
	_, portStr, _ := net.SplitHostPort(s.env0("TEMPORAL_ADDRESS"))
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("temporal port: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(discardWriter{}, nil))
	var startErr error
	if _, ok := waitFor(ctx, 30*time.Second, 500*time.Millisecond, func() bool {
		s.temporal, startErr = devtemporal.Start(devtemporal.Options{
			DBPath: temporalFile, IP: "127.0.0.1", Port: port, Namespace: "default",
			SearchAttributes: contract.SearchAttributeNames, LogFile: filepath.Join(s.dir, "logs", "temporal.log"),
		})
		return startErr == nil
	}); !ok {
		return fmt.Errorf("start temporal: %w", startErr)
	}
	if s.tc, err = temporalclient.Dial(ctx, s.temporal.Address(), "default", quiet); err != nil {
		return err
	}
	if s.st, err = store.Open(ctx, s.dbURL, store.Options{MaxConns: 6, AppName: "lockernet-drill"}); err != nil {
		return err
	}
	if err := beforeServices(); err != nil {
		return err
	}
	for _, p := range []*proc{s.api, s.worker} {
		if err := p.start(ctx, 90*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// activeWithoutWorkflow counts the active reservations and tokens whose workflow Temporal
// does not have.
func (s *system) activeWithoutWorkflow(ctx context.Context) (int, error) {
	rows, err := s.st.Pool().Query(ctx, `
		SELECT 'reservation/' || id FROM reservations WHERE status = 'active'
		UNION ALL SELECT 'locker-token/' || id FROM locker_tokens WHERE status = 'active'`)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	var n int
	var mu sync.Mutex
	var firstErr error
	parallel(len(ids), 8, func(i int) {
		_, err := s.tc.DescribeWorkflowExecution(ctx, ids[i], "")
		var nf *serviceerror.NotFound
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.As(err, &nf):
			n++
		case err != nil && firstErr == nil:
			firstErr = err
		}
	})
	return n, firstErr
}

// env0 is the value of one of the service processes' settings.
func (s *system) env0(name string) string {
	for _, kv := range s.env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			return kv[len(name)+1:]
		}
	}
	return ""
}
