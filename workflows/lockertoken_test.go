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

const tokenID = "0f4e3b2a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

// newTokenEnv runs the locker-token workflow with the activities over st (nil: mocked where
// a test says so).
func newTokenEnv(st activities.TokenStore) *testsuite.TestWorkflowEnvironment {
	return newWorkflowEnv(workflows.LockerToken, workflows.LockerTokenWorkflowName, &activities.Activities{Tokens: st})
}

func tokenInput(expiresAt time.Time) workflows.LockerTokenInput {
	return workflows.LockerTokenInput{TokenID: tokenID, Type: "dropoff", ExpiresAt: expiresAt}
}

// tokenResult is the finished workflow's LockerTokenState.
var tokenResult = resultOf[workflows.LockerTokenState]

func tokenQuery(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.LockerTokenState {
	t.Helper()
	return queryOf[workflows.LockerTokenState](t, env, workflows.QueryTokenState)
}

func TestLockerTokenWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "locker-token/"+tokenID, workflows.LockerTokenWorkflowID(tokenID))
}

// An unused token's timer fires at its expiry; the activity runs once.
func TestLockerTokenExpires(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"dropoff", "pickup", "release"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			env := newTokenEnv(nil)
			expiresAt := start.Add(24 * time.Hour)
			var firedAt time.Time
			env.OnActivity(acts.ExpireToken, mock.Anything, activities.ExpireTokenInput{TokenID: tokenID}).
				Return(func(context.Context, activities.ExpireTokenInput) (activities.ExpireTokenResult, error) {
					firedAt = env.Now()
					return activities.ExpireTokenResult{Expired: true}, nil
				}).Once()
			queried := false
			env.RegisterDelayedCallback(func() {
				assert.Equal(t, workflows.TokenOutcomeActive, tokenQuery(t, env).Outcome)
				queried = true
			}, time.Hour)

			in := tokenInput(expiresAt)
			in.Type = typ
			env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, in)

			st := tokenResult(t, env)
			assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeExpired}, st)
			env.AssertExpectations(t)
			env.AssertActivityNumberOfCalls(t, "ExpireToken", 1)
			assert.True(t, queried)
			assert.False(t, firedAt.Before(expiresAt), "fired at %s, expiry %s", firedAt, expiresAt)
			assert.True(t, firedAt.Before(expiresAt.Add(time.Second)), "fired at %s, expiry %s", firedAt, expiresAt)
			assert.Equal(t, st, tokenQuery(t, env), "the query answers the final state")
		})
	}
}

// A use or a revocation before the expiry ends the workflow at once, without the activity.
func TestLockerTokenEndsBeforeExpiry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ signal, want string }{
		{workflows.TokenOutcomeUsed, workflows.TokenOutcomeUsed},
		{workflows.TokenOutcomeRevoked, workflows.TokenOutcomeRevoked},
		{"something else", workflows.TokenOutcomeRevoked},
	} {
		t.Run(tc.signal, func(t *testing.T) {
			t.Parallel()
			env := newTokenEnv(nil)
			expiresAt := start.Add(15 * time.Minute)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(workflows.SignalTokenEnded, tc.signal)
			}, 5*time.Minute)

			env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(expiresAt))

			assert.Equal(t, workflows.LockerTokenState{Outcome: tc.want}, tokenResult(t, env))
			env.AssertActivityNumberOfCalls(t, "ExpireToken", 0)
			assert.True(t, env.Now().Before(expiresAt), "ended at the signal (%s), not at the expiry", env.Now())
			assert.Equal(t, tc.want, tokenQuery(t, env).Outcome)
		})
	}
}

// The timer fires while the use is being applied: Postgres says the token was not expired
// (it was used), and the workflow reports the use.
func TestLockerTokenExpiryRacingAUse(t *testing.T) {
	t.Parallel()
	env := newTokenEnv(nil)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: false}, nil).Once()
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
	assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeUsed}, tokenResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 1)
}

// A signal that arrives after the timer fired changes nothing: the expiry already ran.
func TestLockerTokenLateSignal(t *testing.T) {
	t.Parallel()
	env := newTokenEnv(nil)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: true}, nil).After(time.Second).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalTokenEnded, workflows.TokenOutcomeUsed)
	}, time.Minute+500*time.Millisecond)
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
	assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeExpired}, tokenResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 1)
}

// A start that arrives after the expiry (the outbox retried) expires the token at once.
func TestLockerTokenExpiryInThePast(t *testing.T) {
	t.Parallel()
	env := newTokenEnv(nil)
	var firedAt time.Time
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(func(context.Context, activities.ExpireTokenInput) (activities.ExpireTokenResult, error) {
			firedAt = env.Now()
			return activities.ExpireTokenResult{Expired: true}, nil
		}).Once()
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(-time.Hour)))
	assert.Equal(t, workflows.TokenOutcomeExpired, tokenResult(t, env).Outcome)
	assert.True(t, firedAt.Before(start.Add(time.Second)), "fired at once, at %s", firedAt)
}

func TestLockerTokenRetriesNotDue(t *testing.T) {
	t.Parallel()
	env := newTokenEnv(nil)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{}, temporal.NewApplicationError("token not due yet", "NotDue")).Twice()
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: true}, nil).Once()
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
	assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeExpired}, tokenResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 3)
}

// The real activity and the workflow agree on the NotDue contract, and on bad input.
func TestLockerTokenWithTheRealActivity(t *testing.T) {
	t.Parallel()
	t.Run("not due, then expired", func(t *testing.T) {
		t.Parallel()
		fake := &fakeExpiries{notDue: 2}
		env := newTokenEnv(fake)
		env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
		assert.Equal(t, workflows.TokenOutcomeExpired, tokenResult(t, env).Outcome)
		require.Len(t, fake.calls, 3)
		for _, id := range fake.calls {
			assert.Equal(t, tokenID, id.String())
		}
	})
	t.Run("a malformed id fails without retries", func(t *testing.T) {
		t.Parallel()
		fake := &fakeExpiries{}
		env := newTokenEnv(fake)
		env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, workflows.LockerTokenInput{TokenID: "not-a-uuid", Type: "pickup", ExpiresAt: start})
		failureOf(t, env)
		assert.Empty(t, fake.calls)
	})
}
