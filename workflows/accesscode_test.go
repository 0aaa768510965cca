package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

const codeID = "3c9a1f0e-7b2d-4e8f-9a1b-2c3d4e5f6a7b"

// codeFakes stands in for the access-code activities and the hold release's gateway request:
// releases answers the HTTP status of each release in turn (the last one repeats).
type codeFakes struct {
	mu       sync.Mutex
	releases []int
	calls    []string
	notYet   int // AwaitGatewayRequest answers NotSettled this many times first
	expired  activities.ExpireAccessCodeResult
	policy   gatewayreq.Policy   // PrepareHoldRelease puts it in the spec
	policies []gatewayreq.Policy // the policies the release requests ran under
}

func (f *codeFakes) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *codeFakes) awaitGatewayRequest(_ context.Context, in activities.AwaitGatewayRequestInput) (string, error) {
	f.record("await " + in.RequestID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notYet > 0 {
		f.notYet--
		return "", temporal.NewApplicationError("gateway request not settled yet", "NotSettled")
	}
	return gatewayreq.StateCompleted, nil
}

func (f *codeFakes) expireAccessCode(_ context.Context, in activities.ExpireAccessCodeInput) (activities.ExpireAccessCodeResult, error) {
	f.record("expire " + in.CodeID)
	return f.expired, nil
}

func (f *codeFakes) prepareHoldRelease(_ context.Context, in activities.PrepareHoldReleaseInput) (gatewayreq.Spec, error) {
	f.record("prepare release")
	// The request id is derived from the code and the attempt, as the real activity does.
	id := uuid.NewSHA1(uuid.MustParse(in.CodeID), fmt.Appendf(nil, "release/%d", in.Attempt)).String()
	return gatewayreq.Spec{RequestID: id, OrganizationID: 1, LocationID: 7, GatewayID: 3, GatewaySerial: "GW-0001",
		Kind: gatewayreq.KindAccessCodeRelease, Class: gatewayreq.ClassWrite, Method: "DELETE", Path: "/transactions/" + in.CodeID,
		Policy: f.policy}, nil
}

func (f *codeFakes) gatewayRequest(ctx workflow.Context, in gatewayreq.Spec) (gatewayreq.Result, error) {
	f.mu.Lock()
	status := f.releases[0]
	if len(f.releases) > 1 {
		f.releases = f.releases[1:]
	}
	f.calls = append(f.calls, "gateway "+in.Method+" "+in.Path)
	f.policies = append(f.policies, in.Policy)
	f.mu.Unlock()
	return gatewayreq.Result{Outcome: gatewayreq.Outcome{Status: gatewayreq.StateCompleted, HTTPStatus: status}}, nil
}

func (f *codeFakes) register(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(workflows.AccessCode, workflow.RegisterOptions{Name: contract.AccessCodeWorkflowName})
	r.RegisterWorkflowWithOptions(f.gatewayRequest, workflow.RegisterOptions{Name: contract.GatewayRequestWorkflowName})
	r.RegisterActivityWithOptions(f.awaitGatewayRequest, activity.RegisterOptions{Name: "AwaitGatewayRequest"})
	r.RegisterActivityWithOptions(f.expireAccessCode, activity.RegisterOptions{Name: "ExpireAccessCode"})
	r.RegisterActivityWithOptions(f.prepareHoldRelease, activity.RegisterOptions{Name: "PrepareHoldRelease"})
}

func newCodeEnv(f *codeFakes) *testsuite.TestWorkflowEnvironment {
	env := newTestEnv()
	f.register(env)
	return env
}

// codeResult is the finished workflow's AccessCodeState.
var codeResult = resultOf[contract.AccessCodeState]

func TestAccessCodeWorkflowID(t *testing.T) {
	assert.Equal(t, "access-code/"+codeID, contract.AccessCodeWorkflowID(codeID))
}

// The outcomes are in recorded histories, in the signals the apiserver sends through the
// outbox, and they are the store's access-code statuses (an expiry that found the code
// ended reports its status): their values never change.
func TestAccessCodeOutcomesAgree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ outcome, value, status string }{
		{contract.CodeOutcomeActive, "active", store.CodeActive},
		{contract.CodeOutcomeExpired, "expired", store.CodeExpired},
		{contract.CodeOutcomeRemoved, "removed", store.CodeRemoved},
		{contract.CodeOutcomeUsed, "used", store.CodeUsed},
	} {
		assert.Equal(t, tc.value, tc.outcome)
		assert.Equal(t, tc.status, tc.outcome)
	}
}

func TestAccessCodeExpiresThenReleasesItsHold(t *testing.T) {
	t.Parallel()
	f := &codeFakes{releases: []int{204}, expired: activities.ExpireAccessCodeResult{Expired: true}}
	env := newCodeEnv(f)
	expiresAt := start.Add(24 * time.Hour)
	var activeBefore contract.AccessCodeState
	env.RegisterDelayedCallback(func() {
		activeBefore = queryOf[contract.AccessCodeState](t, env, contract.QueryAccessCodeState)
	}, 23*time.Hour)
	var expiredAt time.Time
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "ExpireAccessCode" {
			expiredAt = env.Now()
		}
	})
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: expiresAt})

	st := codeResult(t, env)
	assert.Equal(t, contract.CodeOutcomeActive, activeBefore.Outcome, "active until its expiry")
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeExpired, Released: true, Releases: 1}, st)
	assert.False(t, expiredAt.Before(expiresAt), "not expired before its time")
	assert.WithinDuration(t, expiresAt, expiredAt, time.Second)
	assert.Equal(t, []string{"expire " + codeID, "prepare release", "gateway DELETE /transactions/" + codeID}, f.calls)
}

