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
	d := &restoreDrill{underLoad: underLoad{o: o, r: r, sys: sys}}
	runPhases(ctx, r,
		phase{"load", d.startLoad},
		phase{"back up twice under load", d.backUpUnderLoad},
		phase{"stop, restore, start", d.stopRestoreStart},
		phase{"sort the holds by the backups", d.sortHolds},
		phase{"check the holds made before the database's backup", d.checkKept},
		phase{"check the holds made after it", d.checkGone},
		phase{"check the doors", d.checkDoors},
		phase{"check the expiries", d.checkExpiries},
	)
	return r
}

// restoreDrill is what one phase of the restore drill leaves for the next.
type restoreDrill struct {
	underLoad
	bins     string
	bm1, bm2 backupTimes

	before, gap, after []towerCall // holds by when they were made against the backups
	during, fivexx     int         // holds made while a backup ran; tower calls answered 5xx
	pending            []towerCall // holds made before the database's backup, not yet expired
	probes             []towerCall // new reservations on the lockers of the holds made after it
}

// admin runs lockernet-admin with the system's settings and returns what it printed.
func (d *restoreDrill) admin(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.bins, "lockernet-admin"), args...)
	cmd.Env = append(os.Environ(), d.sys.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("lockernet-admin %s: %w: %s", args[0], err, loadclient.Excerpt(out))
	}
	return string(out), nil
}

func (d *restoreDrill) backupDir() string { return filepath.Join(d.sys.dir, "backup") }

// startLoad makes the lockers, clients and baseline of the load and finds lockernet-admin.
func (d *restoreDrill) startLoad(ctx context.Context) error {
	n := int((d.o.rsBefore+d.o.rsAfter).Seconds()*d.o.rsFlowRate) + 10
	if err := d.underLoad.startLoad(ctx, n, d.o.rsHold); err != nil {
		return err
	}
	var err error
	d.bins, err = findBinaries(d.o.binDir)
	return err
}

// backUpUnderLoad runs the tower flows and the gateway opens and, while they run, takes the
// two backups and mixes them into the one restored.
func (d *restoreDrill) backUpUnderLoad(ctx context.Context) error {
	o := d.o
	lctx, lcancel := context.WithTimeout(ctx, o.rsBefore+o.rsAfter+o.settleLimit)
	defer lcancel()
	var backupErr error
	d.load.run(lctx, d.tower, d.c, d.pool, o.rsFlowRate, o.rsOpenRate, o.rsBefore+o.rsAfter, func() {
		backupErr = d.takeBackups(lctx)
	})
	if backupErr != nil {
		d.r.verify(false, "lockernet-admin backup succeeds under load", "%v", backupErr)
		return backupErr
	}
	if d.load.gl.err != nil {
		return d.load.gl.err
	}
	for i, bm := range []backupTimes{d.bm1, d.bm2} {
		d.r.figure(fmt.Sprintf("Backup %d under load", i+1), "%s (Temporal's files copied in %s, then the database dumped in %s)",
			secs(bm.FinishedAt.Sub(bm.TemporalTakenAt)), secs(bm.AppTakenAt.Sub(bm.TemporalTakenAt)), secs(bm.FinishedAt.Sub(bm.AppTakenAt)))
	}
	d.r.figure("Restored", "Temporal's files of backup 1 with the database of backup 2, taken %s later", secs(d.bm2.AppTakenAt.Sub(d.bm1.AppTakenAt)))
	return nil
}

// takeBackups takes the first backup rsBefore into the load and the second rsGap after it,
// then mixes them into the backup restored. It returns nil when ctx ends first.
func (d *restoreDrill) takeBackups(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(d.o.rsBefore):
	}
	temporalFile := filepath.Join(d.sys.dir, "temporal.db")
	take := func(dir string) (backupTimes, error) {
		logf("  backing up into %s", dir)
		var t backupTimes
		if _, err := d.admin(ctx, "backup", "-out", dir, "-temporal-sqlite", temporalFile); err != nil {
			return t, err
		}
		raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err == nil {
			err = json.Unmarshal(raw, &t)
		}
		return t, err
	}
	backupDir := d.backupDir()
	var err error
	if d.bm1, err = take(backupDir + "-1"); err != nil {
		return err
	}
	if !waitPast(ctx, d.bm1.TemporalTakenAt.Add(d.o.rsGap)) {
		return nil
	}
	if d.bm2, err = take(backupDir + "-2"); err != nil {
		return err
	}
	// The backup restored: the first one's Temporal files with the second one's database.
	return mixBackups(backupDir+"-1", backupDir+"-2", backupDir)
}

