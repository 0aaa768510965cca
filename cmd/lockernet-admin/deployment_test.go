package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// `deployment` as an operator types it: status before any versioned worker, set-current
// once a build polls, status naming it, and the usage errors.
func TestDeploymentCommand(t *testing.T) {
	ts, _ := testenv.Temporal(t)
	name := "admin-" + uuid.NewString()[:8]
	cfg := config.Config{TemporalAddress: ts.GetFrontendHostPort(), TemporalNS: ts.GetDefaultNamespace(), DeploymentName: name}
	ctx := context.Background()
	deployment := func(args ...string) (string, error) {
		out := &bytes.Buffer{}
		err := deploymentCmd(ctx, &adminEnv{cfg: cfg, out: out, logger: slog.New(slog.DiscardHandler)}, args)
		return out.String(), err
	}

	_, err := deployment("status")
	require.ErrorContains(t, err, "no versioned worker of this deployment has polled yet")
	for _, args := range [][]string{
		{}, {"promote"}, {"set-current"}, {"ramp", "-build", "b1"}, {"rollback", "-build", "b1"}, {"set-current", "-build", "b 1"},
	} {
		_, err := deployment(args...)
		assert.Error(t, err, "deployment %v", args)
	}

	c, err := client.Dial(client.Options{HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	defer c.Close()
	w := sdkworker.New(c, "admin-"+uuid.NewString()[:8], sdkworker.Options{DeploymentOptions: sdkworker.DeploymentOptions{
		UseVersioning: true, Version: sdkworker.WorkerDeploymentVersion{DeploymentName: name, BuildID: "b1"}}})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil },
		workflow.RegisterOptions{Name: "Noop", VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	require.NoError(t, w.Start())
	defer w.Stop()

	out, err := deployment("set-current", "-build", "b1", "-wait", "1m")
	require.NoError(t, err)
	assert.Equal(t, "build b1 is current in deployment "+name+" (was unversioned)\n", out)
	out, err = deployment("set-current", "-build", "b1")
	require.NoError(t, err)
	assert.Equal(t, "build b1 is already current in deployment "+name+"\n", out)
	out, err = deployment("status")
	require.NoError(t, err)
	assert.Contains(t, out, "deployment "+name+"\n  current  b1\n")
	assert.Regexp(t, `(?m)^b1\s+current\s+\S+\s+\S+\s+admin-`, out)
	_, err = deployment("rollback")
	assert.ErrorContains(t, err, "nothing to roll back to")
	_, err = deployment("ramp", "-build", "b2", "-percent", "10")
	assert.ErrorContains(t, err, "build b2 has not polled deployment "+name)
}
