//go:build drill_build_b

// Build B of the rolling-deploy drill (internal/dev/drill, cluster-deploy): a fixture, compiled
// only with -tags drill_build_b (make test-faults builds it into bin/dev/drill-build-b), never
// into a release. Its Reservation workflow takes one more step than the code without the
// tag: a side effect recorded in the task that completes the run. Replaying a run the untagged
// build completed would meet that step where the history completes the run — a
// non-determinism failure — so the step is behind workflow.GetVersion, as a real change
// must be. It sits in the completing task so that no open run holds it: the drill's rollback
// to the untagged build replays every reservation build B started, which it could not if one
// held the side effect's marker.
package worker

import (
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

// DrillBuildBChange is the workflow.GetVersion change id of build B's extra step; the drill
// finds it in a run's history (a marker) to tell the runs build B completed.
const DrillBuildBChange = "drill-build-b-closing-side-effect"

func init() {
	for i := range workflowTypes {
		if workflowTypes[i].name == contract.ReservationWorkflowName {
			workflowTypes[i].fn = reservationBuildB
		}
	}
}

// reservationBuildB is workflows.Reservation and, on the runs whose completing task this
// build runs, the extra step.
func reservationBuildB(ctx workflow.Context, in contract.ReservationInput) (contract.ReservationState, error) {
	st, err := workflows.Reservation(ctx, in)
	if err != nil {
		return st, err
	}
	if workflow.GetVersion(ctx, DrillBuildBChange, workflow.DefaultVersion, 1) == 1 {
		var by string
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return "drill build b" }).Get(&by); err != nil {
			return st, err
		}
	}
	return st, nil
}