// stopRestoreStart stops the apiserver, the worker and the Temporal server, restores the
// mixed backup and starts them again.
func (d *restoreDrill) stopRestoreStart(ctx context.Context) error {
	r, sys := d.r, d.sys
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
	restoreOut, err := d.admin(ctx, "restore", "-from", d.backupDir(), "-temporal-sqlite", restoredFile)
	if err != nil {
		r.verify(false, "lockernet-admin restore succeeds", "%v", err)
		return err
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
		return fmt.Errorf("start after the restore: %w", err)
	}
	tUp := time.Now()
	rearmed := regexp.MustCompile(`re-armed .*`).FindString(restoreOut)
	r.figure("Stopped → restored → started", "%s in all: stop %s, restore %s (%s), start %s",
		secs(tUp.Sub(tStop)), secs(tRestore.Sub(tStop)), secs(tStart.Sub(tRestore)), orNone(rearmed), secs(tUp.Sub(tStart)))
	r.figure("Active reservations and tokens in the restored database without their workflow in the restored Temporal state", "%d (the outbox started them)", missing)
	waitOutboxDrained(ctx, r, sys, d.o.settleLimit, "the workflow outbox drains after the restore (the re-armed workflows started)")
	return nil
}

// sortHolds sorts each hold against the backups: made before the first (answered before its
// Temporal copy began: row and workflow restored), between the two (asked for after the
// first's database snapshot, answered before the second's: the row restored, its workflow
// not — the restore re-arms it), after the second (asked for after its snapshot: gone), or
// while one ran.
func (d *restoreDrill) sortHolds(context.Context) error {
	kinds := map[string]int{}
	for _, call := range d.load.calls {
		if call.status >= 500 {
			d.fivexx++
		}
		if !call.ok() {
			kinds[call.kind+" failed"]++
			continue
		}
		switch {
		case call.end.Before(d.bm1.TemporalTakenAt):
			d.before = append(d.before, call)
			kinds[call.kind+" before backup 1"]++
		case call.start.After(d.bm1.AppTakenAt) && call.end.Before(d.bm2.TemporalTakenAt):
			d.gap = append(d.gap, call)
			kinds[call.kind+" between the backups"]++
		case call.start.After(d.bm2.AppTakenAt):
			d.after = append(d.after, call)
			kinds[call.kind+" after backup 2"]++
		default:
			d.during++
			kinds[call.kind+" during a backup"]++
		}
	}
	d.r.figure("Tower API holds", "%s", counts(kinds))
	d.r.verify(d.fivexx == 0, "no tower API call answered 5xx", "%d did", d.fivexx)
	return nil
}

