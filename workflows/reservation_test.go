package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// acts names the activities for mocks; its methods are never called on it.
var acts *activities.Activities

var start = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

const reservationID = "5b0f5f3e-2d4c-4c3a-9f0e-1a2b3c4d5e6f"

// newTestEnv is a test environment that tolerates a starved CPU: the SDK's deadlock
// detector (a workflow task must yield within 1 s of wall time) would otherwise fail a
// workflow on a busy machine.
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetTestTimeout(30 * time.Second)
	return env
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newTestEnv()
	env.RegisterWorkflowWithOptions(workflows.Reservation, workflow.RegisterOptions{Name: workflows.ReservationWorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.SetStartTime(start)
	return env
}

func input(expiresAt time.Time) workflows.ReservationInput {
	return workflows.ReservationInput{ReservationID: reservationID, ExpiresAt: expiresAt}
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.ReservationState {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st workflows.ReservationState
	require.NoError(t, env.GetWorkflowResult(&st))
	return st
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.ReservationState {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryReservationState)
	require.NoError(t, err)
	var st workflows.ReservationState
	require.NoError(t, v.Get(&st))
	return st
}

func TestReservationWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "reservation/"+reservationID, workflows.ReservationWorkflowID(reservationID))
}

func TestReservationExpires(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	expiresAt := start.Add(15 * time.Minute)
	var firedAt time.Time
	env.OnActivity(acts.ExpireReservation, mock.Anything, activities.ExpireReservationInput{ReservationID: reservationID}).
		Return(func(context.Context, activities.ExpireReservationInput) (activities.ExpireReservationResult, error) {
			firedAt = env.Now()
			return activities.ExpireReservationResult{Expired: true}, nil
		}).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(expiresAt))

	st := result(t, env)
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, st)
	env.AssertExpectations(t)
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 1)
	assert.False(t, firedAt.Before(expiresAt), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.True(t, firedAt.Before(expiresAt.Add(time.Second)), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.Equal(t, st, query(t, env), "the query answers the final state")
}

func TestReservationExpiryThatFreesNothing(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: false}, nil).Once()
	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: false}, result(t, env))
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
			env := newEnv(t)
			expiresAt := start.Add(15 * time.Minute)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(workflows.SignalReservationEnded, tc.signal)
			}, 5*time.Minute)

			env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(expiresAt))

			assert.Equal(t, workflows.ReservationState{Outcome: tc.want}, result(t, env))
			env.AssertActivityNumberOfCalls(t, "ExpireReservation", 0)
			assert.True(t, env.Now().Before(expiresAt), "the workflow ended at the signal (%s), not at the expiry", env.Now())
			assert.Equal(t, tc.want, query(t, env).Outcome)
		})
	}
}

func TestReservationExpiryInThePast(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var firedAt time.Time
	env.OnActivity(acts.ExpireReservation, mock.Anything, activities.ExpireReservationInput{ReservationID: reservationID}).
		Return(func(context.Context, activities.ExpireReservationInput) (activities.ExpireReservationResult, error) {
			firedAt = env.Now()
			return activities.ExpireReservationResult{Expired: true}, nil
		}).Once()

	// A start that arrives late (the outbox retried) keeps the original deadline.
	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(-time.Hour)))

	assert.Equal(t, workflows.OutcomeExpired, result(t, env).Outcome)
	assert.True(t, firedAt.Before(start.Add(time.Second)), "fired at once, at %s", firedAt)
}

func TestReservationQueryWhileActive(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: true}, nil).Once()
	queried := false
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeActive}, query(t, env))
		queried = true
	}, time.Minute)

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(10*time.Minute)))

	require.True(t, queried)
	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, query(t, env))
}

func TestReservationRetriesNotDue(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{}, temporal.NewApplicationError("reservation not due yet", "NotDue")).Once()
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{Expired: true}, nil).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

	assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, result(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 2)
}

func TestReservationFailsOnInvalidInput(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.OnActivity(acts.ExpireReservation, mock.Anything, mock.Anything).
		Return(activities.ExpireReservationResult{}, temporal.NewNonRetryableApplicationError("bad reservation id", "InvalidInput", nil)).Once()

	env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	env.AssertActivityNumberOfCalls(t, "ExpireReservation", 1)
}

// fakeReservations is the activities' store: not due for the first calls, then expired.
type fakeReservations struct {
	notDue int
	calls  []uuid.UUID
}

func (f *fakeReservations) ExpireReservation(_ context.Context, id uuid.UUID) (bool, error) {
	f.calls = append(f.calls, id)
	if len(f.calls) <= f.notDue {
		return false, store.ErrNotDue
	}
	return true, nil
}

// The real activity and the workflow agree on the NotDue contract: the database clock
// running a moment behind the timer costs a retry, never a stuck locker.
func TestReservationWithTheRealActivity(t *testing.T) {
	t.Parallel()
	t.Run("not due, then expired", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv()
		env.SetStartTime(start)
		fake := &fakeReservations{notDue: 2}
		env.RegisterWorkflowWithOptions(workflows.Reservation, workflow.RegisterOptions{Name: workflows.ReservationWorkflowName})
		env.RegisterActivity(&activities.Activities{Reservations: fake})

		env.ExecuteWorkflow(workflows.ReservationWorkflowName, input(start.Add(time.Minute)))

		assert.Equal(t, workflows.ReservationState{Outcome: workflows.OutcomeExpired, ExpiryApplied: true}, result(t, env))
		require.Len(t, fake.calls, 3)
		for _, id := range fake.calls {
			assert.Equal(t, reservationID, id.String())
		}
	})
	t.Run("a malformed id fails without retries", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv()
		fake := &fakeReservations{}
		env.RegisterWorkflowWithOptions(workflows.Reservation, workflow.RegisterOptions{Name: workflows.ReservationWorkflowName})
		env.RegisterActivity(&activities.Activities{Reservations: fake})

		env.ExecuteWorkflow(workflows.ReservationWorkflowName, workflows.ReservationInput{ReservationID: "not-a-uuid", ExpiresAt: env.Now()})

		require.True(t, env.IsWorkflowCompleted())
		require.Error(t, env.GetWorkflowError())
		assert.Empty(t, fake.calls)
	})
}
