package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

const tokenID = "0f4e3b2a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

// tokenWorkflow is the locker-token workflow for the expiry workflows' tests
// (expiry_test.go).
var tokenWorkflow = expiryWorkflow{
	name:       contract.LockerTokenWorkflowName,
	id:         tokenID,
	workflowID: contract.LockerTokenWorkflowID,
	activity:   "ExpireToken",
	signal:     contract.SignalTokenEnded,
	newEnv: func(st *fakeExpiries) *testsuite.TestWorkflowEnvironment {
		deps := &activities.Activities{}
		if st != nil {
			deps.Tokens = st
		}
		return newWorkflowEnv(workflows.LockerToken, contract.LockerTokenWorkflowName, deps)
	},
	input: func(id string, expiresAt time.Time) any {
		return contract.LockerTokenInput{TokenID: id, Type: "dropoff", ExpiresAt: expiresAt}
	},
	onExpire: func(env *testsuite.TestWorkflowEnvironment, expired bool, err error, at *time.Time) *testsuite.MockCallWrapper {
		return mockExpiry(env, acts.ExpireToken, activities.ExpireTokenInput{TokenID: tokenID},
			activities.ExpireTokenResult{Expired: expired}, err, at)
	},
	state: func(outcome string, _ bool) any { return contract.LockerTokenState{Outcome: outcome} },
	result: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return resultOf[contract.LockerTokenState](t, env)
	},
	current: func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any {
		return queryOf[contract.LockerTokenState](t, env, contract.QueryTokenState)
	},
	active:  contract.TokenOutcomeActive,
	expired: contract.TokenOutcomeExpired,
	ends: []struct{ signal, want string }{
		{contract.TokenOutcomeUsed, contract.TokenOutcomeUsed},
		{contract.TokenOutcomeRevoked, contract.TokenOutcomeRevoked},
		{"something else", contract.TokenOutcomeRevoked},
	},
	// The timer fired while the use was being applied: Postgres says the token was not
	// expired (it was used), and the workflow reports the use.
	notExpired: contract.LockerTokenState{Outcome: contract.TokenOutcomeUsed},
}

func TestLockerTokenWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "locker-token/"+tokenID, contract.LockerTokenWorkflowID(tokenID))
}

// Every type of token expires the same way (TestExpiryWorkflowsExpire runs a drop-off token).
func TestLockerTokenExpiresWhateverItsType(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"pickup", "release"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			expiresAt := start.Add(24 * time.Hour)
			checkExpires(t, tokenWorkflow, tokenWorkflow.newEnv(nil), contract.LockerTokenInput{TokenID: tokenID, Type: typ, ExpiresAt: expiresAt}, expiresAt)
		})
	}
}

// A signal that arrives after the timer fired changes nothing: the expiry already ran.
func TestLockerTokenLateSignal(t *testing.T) {
	t.Parallel()
	env := tokenWorkflow.newEnv(nil)
	env.OnActivity(acts.ExpireToken, mock.Anything, mock.Anything).
		Return(activities.ExpireTokenResult{Expired: true}, nil).After(time.Second).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalTokenEnded, contract.TokenOutcomeUsed)
	}, time.Minute+500*time.Millisecond)
	env.ExecuteWorkflow(contract.LockerTokenWorkflowName, tokenWorkflow.input(tokenID, start.Add(time.Minute)))
	assert.Equal(t, contract.LockerTokenState{Outcome: contract.TokenOutcomeExpired}, tokenWorkflow.result(t, env))
	env.AssertActivityNumberOfCalls(t, "ExpireToken", 1)
}
