package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows"
)

const tokenID = "0f4e3b2a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

func newTokenEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newTestEnv()
	env.RegisterWorkflowWithOptions(workflows.LockerToken, workflow.RegisterOptions{Name: workflows.LockerTokenWorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.SetStartTime(start)
	return env
}

func tokenInput(expiresAt time.Time) workflows.LockerTokenInput {
	return workflows.LockerTokenInput{TokenID: tokenID, Type: "dropoff", ExpiresAt: expiresAt}
}

func tokenResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.LockerTokenState {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st workflows.LockerTokenState
	require.NoError(t, env.GetWorkflowResult(&st))
	return st
}

func tokenQuery(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.LockerTokenState {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.QueryTokenState)
	require.NoError(t, err)
	var st workflows.LockerTokenState
	require.NoError(t, v.Get(&st))
	return st
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
			env := newTokenEnv(t)
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
			env := newTokenEnv(t)
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
	env := newTokenEnv(t)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: false}, nil).Once()
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
	assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeUsed}, tokenResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 1)
}

// A signal that arrives after the timer fired changes nothing: the expiry already ran.
func TestLockerTokenLateSignal(t *testing.T) {
	t.Parallel()
	env := newTokenEnv(t)
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
	env := newTokenEnv(t)
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
	env := newTokenEnv(t)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{}, temporal.NewApplicationError("token not due yet", "NotDue")).Twice()
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: true}, nil).Once()
	env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
	assert.Equal(t, workflows.LockerTokenState{Outcome: workflows.TokenOutcomeExpired}, tokenResult(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 3)
}

// fakeTokens is the activities' store: not due for the first calls, then expired.
type fakeTokens struct {
	notDue int
	calls  []uuid.UUID
}

func (f *fakeTokens) ExpireToken(_ context.Context, id uuid.UUID) (bool, error) {
	f.calls = append(f.calls, id)
	if len(f.calls) <= f.notDue {
		return false, store.ErrNotDue
	}
	return true, nil
}

// The real activity and the workflow agree on the NotDue contract, and on bad input.
func TestLockerTokenWithTheRealActivity(t *testing.T) {
	t.Parallel()
	newEnv := func(fake *fakeTokens) *testsuite.TestWorkflowEnvironment {
		env := newTestEnv()
		env.SetStartTime(start)
		env.RegisterWorkflowWithOptions(workflows.LockerToken, workflow.RegisterOptions{Name: workflows.LockerTokenWorkflowName})
		env.RegisterActivity(&activities.Activities{Tokens: fake})
		return env
	}
	t.Run("not due, then expired", func(t *testing.T) {
		t.Parallel()
		fake := &fakeTokens{notDue: 2}
		env := newEnv(fake)
		env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, tokenInput(start.Add(time.Minute)))
		assert.Equal(t, workflows.TokenOutcomeExpired, tokenResult(t, env).Outcome)
		require.Len(t, fake.calls, 3)
		for _, id := range fake.calls {
			assert.Equal(t, tokenID, id.String())
		}
	})
	t.Run("a malformed id fails without retries", func(t *testing.T) {
		t.Parallel()
		fake := &fakeTokens{}
		env := newEnv(fake)
		env.ExecuteWorkflow(workflows.LockerTokenWorkflowName, workflows.LockerTokenInput{TokenID: "not-a-uuid", Type: "pickup", ExpiresAt: start})
		require.True(t, env.IsWorkflowCompleted())
		require.Error(t, env.GetWorkflowError())
		assert.Empty(t, fake.calls)
	})
}

// Recorded histories of real LockerToken runs (see TestRecordLockerTokenHistories).
var tokenHistories = []string{"lockertoken_expired.json", "lockertoken_used.json", "lockertoken_revoked.json"}

func TestReplayLockerToken(t *testing.T) {
	t.Parallel()
	replayHistories(t, workflows.LockerToken, workflows.LockerTokenWorkflowName, tokenHistories)
}

// changedLockerToken skips the timer: the kind of edit the replay test exists to catch.
func changedLockerToken(ctx workflow.Context, in workflows.LockerTokenInput) (workflows.LockerTokenState, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var res activities.ExpireTokenResult
	err := workflow.ExecuteActivity(ctx, "ExpireToken", activities.ExpireTokenInput{TokenID: in.TokenID}).Get(ctx, &res)
	return workflows.LockerTokenState{Outcome: workflows.TokenOutcomeExpired}, err
}

func TestReplayCatchesAChangedLockerToken(t *testing.T) {
	t.Parallel()
	requireReplayFails(t, changedLockerToken, workflows.LockerTokenWorkflowName, "lockertoken_expired.json")
}

// expireTokenAlways is the store behind the recording worker's activities.
type expireTokenAlways struct{}

func (expireTokenAlways) ExpireToken(context.Context, uuid.UUID) (bool, error) { return true, nil }

// TestRecordLockerTokenHistories runs the workflow on an embedded Temporal server and writes
// its histories to testdata/. Run it with LOCKERNET_RECORD_HISTORIES=1.
func TestRecordLockerTokenHistories(t *testing.T) {
	recordHistories(t)
	_, c := testenv.Temporal(t)
	const taskQueue = "record-locker-token-histories"
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, &activities.Activities{Tokens: expireTokenAlways{}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(expiresIn time.Duration, signal string) (client.WorkflowRun, workflows.LockerTokenState) {
		id := uuid.NewString()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.LockerTokenWorkflowID(id), TaskQueue: taskQueue},
			workflows.LockerTokenWorkflowName, workflows.LockerTokenInput{TokenID: id, Type: "dropoff", ExpiresAt: time.Now().Add(expiresIn)})
		require.NoError(t, err)
		if signal != "" {
			require.NoError(t, c.SignalWorkflow(ctx, r.GetID(), r.GetRunID(), workflows.SignalTokenEnded, signal))
		}
		var st workflows.LockerTokenState
		require.NoError(t, r.Get(ctx, &st))
		return r, st
	}

	r, st := run(time.Second, "")
	assert.Equal(t, workflows.TokenOutcomeExpired, st.Outcome)
	writeHistory(ctx, t, c, r, "lockertoken_expired.json")

	r, st = run(time.Hour, workflows.TokenOutcomeUsed)
	assert.Equal(t, workflows.TokenOutcomeUsed, st.Outcome)
	writeHistory(ctx, t, c, r, "lockertoken_used.json")

	r, st = run(time.Hour, workflows.TokenOutcomeRevoked)
	assert.Equal(t, workflows.TokenOutcomeRevoked, st.Outcome)
	writeHistory(ctx, t, c, r, "lockertoken_revoked.json")
}
