//go:build drill_build_b

package worker

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Build B's Reservation replays the runs the build without the tag recorded (its step is
// versioned), and the same step without workflow.GetVersion would not: the change is one a
// deploy must version.
//
//	go test -tags drill_build_b -run TestDrillBuildB ./worker/
func TestDrillBuildBReplaysTheRunsOfTheBuildBefore(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"reservation_expired.json", "reservation_cancelled.json"} {
		path := filepath.Join("..", "workflows", "testdata", file)
		t.Run(file, func(t *testing.T) {
			rp := sdkworker.NewWorkflowReplayer()
			RegisterWorkflows(rp)
			require.NoError(t, rp.ReplayWorkflowHistoryFromJSONFile(nil, path), "build B replays the run")

			unversioned := sdkworker.NewWorkflowReplayer()
			unversioned.RegisterWorkflowWithOptions(func(ctx workflow.Context, in contract.ReservationInput) (contract.ReservationState, error) {
				st, err := workflows.Reservation(ctx, in)
				if err == nil {
					err = workflow.SideEffect(ctx, func(workflow.Context) any { return "drill build b" }).Get(new(string))
				}
				return st, err
			}, workflow.RegisterOptions{Name: contract.ReservationWorkflowName})
			err := unversioned.ReplayWorkflowHistoryFromJSONFile(nil, path)
			require.Error(t, err, "the step without GetVersion does not replay the run")
			assert.Contains(t, err.Error(), "TMPRL1100", "a non-determinism error")
		})
	}
}
