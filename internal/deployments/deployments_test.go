package deployments_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// pollAs starts a worker of build on queue in deployment name, on a client of its own.
func pollAs(t *testing.T, ts *temporaltest.TestServer, queue, name, build string) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := sdkworker.New(c, queue, sdkworker.Options{DeploymentOptions: sdkworker.DeploymentOptions{UseVersioning: true,
		Version: sdkworker.WorkerDeploymentVersion{DeploymentName: name, BuildID: build}}})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil },
		workflow.RegisterOptions{Name: "Noop", VersioningBehavior: workflow.VersioningBehaviorPinned})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// A deploy as the runbook has it, step by step: the first build made current once it polls,
// a second one ramped, the ramp rolled back, the second promoted, and rolled back to the
// first; with what each step refuses.
func TestDeploySteps(t *testing.T) {
	ts, c := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	queue, name := "deploy-"+uuid.NewString()[:8], "deploy-"+uuid.NewString()[:8]
	a := &deployments.Admin{Client: c, Namespace: ts.GetDefaultNamespace(), Name: name, Identity: "deployments-test"}

	_, err := a.Status(ctx)
	require.ErrorIs(t, err, deployments.ErrNoDeployment, "no worker has polled yet")
	_, err = a.SetCurrent(ctx, "build-1")
	require.ErrorIs(t, err, deployments.ErrNoDeployment)

	pollAs(t, ts, queue, name, "build-1")
	ch, err := a.SetCurrentWhenPolled(ctx, "build-1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "current", From: "", To: "build-1"}, ch)
	st, err := a.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "build-1", st.Current)
	assert.Empty(t, st.Ramping)
	v, ok := st.Version("build-1")
	require.True(t, ok)
	assert.Equal(t, "current", v.Status)
	assert.False(t, v.LastCurrentAt.IsZero())
	assert.Contains(t, v.TaskQueues, queue+"/workflow")

	_, err = a.Rollback(ctx)
	require.ErrorContains(t, err, "nothing to roll back to", "build-1 is the first build made current")
	var unknown *deployments.UnknownBuildError
	_, err = a.SetCurrent(ctx, "build-9")
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, []string{"build-1"}, unknown.Known)

	pollAs(t, ts, queue, name, "build-2")
	require.Eventually(t, func() bool {
		st, err := a.Status(ctx)
		_, ok := st.Version("build-2")
		return err == nil && ok
	}, time.Minute, 100*time.Millisecond, "build-2 is a version once it polls")
	_, err = a.Ramp(ctx, "build-1", 10)
	require.ErrorContains(t, err, "already current")
	_, err = a.Ramp(ctx, "build-2", 101)
	require.ErrorContains(t, err, "0 to 100")

	ch, err = a.Ramp(ctx, "build-2", 25)
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "ramp", From: "build-1", To: "build-2", Percent: 25}, ch)
	st, err = a.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "build-1", st.Current)
	assert.Equal(t, "build-2", st.Ramping)
	assert.InDelta(t, 25, st.RampPercent, 0.001)
	v, _ = st.Version("build-2")
	assert.Equal(t, "ramping", v.Status)

	// Rolling back a ramp stops it; build-1 stays current.
	ch, err = a.Rollback(ctx)
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "ramp stopped", From: "build-2", To: "build-1"}, ch)
	st, err = a.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "build-1", st.Current)
	assert.Empty(t, st.Ramping)

	ch, err = a.SetCurrent(ctx, "build-2")
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "current", From: "build-1", To: "build-2"}, ch)
	st, err = a.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "build-2", st.Current)
	v, _ = st.Version("build-1")
	assert.Contains(t, []string{"draining", "drained"}, v.Status, "build-1 takes no new runs")

	// Rolling back with no ramp: the build current before is current again, and once more
	// goes back the other way.
	ch, err = a.Rollback(ctx)
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "current", From: "build-2", To: "build-1"}, ch)
	ch, err = a.Rollback(ctx)
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "current", From: "build-1", To: "build-2"}, ch)

	// Setting the current build current again changes nothing.
	ch, err = a.SetCurrent(ctx, "build-2")
	require.NoError(t, err)
	assert.Equal(t, deployments.Change{What: "current", From: "build-2", To: "build-2"}, ch)
}

// SetCurrentWhenPolled gives up after its wait when no worker of the build polls.
func TestSetCurrentWhenPolledGivesUp(t *testing.T) {
	ts, c := testenv.Temporal(t)
	name := "deploy-" + uuid.NewString()[:8]
	pollAs(t, ts, "deploy-"+uuid.NewString()[:8], name, "build-1")
	a := &deployments.Admin{Client: c, Namespace: ts.GetDefaultNamespace(), Name: name}
	_, err := a.SetCurrentWhenPolled(context.Background(), "build-never", 2*time.Second)
	var unknown *deployments.UnknownBuildError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "build-never", unknown.BuildID)
	assert.ErrorContains(t, err, "after 2s")
}
