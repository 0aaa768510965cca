// Package deployments is the operator's view of the Temporal worker deployment the service's
// workers poll as (decision 0019): which build new workflows go to (current), which one
// takes a share of them on trial (ramping), and the builds that still finish the runs pinned
// to them (draining). lockernet-admin deployment and the dev stack call it.
package deployments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Admin changes one worker deployment's routing on a namespace.
type Admin struct {
	Client    client.Client
	Namespace string
	Name      string // the deployment, LOCKERNET_DEPLOYMENT_NAME
	// Identity is recorded as the deployment's last modifier (empty: the client's identity).
	Identity string
}

// Version is one build of the deployment.
type Version struct {
	BuildID string
	// Status is current, ramping, draining (no new runs; pinned runs still open), drained,
	// inactive (never current or ramping) or created.
	Status      string
	RampPercent float32
	CreatedAt   time.Time
	// LastCurrentAt is when the build was last made current (zero: never).
	LastCurrentAt time.Time
	// TaskQueues are the queues its workers have polled, "name/workflow" or "name/activity".
	TaskQueues []string
}

// Status is the deployment's routing and its builds, the newest first.
type Status struct {
	Name string
	// Current receives new runs ("" : unversioned workers do).
	Current string
	// Ramping receives RampPercent of new runs instead of Current ("" : none ramps).
	Ramping     string
	RampPercent float32
	// Propagating: the last routing change has not yet reached every task queue; until it
	// has, some tasks may still go by the routing before it.
	Propagating bool
	Versions    []Version
}

// Version returns the build's entry.
func (s Status) Version(buildID string) (Version, bool) {
	i := slices.IndexFunc(s.Versions, func(v Version) bool { return v.BuildID == buildID })
	if i < 0 {
		return Version{}, false
	}
	return s.Versions[i], true
}

// Change is what a routing change did.
type Change struct {
	// What: "current", "ramp" or "ramp stopped".
	What string
	From string // the build that had the role before ("" : unversioned or none)
	To   string
	// Percent of new runs the ramping build receives (What "ramp").
	Percent float32
}

// ErrNoDeployment: no worker of the deployment has polled yet.
var ErrNoDeployment = errors.New("no versioned worker of this deployment has polled yet")

// Status describes the deployment.
func (a *Admin) Status(ctx context.Context) (Status, error) {
	st, _, err := a.describe(ctx)
	if err != nil {
		return Status{}, err
	}
	for i, v := range st.Versions {
		d, err := a.Client.WorkerDeploymentClient().GetHandle(a.Name).DescribeVersion(ctx,
			client.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID})
		if err != nil {
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue // deleted since (drained, no pollers)
			}
			return Status{}, fmt.Errorf("describe build %s: %w", v.BuildID, err)
		}
		for _, q := range d.Info.TaskQueuesInfos {
			kind := "workflow"
			if q.Type == client.TaskQueueTypeActivity {
				kind = "activity"
			}
			st.Versions[i].TaskQueues = append(st.Versions[i].TaskQueues, q.Name+"/"+kind)
		}
		slices.Sort(st.Versions[i].TaskQueues)
	}
	return st, nil
}

// describe reads the deployment's routing and version summaries (the raw API: the SDK's
// summary leaves out when each build was last current, which Rollback needs) and the
// conflict token a change passes on, so that one made meanwhile fails instead of being undone.
func (a *Admin) describe(ctx context.Context) (Status, []byte, error) {
	resp, err := a.Client.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: a.Namespace, DeploymentName: a.Name})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Status{}, nil, fmt.Errorf("deployment %s: %w", a.Name, ErrNoDeployment)
		}
		return Status{}, nil, fmt.Errorf("describe deployment %s: %w", a.Name, err)
	}
	info := resp.GetWorkerDeploymentInfo()
	rc := info.GetRoutingConfig()
	st := Status{Name: a.Name, Current: buildOf(rc.GetCurrentDeploymentVersion()),
		Ramping: buildOf(rc.GetRampingDeploymentVersion()), RampPercent: rc.GetRampingVersionPercentage(),
		Propagating: info.GetRoutingConfigUpdateState() == enumspb.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS}
	for _, s := range info.GetVersionSummaries() {
		v := Version{BuildID: s.GetDeploymentVersion().GetBuildId(), Status: statusName(s.GetStatus(), s.GetDrainageStatus()),
			CreatedAt: s.GetCreateTime().AsTime()}
		if s.GetLastCurrentTime() != nil {
			v.LastCurrentAt = s.GetLastCurrentTime().AsTime()
		}
		if v.BuildID == st.Ramping {
			v.RampPercent = st.RampPercent
		}
		st.Versions = append(st.Versions, v)
	}
	slices.SortFunc(st.Versions, func(x, y Version) int { return y.CreatedAt.Compare(x.CreatedAt) })
	return st, resp.GetConflictToken(), nil
}

