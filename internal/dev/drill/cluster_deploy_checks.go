package drill

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/lockernet/lockernet/workflows/contract"
)

// The check phase of cluster-deploy: what the clients saw, the doors, holds and events
// accounted for, and what Temporal's histories say about the builds that ran each run.

// checkPinned checks the probe: a gateway request that was running when B became current
// ends on A, pinned to it, as GatewayRequest's versioning behaviour says.
func (d *deployRun) checkPinned(ctx context.Context, pr pinnedProbe) error {
	d.r.verify(pr.out.done && pr.out.final.state == "completed", "the open in flight across the deploy ended completed",
		"%s", orDash(pr.out.final.state, pr.out.lastErr))
	if !pr.out.done {
		return nil
	}
	wfID := contract.GatewayRequestWorkflowID(pr.out.final.requestID)
	desc, err := d.sys.tc.DescribeWorkflowExecution(ctx, wfID, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", wfID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	vi := info.GetVersioningInfo()
	behavior, build := vi.GetBehavior(), vi.GetDeploymentVersion().GetBuildId()
	closed := info.GetCloseTime().AsTime()
	h, err := d.runHistory(ctx, wfID, info.GetExecution().GetRunId())
	if err != nil {
		return err
	}
	d.r.figure("The open in flight across the deploy (pinned probe)", "%s: DescribeWorkflowExecution versioningInfo "+
		"behavior %s, build %s; its workflow tasks were completed by %s; it closed %s after B became current",
		wfID, behavior, build, strings.Join(h.builds, ", "), secs(closed.Sub(d.tPromoted)))
	d.r.verify(behavior == enumspb.VERSIONING_BEHAVIOR_PINNED && build == d.buildA && allOf(h.builds, d.buildA),
		"a gateway request started on A stays pinned to A (versioningInfo and every workflow task)", "behavior %s, build %s, tasks by %s",
		behavior, build, strings.Join(h.builds, ", "))
	d.r.verify(closed.After(d.tPromoted), "it was still running when B became current (it finished on A with B current)",
		"closed %s after the promote", secs(closed.Sub(d.tPromoted)))
	return nil
}

// pinnedLeft reports the gateway requests pinned to A still running once the deploy has
// replaced A's last process: the rolling deploy does not wait for them (the runbook's
// "retire the old build once drained"), so such a run waits until a process of A runs again.
func (d *deployRun) pinnedLeft(ctx context.Context) {
	resp, err := d.sys.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1000,
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", contract.GatewayRequestWorkflowName)})
	if err != nil {
		d.r.note("The gateway requests running after the deploy could not be listed: %v", err)
		return
	}
	onA := 0
	for _, e := range resp.GetExecutions() {
		desc, err := d.sys.tc.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
		if err == nil && desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId() == d.buildA {
			onA++
		}
	}
	d.r.figure("Gateway requests pinned to A still running when the deploy A → B ended", "%d of %d running", onA, len(resp.GetExecutions()))
	d.r.observe(onA == 0, "no gateway request pinned to A outlived A's processes (the deploy does not wait for them)", "%d did", onA)
}

func (d *deployRun) check(ctx context.Context, l *deployLoad, rc *drillReceiver) error {
	if len(l.errs) > 0 {
		return l.errs[0]
	}
	r, sys := d.r, d.sys
	// What the clients saw.
	tl := tallyOutcomes(l.opens)
	failures := l.tower.cs.counts()
	for k, n := range tl.failures {
		failures[k] += n
	}
	total := 0
	for _, n := range failures {
		total += n
	}
	r.figure("Tower calls", "%s", l.tower.flows.summary())
	r.figure("Gateway opens", "%d sent (1 on GW-0002 across the deploy); answers: %s", len(l.opens), counts(tl.states))
	r.figure("Webhook test events", "%d recorded", len(l.events))
	r.figure("Failed exchanges clients saw through nginx (every kind, every retry counted)", "%s", counts(failures))
	r.verify(total == 0, "no client saw a failed exchange (5xx, a refused or reset connection)", "%d did", total)
	r.lost = tl.lost + l.tower.flows.lost
	r.verify(l.tower.flows.lost == 0, "every tower flow was answered 201 (lost requests)", "%d of %d not", l.tower.flows.lost, l.tower.flows.flows)
	r.verify(tl.lost == 0, "every gateway open reached a terminal answer (lost requests)", "%d of %d lost", tl.lost, len(l.opens))
	r.verify(tl.multi == 0, "each Idempotency-Key stood for one request (one X-Request-Id)", "%d keys saw more than one", tl.multi)
	d.lat.figures(r)

	// Doors: nothing is on its way at a gateway once every open is terminal.
	time.Sleep(2 * time.Second)
	answers := openAnswers(l.opens, l.targets)
	if err := checkDoors(ctx, r, sys, d.cr.baseline, answers, doorsNotCompleted); err != nil {
		return err
	}
	completed := 0
	for _, o := range answers {
		if o.answered && o.state == "completed" {
			completed++
		}
	}
	r.verify(completed == len(answers), "every open ended completed", "%d of %d", completed, len(answers))
	acts, err := sys.actuations(ctx)
	if err != nil {
		return err
	}
	moved := accountDoors(acts, d.cr.baseline, answers)
	r.verify(moved.Actuated == len(answers) && moved.Duplicates == 0, "every open moved its door exactly once (/sim/stats)",
		"%d of %d moved once, %d extra actuations", moved.Actuated, len(answers), moved.Duplicates)

	// Webhook events: each received, signed; a repeat only with its webhook-id.
	_, _ = waitFor(ctx, 2*time.Minute, 200*time.Millisecond, func() bool { return rc.distinct() >= len(l.events) })
	missing := 0
	for _, id := range l.events {
		if rc.count(id) == 0 {
			missing++
		}
	}
	r.lost += missing
	r.verify(missing == 0, "every webhook event reached the receiver (lost events)", "%d of %d never arrived", missing, len(l.events))
	r.verify(rc.badSignatures.Load() == 0, "every delivery carried a valid signature", "%d did not", rc.badSignatures.Load())
	r.figure("Webhook deliveries received", "%d for %d events (%d repeats of an event, each with its webhook-id)",
		rc.received(), rc.distinct(), rc.received()-rc.distinct())

	// Holds: each released by its own workflow's timer, once.
	waitOutboxDrained(ctx, r, sys, time.Minute, outboxDrains)
	settleAt := latestExpiry(l.tower.flows.calls).Add(15 * time.Second)
	logf("  waiting %s for every hold to expire", secs(time.Until(settleAt)))
	if !waitPast(ctx, settleAt) {
		return ctx.Err()
	}
	if err := checkTimersOnce(ctx, r, sys, l.tower.flows.calls, func(due time.Time) string {
		switch {
		case due.Before(d.tPromoted):
			return "holds due before B was current"
		case due.Before(d.tDeployed):
			return "holds due during the deploy"
		case due.Before(d.tRolledBack):
			return "holds due on B or during the rollback"
		default:
			return "holds due after the rollback"
		}
	}); err != nil {
		return err
	}

	if err := d.checkRuns(ctx); err != nil {
		return err
	}
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	var vs []string
	for _, v := range st.Versions {
		vs = append(vs, v.BuildID+" "+v.Status)
	}
	r.figure("Worker deployment at the end (lockernet-admin deployment status)", "current %s; %s", st.Current, strings.Join(vs, ", "))
	r.verify(d.buildBack == d.buildA, "the rollback made build A's own version current again (the pinned runs of A have workers again)",
		"A ran as %s, the rollback's processes poll as %s", d.buildA, d.buildBack)
	restartFigure(r, sys, d.cr.restarts, "")
	sweeperFigure(r, clusterSweeps(sys, d.cr.sweeps))
	return nil
}

// runHistory is what one run's history says about the builds that ran it.
type runHistory struct {
	builds         []string // builds that completed its workflow tasks, in order, without repeats
	firstBuild     string
	lastBuild      string
	taskFailures   int
	nondeterminism int
	sideEffects    int // SideEffect markers: build B's closing step (production Reservation records none)
}

func (d *deployRun) runHistory(ctx context.Context, wfID, runID string) (runHistory, error) {
	var h runHistory
	it := d.sys.tc.GetWorkflowHistory(ctx, wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("read the history of %s: %w", wfID, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			b := taskBuild(ev.GetWorkflowTaskCompletedEventAttributes())
			if h.firstBuild == "" {
				h.firstBuild = b
			}
			h.lastBuild = b
			if len(h.builds) == 0 || h.builds[len(h.builds)-1] != b {
				h.builds = append(h.builds, b)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			h.taskFailures++
			if ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR {
				h.nondeterminism++
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "SideEffect" {
				h.sideEffects++
			}
		}
	}
	return h, nil
}

func taskBuild(a *historypb.WorkflowTaskCompletedEventAttributes) string {
	if b := a.GetDeploymentVersion().GetBuildId(); b != "" {
		return b
	}
	return "unversioned"
}

// checkRuns reads the history of every workflow run the drill started: no workflow task
// failed (non-determinism above all), every run closed, and the auto-upgrade runs went
// from A to B as that behaviour says.
func (d *deployRun) checkRuns(ctx context.Context) error {
	r := d.r
	q := fmt.Sprintf("StartTime >= '%s'", r.started.UTC().Format(time.RFC3339Nano))
	type run struct{ typ, id, runID, status string }
	var runs []run
	var token []byte
	for {
		resp, err := d.sys.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: q,
			PageSize: 1000, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list the drill's workflow runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			runs = append(runs, run{e.GetType().GetName(), e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetStatus().String()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	byType := map[string]int{}
	open := map[string]int{}
	var failed, nde int
	var ndeRuns []string
	paths := map[string]int{}
	var mu sync.Mutex
	var firstErr error
	parallel(len(runs), 8, func(i int) {
		ru := runs[i]
		h, err := d.runHistory(ctx, ru.id, ru.runID)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		byType[ru.typ]++
		if ru.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING.String() {
			open[ru.typ]++
		}
		failed += h.taskFailures
		nde += h.nondeterminism
		if h.nondeterminism > 0 {
			ndeRuns = append(ndeRuns, ru.id)
		}
		if ru.typ == contract.ReservationWorkflowName && ru.status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED.String() {
			paths[d.path(h)]++
		}
	})
	if firstErr != nil {
		return firstErr
	}
	sort.Strings(ndeRuns)
	r.figure("Workflow runs the drill started (histories read)", "%s", counts(byType))
	r.figure("Workflow task failures in those histories", "%d (non-determinism: %d%s)", failed, nde, paren(strings.Join(ndeRuns, ", "), nde > 0))
	r.verify(nde == 0, "no workflow task failed on non-determinism", "%d did", nde)
	r.observe(failed == 0, "no workflow task failed at all", "%d did", failed)
	nOpen := 0
	for _, n := range open {
		nOpen += n
	}
	r.verify(nOpen == 0, "every run the drill started has closed (none waits for a build that is gone)", "open: %s", counts(open))
	r.figure("Completed reservations by the builds that ran them", "%s", counts(paths))
	aToB := paths["started on A, completed on B (with B's step)"]
	r.verify(aToB > 0, "auto-upgrade: reservations started on A completed on B, taking B's versioned step", "%d did", aToB)
	return nil
}

// path names the builds a completed reservation ran on, and whether it took B's step.
func (d *deployRun) path(h runHistory) string {
	name := func(b string) string {
		switch b {
		case d.buildA, d.buildBack:
			return "A"
		case d.buildB:
			return "B"
		}
		return b
	}
	s := "started on " + name(h.firstBuild) + ", completed on " + name(h.lastBuild)
	if h.sideEffects > 0 {
		s += " (with B's step)"
	}
	return s
}

func allOf(ss []string, want string) bool {
	for _, s := range ss {
		if s != want {
			return false
		}
	}
	return len(ss) > 0
}

func orDash(s, alt string) string {
	if s != "" {
		return s
	}
	if alt != "" {
		return alt
	}
	return "–"
}