func TestAccessCodeExpiryFindsItAlreadyEnded(t *testing.T) {
	t.Parallel()
	// The code was used just before the timer fired: the expiry changes nothing.
	f := &codeFakes{releases: []int{204}, expired: activities.ExpireAccessCodeResult{Expired: false, Status: "used"}}
	env := newCodeEnv(f)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start.Add(time.Hour)})
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeUsed, Released: true, Releases: 1}, codeResult(t, env))
}

func TestAccessCodeEndsEarlyOnSignal(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{contract.CodeOutcomeRemoved, contract.CodeOutcomeUsed} {
		t.Run(reason, func(t *testing.T) {
			t.Parallel()
			f := &codeFakes{releases: []int{204}}
			env := newCodeEnv(f)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.SignalCodeEnded, reason) }, time.Minute)
			env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start.Add(30 * 24 * time.Hour)})
			assert.Equal(t, contract.AccessCodeState{Outcome: reason, Released: true, Releases: 1}, codeResult(t, env))
			assert.NotContains(t, f.calls, "expire "+codeID)
			assert.Less(t, env.Now().Sub(start), time.Hour, "it did not wait for the expiry")
		})
	}
}

func TestAccessCodeRetriesTheReleaseUntilTheGatewayConfirms(t *testing.T) {
	t.Parallel()
	// 503 and 500 from the gateway: not released; 404: the hold is gone, which is released too.
	f := &codeFakes{releases: []int{503, 500, 404}}
	env := newCodeEnv(f)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, Ended: true})
	st := codeResult(t, env)
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeRemoved, Released: true, Releases: 3}, st)
	assert.GreaterOrEqual(t, env.Now().Sub(start), 45*time.Second, "backs off 15 s, then 30 s")
}

// A gateway that stays offline: when Temporal suggests it, the release loop continues as new,
// carrying the outcome, the attempts made and the back-off reached.
func TestAccessCodeReleaseContinuesAsNew(t *testing.T) {
	t.Parallel()
	f := &codeFakes{releases: []int{503}}
	env := newCodeEnv(f)
	env.SetContinueAsNewSuggested(true)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, Ended: true, Outcome: contract.CodeOutcomeUsed, Releases: 4, Backoff: 2 * time.Minute})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, failureOf(t, env), &can)
	assert.Equal(t, contract.AccessCodeWorkflowName, can.WorkflowType.Name)
	var next contract.AccessCodeInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, Ended: true, Outcome: contract.CodeOutcomeUsed, Releases: 5, Backoff: 4 * time.Minute}, next)
	assert.GreaterOrEqual(t, env.Now().Sub(start), 2*time.Minute, "it waited the carried back-off first")

	// The next run goes on from there and reports the whole count.
	f = &codeFakes{releases: []int{204}}
	env = newCodeEnv(f)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, next)
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeUsed, Released: true, Releases: 6}, codeResult(t, env))
}

// The release runs under the policy PrepareHoldRelease put in its spec (the worker's
// settings), not the defaults.
func TestAccessCodeReleaseRunsUnderThePreparedPolicy(t *testing.T) {
	t.Parallel()
	policy := gatewayreq.Policy{CallTimeout: 3 * time.Second, DispatchAttempts: 5}
	f := &codeFakes{releases: []int{503, 204}, policy: policy}
	env := newCodeEnv(f)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, Ended: true})
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeRemoved, Released: true, Releases: 2}, codeResult(t, env))
	assert.Equal(t, []gatewayreq.Policy{policy, policy}, f.policies)
}

func TestAccessCodeWaitsForALateHold(t *testing.T) {
	t.Parallel()
	const hold = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
	f := &codeFakes{releases: []int{204}, notYet: 2}
	env := newCodeEnv(f)
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, HoldRequestID: hold, Ended: true})
	assert.Equal(t, contract.AccessCodeState{Outcome: contract.CodeOutcomeRemoved, Released: true, Releases: 1}, codeResult(t, env))
	require.Len(t, f.calls, 5)
	assert.Equal(t, []string{"await " + hold, "await " + hold, "await " + hold}, f.calls[:3], "the release waits until the hold settled")
}

func TestAccessCodeFailsOnBadInput(t *testing.T) {
	t.Parallel()
	f := &codeFakes{releases: []int{204}}
	env := newCodeEnv(f)
	env.OnActivity("PrepareHoldRelease", mock.Anything, mock.Anything).Return(gatewayreq.Spec{},
		temporal.NewNonRetryableApplicationError("no such code", "InvalidInput", nil))
	env.ExecuteWorkflow(contract.AccessCodeWorkflowName, contract.AccessCodeInput{CodeID: codeID, ExpiresAt: start, Ended: true})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(failureOf(t, env), &appErr))
	assert.Equal(t, "InvalidInput", appErr.Type())
}