func buildOf(v *deploymentpb.WorkerDeploymentVersion) string { return v.GetBuildId() }

func statusName(s enumspb.WorkerDeploymentVersionStatus, d enumspb.VersionDrainageStatus) string {
	switch s {
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT:
		return "current"
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING:
		return "ramping"
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING:
		return "draining"
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED:
		return "drained"
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE:
		return "inactive"
	case enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED:
		return "created"
	}
	switch d {
	case enumspb.VERSION_DRAINAGE_STATUS_DRAINING:
		return "draining"
	case enumspb.VERSION_DRAINAGE_STATUS_DRAINED:
		return "drained"
	}
	return "unknown"
}

// SetCurrent makes buildID the build that new runs (and every auto-upgrade run's next task)
// go to; a build ramping is current at 100%. The build's workers must have polled every
// task queue the current build's polled (Temporal refuses otherwise).
func (a *Admin) SetCurrent(ctx context.Context, buildID string) (Change, error) {
	st, token, err := a.describe(ctx)
	if err != nil {
		return Change{}, err
	}
	return a.setCurrent(ctx, st, token, buildID)
}

func (a *Admin) setCurrent(ctx context.Context, st Status, token []byte, buildID string) (Change, error) {
	if _, ok := st.Version(buildID); !ok {
		return Change{}, a.unknownBuild(st, buildID)
	}
	ch := Change{What: "current", From: st.Current, To: buildID}
	if st.Current == buildID {
		return ch, nil
	}
	_, err := a.Client.WorkerDeploymentClient().GetHandle(a.Name).SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID: buildID, ConflictToken: token, Identity: a.Identity})
	if err != nil {
		return Change{}, fmt.Errorf("set build %s current in deployment %s: %w", buildID, a.Name, err)
	}
	return ch, a.awaitPropagated(ctx)
}

// propagationWait bounds awaitPropagated: a routing change that has not reached every task
// queue by then is reported, not waited on for ever (a deploy once hung on one).
const propagationWait = 2 * time.Minute

