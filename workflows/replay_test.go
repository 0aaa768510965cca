package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows"
)

// Recorded histories of real runs. A change to the workflow that would break the runs in
// flight fails TestReplayReservation; re-record only for a change made behind
// workflow.GetVersion (and keep the old files).
var histories = []string{"reservation_expired.json", "reservation_cancelled.json"}

func TestReplayReservation(t *testing.T) {
	t.Parallel()
	replayHistories(t, workflows.Reservation, workflows.ReservationWorkflowName, histories)
}

// expireAlways is the store behind the recording worker's activities.
type expireAlways struct{}

func (expireAlways) ExpireReservation(context.Context, uuid.UUID) (bool, error) { return true, nil }

// TestRecordReservationHistories runs the workflow on an embedded Temporal server and writes
// its histories to testdata/. Run it with LOCKERNET_RECORD_HISTORIES=1.
func TestRecordReservationHistories(t *testing.T) {
	recordHistories(t)
	_, c := testenv.Temporal(t)
	const taskQueue = "record-reservation-histories"
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, &activities.Activities{Reservations: expireAlways{}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(expiresIn time.Duration, signal string) (client.WorkflowRun, workflows.ReservationState) {
		id := uuid.NewString()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ReservationWorkflowID(id), TaskQueue: taskQueue},
			workflows.ReservationWorkflowName, workflows.ReservationInput{ReservationID: id, ExpiresAt: time.Now().Add(expiresIn)})
		require.NoError(t, err)
		if signal != "" {
			require.NoError(t, c.SignalWorkflow(ctx, r.GetID(), r.GetRunID(), workflows.SignalReservationEnded, signal))
		}
		var st workflows.ReservationState
		require.NoError(t, r.Get(ctx, &st))
		return r, st
	}

	r, st := run(time.Second, "")
	assert.Equal(t, workflows.OutcomeExpired, st.Outcome)
	writeHistory(ctx, t, c, r, "reservation_expired.json")

	r, st = run(time.Hour, workflows.OutcomeCancelled)
	assert.Equal(t, workflows.OutcomeCancelled, st.Outcome)
	writeHistory(ctx, t, c, r, "reservation_cancelled.json")
}

// changedReservation is the workflow with its expiry timer taken out: the kind of edit the
// replay test exists to catch.
func changedReservation(ctx workflow.Context, in workflows.ReservationInput) (workflows.ReservationState, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var res activities.ExpireReservationResult
	err := workflow.ExecuteActivity(ctx, "ExpireReservation", activities.ExpireReservationInput{ReservationID: in.ReservationID}).Get(ctx, &res)
	return workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: res.Expired}, err
}

func TestReplayCatchesAChangedWorkflow(t *testing.T) {
	t.Parallel()
	requireReplayFails(t, changedReservation, workflows.ReservationWorkflowName, "reservation_expired.json")
}