// checkKept checks that the holds made before the database's backup are still held now, each
// with its workflow. A locker's hold is its latest one made before the backup: a drop-off
// token consumes the reservation before it. Lockers with a hold answered during the backup
// are left out.
func (d *restoreDrill) checkKept(ctx context.Context) error {
	r, sys, bm1, bm2 := d.r, d.sys, d.bm1, d.bm2
	heldNow, notHeld, running, noRun, rearmedHeld := 0, 0, 0, 0, 0
	latestBefore := map[string]towerCall{}
	inGap := map[string]bool{}
	duringLocker := map[string]bool{}
	for _, call := range d.load.calls {
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
	for locker, call := range latestBefore {
		if !duringLocker[locker] && time.Until(call.expires) > 5*time.Second {
			d.pending = append(d.pending, call)
		}
	}
	for _, call := range d.pending {
		table, wfID := "reservations", holdWorkflowID(call.kind, call.id)
		if call.kind == "dropoff-token" {
			table = "locker_tokens"
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
		desc, err := sys.tc.DescribeWorkflowExecution(ctx, wfID, "")
		if err == nil && desc.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			running++
		} else {
			noRun++
		}
	}
	r.figure("Holds made before backup 2's database snapshot (each locker's latest) and not yet expired after the start",
		"%d: %d held with their locker (%d of them made between the backups, their workflows re-armed), %d with a running workflow",
		len(d.pending), heldNow, rearmedHeld, running)
	r.verify(notHeld == 0, "every hold made before the database's backup is held after the restore", "%d are not", notHeld)
	r.verify(noRun == 0, "every hold made before the database's backup has its running workflow after the restore", "%d have none", noRun)
	return nil
}

// checkGone checks that the holds made after the database's backup are gone and that each
// of their lockers takes a new reservation.
func (d *restoreDrill) checkGone(ctx context.Context) error {
	r := d.r
	gone, present, free, refused := 0, 0, 0, 0
	for _, call := range d.after {
		table := "reservations"
		if call.kind == "dropoff-token" {
			table = "locker_tokens"
		}
		var exists bool
		if err := d.sys.st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1)`, call.id).Scan(&exists); err != nil {
			return err
		}
		if exists {
			present++
		} else {
			gone++
		}
	}
	var probeMu sync.Mutex
	afterLockers := lockersOf(d.after)
	parallel(len(afterLockers), 8, func(i int) {
		p := postTower(ctx, d.tower.tower, "reservation", afterLockers[i]+"reservations", map[string]any{"duration": 30})
		probeMu.Lock()
		d.probes = append(d.probes, p)
		probeMu.Unlock()
	})
	for _, p := range d.probes {
		if p.ok() {
			free++
		} else {
			refused++
			if p.status >= 500 {
				d.fivexx++
			}
			logf("  probe of a locker taken after the backup: %s", p.err)
		}
	}
	r.figure("Holds made after backup 2", "%d: %d gone after the restore; their %d lockers: %d took a new reservation, %d refused",
		len(d.after), gone, len(afterLockers), free, refused)
	r.verify(present == 0, "every hold made after the database's backup is gone after the restore", "%d are still there", present)
	r.verify(refused == 0, "every locker taken after the database's backup is free again (a new reservation is answered 201)", "%d refused", refused)
	r.verify(d.fivexx == 0, "no tower API call after the restore answered 5xx", "%d did", d.fivexx)
	return nil
}

// checkDoors checks that every open of both phases moved its door once, none twice, none
// again after the restore.
func (d *restoreDrill) checkDoors(ctx context.Context) error {
	r, gl := d.r, &d.load.gl
	time.Sleep(2 * time.Second)
	tl := tallyOutcomes(gl.outs)
	r.lost = tl.lost
	r.figure("Gateway opens", "%d sent (before, between and after the backups); answers: %s", len(gl.outs), counts(tl.states))
	r.verify(tl.lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", tl.lost, len(gl.outs))
	return d.checkLoadDoors(ctx)
}

// checkExpiries checks that the holds made before the database's backup expire on time, by
// their workflows.
func (d *restoreDrill) checkExpiries(ctx context.Context) error {
	r, sys := d.r, d.sys
	kept := append(append([]towerCall{}, d.before...), d.gap...)
	if len(kept) > 0 {
		if err := waitHoldsExpired(ctx, append(append([]towerCall{}, kept...), d.probes...)); err != nil {
			return err
		}
		var late []time.Duration
		for _, call := range d.pending {
			desc, err := sys.tc.DescribeWorkflowExecution(ctx, holdWorkflowID(call.kind, call.id), "")
			if err == nil && desc.WorkflowExecutionInfo.GetCloseTime() != nil {
				late = append(late, desc.WorkflowExecutionInfo.GetCloseTime().AsTime().Sub(call.expires))
			}
		}
		r.figure("Holds made before the database's backup: workflow closed → after its expiry", "%s", durations(late))
		if err := checkHolds(ctx, r, sys, append(append([]towerCall{}, kept...), d.probes...)); err != nil {
			return err
		}
		sweeperFigure(r, sys.worker.logCount(sweeperReleased))
	}
	if d.during > 0 {
		r.note("%d holds were answered while a backup ran (between a Temporal copy's start and its database snapshot): "+
			"each is either in the restored database, with its workflow re-armed, or not; the checks above leave them out.", d.during)
	}
	return nil
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