// awaitPropagated waits until the routing just changed has reached every task queue of the
// deployment, so that the change's caller sees it in effect (Temporal applies it to the task
// queues' partitions after answering), at most propagationWait.
func (a *Admin) awaitPropagated(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, propagationWait)
	defer cancel()
	for {
		st, _, err := a.describe(ctx)
		if err != nil {
			return err
		}
		if !st.Propagating {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s: the routing change is still reaching its task queues: %w", a.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SetCurrentWhenPolled is SetCurrent once the build's workers have polled: it tries again
// every interval until wait has passed (the dev stack calls it as its processes start, a
// deploy script right after starting the new build's).
func (a *Admin) SetCurrentWhenPolled(ctx context.Context, buildID string, wait time.Duration) (Change, error) {
	deadline := time.Now().Add(wait)
	for {
		ch, err := a.SetCurrent(ctx, buildID)
		if err == nil || !(retryable(err) || (transient(err) && ctx.Err() == nil)) {
			return ch, err
		}
		if time.Now().After(deadline) {
			return Change{}, fmt.Errorf("after %s: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return Change{}, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// retryable errors are those a build whose workers are still starting meets: no version yet,
// or not yet every task queue (Temporal's FailedPrecondition).
func retryable(err error) bool {
	var fp *serviceerror.FailedPrecondition
	var nf *serviceerror.NotFound
	var unknown *UnknownBuildError
	return errors.Is(err, ErrNoDeployment) || errors.As(err, &unknown) || errors.As(err, &fp) || errors.As(err, &nf)
}

// transient errors are a busy or briefly unreachable server's (a call that ran out of its own
// time while the caller's has not): worth another try within the wait, as when a stack restarts
// on a Temporal still working off a backlog.
func transient(err error) bool {
	var de *serviceerror.DeadlineExceeded
	var un *serviceerror.Unavailable
	var re *serviceerror.ResourceExhausted
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de) || errors.As(err, &un) || errors.As(err, &re)
}

// Ramp sends percent (0-100) of new runs to buildID instead of the current build; an
// auto-upgrade run's next task goes by the same share.
func (a *Admin) Ramp(ctx context.Context, buildID string, percent float32) (Change, error) {
	if percent < 0 || percent > 100 {
		return Change{}, fmt.Errorf("ramp percent %v: must be 0 to 100", percent)
	}
	st, token, err := a.describe(ctx)
	if err != nil {
		return Change{}, err
	}
	if _, ok := st.Version(buildID); !ok {
		return Change{}, a.unknownBuild(st, buildID)
	}
	if buildID == st.Current {
		return Change{}, fmt.Errorf("build %s is already current in deployment %s", buildID, a.Name)
	}
	_, err = a.Client.WorkerDeploymentClient().GetHandle(a.Name).SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{
		BuildID: buildID, Percentage: percent, ConflictToken: token, Identity: a.Identity})
	if err != nil {
		return Change{}, fmt.Errorf("ramp build %s to %v%% in deployment %s: %w", buildID, percent, a.Name, err)
	}
	return Change{What: "ramp", From: st.Current, To: buildID, Percent: percent}, a.awaitPropagated(ctx)
}

// Rollback undoes the last step of a deploy: a build ramping stops ramping (every new run
// goes to the current build again); with none ramping, the build that was current before
// the current one is current again. Runs pinned to the build rolled back from stay on it
// until they end: keep its workers until it shows drained.
func (a *Admin) Rollback(ctx context.Context) (Change, error) {
	st, token, err := a.describe(ctx)
	if err != nil {
		return Change{}, err
	}
	if st.Ramping != "" {
		_, err := a.Client.WorkerDeploymentClient().GetHandle(a.Name).SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{
			BuildID: "", Percentage: 0, ConflictToken: token, Identity: a.Identity})
		if err != nil {
			return Change{}, fmt.Errorf("stop ramping build %s in deployment %s: %w", st.Ramping, a.Name, err)
		}
		return Change{What: "ramp stopped", From: st.Ramping, To: st.Current}, a.awaitPropagated(ctx)
	}
	prev, ok := previousCurrent(st)
	if !ok {
		return Change{}, fmt.Errorf("deployment %s: no build was current before %s, nothing to roll back to", a.Name, orUnversioned(st.Current))
	}
	return a.setCurrent(ctx, st, token, prev)
}

// previousCurrent is the build other than the current one made current most recently.
func previousCurrent(st Status) (string, bool) {
	var best *Version
	for i := range st.Versions {
		v := &st.Versions[i]
		if v.BuildID == st.Current || v.LastCurrentAt.IsZero() {
			continue
		}
		if best == nil || cmp.Compare(v.LastCurrentAt.UnixNano(), best.LastCurrentAt.UnixNano()) > 0 {
			best = v
		}
	}
	if best == nil {
		return "", false
	}
	return best.BuildID, true
}

// UnknownBuildError: no worker of the build has polled the deployment (yet).
type UnknownBuildError struct {
	Deployment, BuildID string
	Known               []string
}

func (e *UnknownBuildError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = fmt.Sprint(e.Known)
	}
	return fmt.Sprintf("build %s has not polled deployment %s (start its workers first; builds known: %s)", e.BuildID, e.Deployment, known)
}

func (a *Admin) unknownBuild(st Status, buildID string) error {
	e := &UnknownBuildError{Deployment: a.Name, BuildID: buildID}
	for _, v := range st.Versions {
		e.Known = append(e.Known, v.BuildID)
	}
	return e
}

func orUnversioned(build string) string {
	if build == "" {
		return "the unversioned workers"
	}
	return build
}
