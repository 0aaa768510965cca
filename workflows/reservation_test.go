package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

const reservationID = "5b0f5f3e-2d4c-4c3a-9f0e-1a2b3c4d5e6f"

// reservationWorkflow is the reservation workflow for the expiry workflows' tests
// (expiry_test.go).
var reservationWorkflow = expiryWorkflow{
	name:       contract.ReservationWorkflowName,
	id:         reservationID,
	workflowID: contract.ReservationWorkflowID,
	activity:   "ExpireReservation",
	signal:     contract.SignalReservationEnded,
	newEnv: func(st *fakeExpiries) *testsuite.TestWorkflowEnvironment {
		deps := &activities.Activities{}
		if st != nil {
			deps.Reservations = st
		}
		return newWorkflowEnv(workflows.Reservation, contract.ReservationWorkflowName, deps)
	},
	input: func(id string, expiresAt time.Time) any {
		return contract.ReservationInput{ReservationID: id, ExpiresAt: expiresAt}
	},
	onExpire: func(env *testsuite.TestWorkflowEnvironment, expired bool, err error, at *time.Time) *testsuite.MockCallWrapper {
		return mockExpiry(env, acts.ExpireReservation, activities.ExpireReservationInput{ReservationID: reservationID},
			activities.ExpireReservationResult{Expired: expired}, err, at)
	},
	state: func(outcome string, applied bool) any {
		return contract.ReservationState{Outcome: outcome, ExpiryApplied: applied}
	},
	result: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return resultOf[contract.ReservationState](t, env)
	},
	current: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return queryOf[contract.ReservationState](t, env, contract.QueryReservationState)
	},
	active:  contract.OutcomeActive,
	expired: contract.OutcomeExpired,
	ends: []struct{ signal, want string }{
		{contract.OutcomeCancelled, contract.OutcomeCancelled},
		{contract.OutcomeConsumed, contract.OutcomeConsumed},
		{"something else", contract.OutcomeCancelled},
	},
	// The reservation had ended (consumed or cancelled) when the timer fired: the workflow
	// ends expired, its expiry not applied.
	notExpired: contract.ReservationState{Outcome: contract.OutcomeExpired, ExpiryApplied: false},
}

func TestReservationWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "reservation/"+reservationID, contract.ReservationWorkflowID(reservationID))
}
