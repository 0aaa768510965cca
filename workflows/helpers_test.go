package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/store"
)

// What the workflow tests share: the test environment, reading a run's result, failure or
// query answer, and a fake store for the expiry activities. The helpers that record
// histories are in record_test.go.

// acts names the activities for mocks; its methods are never called on it.
var acts *activities.Activities

// start is the (skipped) clock's start in every test environment.
var start = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// newTestEnv is a test environment starting at start that tolerates a starved CPU: the
// SDK's deadlock detector (a workflow task must yield within 1 s of wall time) would
// otherwise fail a workflow on a busy machine.
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetTestTimeout(30 * time.Second)
	env.SetStartTime(start)
	return env
}

// newWorkflowEnv is newTestEnv with the workflow wf registered under name (as the worker
// registers it) and the activities of deps, which a test may mock with OnActivity.
func newWorkflowEnv(wf any, name string, deps *activities.Activities) *testsuite.TestWorkflowEnvironment {
	env := newTestEnv()
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: name})
	env.RegisterActivity(deps)
	return env
}

// resultOf requires the workflow to have completed without an error and returns its result.
func resultOf[T any](t *testing.T, env *testsuite.TestWorkflowEnvironment) T {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res T
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

// failureOf requires the workflow to have completed with an error and returns it.
func failureOf(t *testing.T, env *testsuite.TestWorkflowEnvironment) error {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	return err
}

// queryOf asks the workflow the query and returns its answer.
func queryOf[T any](t *testing.T, env *testsuite.TestWorkflowEnvironment, query string) T {
	t.Helper()
	v, err := env.QueryWorkflow(query)
	require.NoError(t, err)
	var st T
	require.NoError(t, v.Get(&st))
	return st
}

// fakeExpiries is the expiry activities' store (reservations and tokens): not due for the
// first notDue calls, then expired.
type fakeExpiries struct {
	mu     sync.Mutex
	notDue int
	calls  []uuid.UUID
}

func (f *fakeExpiries) expire(id uuid.UUID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id)
	if len(f.calls) <= f.notDue {
		return false, store.ErrNotDue
	}
	return true, nil
}

func (f *fakeExpiries) ExpireReservation(_ context.Context, id uuid.UUID) (bool, error) {
	return f.expire(id)
}
func (f *fakeExpiries) ExpireToken(_ context.Context, id uuid.UUID) (bool, error) {
	return f.expire(id)
}
