package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows"
)

const reservationID = "5b0f5f3e-2d4c-4c3a-9f0e-1a2b3c4d5e6f"

// reservationWorkflow is the reservation workflow for the expiry workflows' tests
// (expiry_test.go).
var reservationWorkflow = expiryWorkflow{
	name:       workflows.ReservationWorkflowName,
	id:         reservationID,
	workflowID: workflows.ReservationWorkflowID,
	activity:   "ExpireReservation",
	signal:     workflows.SignalReservationEnded,
	newEnv: func(st *fakeExpiries) *testsuite.TestWorkflowEnvironment {
		deps := &activities.Activities{}
		if st != nil {
			deps.Reservations = st
		}
		return newWorkflowEnv(workflows.Reservation, workflows.ReservationWorkflowName, deps)
	},
	input: func(id string, expiresAt time.Time) any {
		return workflows.ReservationInput{ReservationID: id, ExpiresAt: expiresAt}
	},
	onExpire: func(env *testsuite.TestWorkflowEnvironment, expired bool, err error, at *time.Time) *testsuite.MockCallWrapper {
		return mockExpiry(env, acts.ExpireReservation, activities.ExpireReservationInput{ReservationID: reservationID},
			activities.ExpireReservationResult{Expired: expired}, err, at)
	},
	state: func(outcome string, applied bool) any {
		return workflows.ReservationState{Outcome: outcome, ExpiryApplied: applied}
	},
	result: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return resultOf[workflows.ReservationState](t, env)
	},
	current: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return queryOf[workflows.ReservationState](t, env, workflows.QueryReservationState)
	},
	active:  workflows.OutcomeActive,
	expired: workflows.OutcomeExpired,
	ends: []struct{ signal, want string }{
		{workflows.OutcomeCancelled, workflows.OutcomeCancelled},
		{workflows.OutcomeConsumed, workflows.OutcomeConsumed},
		{"something else", workflows.OutcomeCancelled},
	},
	// The reservation had ended (consumed or cancelled) when the timer fired: the workflow
	// ends expired, its expiry not applied.
	notExpired: workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: false},
}

func TestReservationWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "reservation/"+reservationID, workflows.ReservationWorkflowID(reservationID))
}
