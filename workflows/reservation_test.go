package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows"
)

const reservationID = "5b0f5f3e-2d4c-4c3a-9f0e-1a2b3c4d5e6f"

// newReservationEnv runs the reservation workflow with the activities over st (nil: mocked
// where a test says so).
func newReservationEnv(st activities.ReservationStore) *testsuite.TestWorkflowEnvironment {
	return newWorkflowEnv(workflows.Reservation, workflows.ReservationWorkflowName, &activities.Activities{Reservations: st})
}

func input(expiresAt time.Time) workflows.ReservationInput {
	return workflows.ReservationInput{ReservationID: reservationID, ExpiresAt: expiresAt}
}

// reservationResult is the finished workflow's ReservationState.
var reservationResult = resultOf[workflows.ReservationState]

func reservationQuery(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.ReservationState {
	t.Helper()
	return queryOf[workflows.ReservationState](t, env, workflows.QueryReservationState)
}

func TestReservationWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "reservation/"+reservationID, workflows.ReservationWorkflowID(reservationID))
}

func TestReservationExpires(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	expiresAt := start.Add(15 * time.Minute)
	var firedAt time.Time
	env.OnActivity(acts.ExpireReservation, mock.Anything, activities.ExpireReservationInput{ReservationID: reservationID}).
		Return(func(context.Context, activities.ExpireReservationInput) (activities.ExpireReservationResult, error) {
			firedAt = env.Now()
			return activities.ExpireReservationResult{Expired: true}, nil
		}).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(expiresAt))

	st := reservationResult(t, env)
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, st)
	env.AssertExpectations(t)
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 1)
	assert.False(t, firedAt.Before(expiresAt), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.True(t, firedAt.Before(expiresAt.Add(time.Second)), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.Equal(t, st, reservationQuery(t, env), "the query answers the final state")
}

func TestReservationExpiryThatFreesNothing(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: false}, nil).Once()
	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: false}, reservationResult(t, env))
}

func TestReservationEndsBeforeExpiry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		signal, want string
	}{
		{workflows.OutcomeCancelled, workflows.OutcomeCancelled},
		{workflows.OutcomeConsumed, workflows.OutcomeConsumed},
		{"something else", workflows.OutcomeCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.signal, func(t *testing.T) {
			t.Parallel()
			env := newReservationEnv(nil)
			expiresAt := start.Add(15 * time.Minute)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(workflows.SignalReservationEnded, tc.signal)
			}, 5*time.Minute)

			env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(expiresAt))

			assert.Equal(t, workflows.ReservationState{Outcome: tc.want}, reservationResult(t, env))
			env.AssertActivityNumberOfCalls(t, "ExpireReservation", 0)
			assert.True(t, env.Now().Before(expiresAt), "the workflow ended at the signal (%s), not at the expiry", env.Now())
			assert.Equal(t, tc.want, reservationQuery(t, env).Outcome)
		})
	}
}

func TestReservationExpiryInThePast(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	var firedAt time.Time
	env.OnActivity(acts.ExpireReservation, mock.Anything, activities.ExpireReservationInput{ReservationID: reservationID}).
		Return(func(context.Context, activities.ExpireReservationInput) (activities.ExpireReservationResult, error) {
			firedAt = env.Now()
			return activities.ExpireReservationResult{Expired: true}, nil
		}).Once()

	// A start that arrives late (the outbox retried) keeps the original deadline.
	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(-time.Hour)))

	assert.Equal(t, workflows.OutcomeExpired, reservationResult(t, env).Outcome)
	assert.True(t, firedAt.Before(start.Add(time.Second)), "fired at once, at %s", firedAt)
}

func TestReservationQueryWhileActive(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: true}, nil).Once()
	queried := false
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeActive}, reservationQuery(t, env))
		queried = true
	}, time.Minute)

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(10*time.Minute)))

	require.True(t, queried)
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, reservationQuery(t, env))
}

func TestReservationRetriesNotDue(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{}, temporal.NewApplicationError("reservation not due yet", "NotDue")).Once()
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: true}, nil).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, reservationResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 2)
}

func TestReservationFailsOnInvalidInput(t *testing.T) {
	t.Parallel()
	env := newReservationEnv(nil)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{}, temporal.NewNonRetryableApplicationError("bad reservation id", "InvalidInput", nil)).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

	failureOf(t, env)
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 1)
}

// The real activity and the workflow agree on the NotDue contract: the database clock
// running a moment behind the timer costs a retry, never a stuck locker.
func TestReservationWithTheRealActivity(t *testing.T) {
	t.Parallel()
	t.Run("not due, then expired", func(t *testing.T) {
		t.Parallel()
		fake := &fakeExpiries{notDue: 2}
		env := newReservationEnv(fake)

		env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

		assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, reservationResult(t, env))
		require.Len(t, fake.calls, 3)
		for _, id := range fake.calls {
			assert.Equal(t, reservationID, id.String())
		}
	})
	t.Run("a malformed id fails without retries", func(t *testing.T) {
		t.Parallel()
		fake := &fakeExpiries{}
		env := newReservationEnv(fake)

		env.ExecuteWorkflow(workflows.ReservationWorkflowName, workflows.ReservationInput{ReservationID: "not-a-uuid", ExpiresAt: env.Now()})

		failureOf(t, env)
		assert.Empty(t, fake.calls)
	})
}
