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
)

// expiryWorkflow is one of the two expiry workflows (a reservation's, a locker token's) as
// the tests below drive both: each holds a timer until its expiry, ends early on a signal,
// and expires through an activity that answers NotDue while the database's clock is behind.
type expiryWorkflow struct {
	name     string // workflow type
	id       string // the hold's id
	activity string // the expiry activity
	// workflowID is the workflow id of the hold id.
	workflowID func(id string) string
	signal     string // the ended signal
	// newEnv runs the workflow with the real activities over st (nil: mocked where a test
	// says so).
	newEnv func(st *fakeExpiries) *testsuite.TestWorkflowEnvironment
	input  func(id string, expiresAt time.Time) any
	// onExpire mocks the expiry activity: it answers expired (or err) and, with at, records
	// when it ran.
	onExpire func(env *testsuite.TestWorkflowEnvironment, expired bool, err error, at *time.Time) *testsuite.MockCallWrapper
	// state is the workflow's state with outcome; applied: the expiry was written (only a
	// reservation's state says so).
	state   func(outcome string, applied bool) any
	result  func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any
	current func(t *testing.T, env *testsuite.TestWorkflowEnvironment) any
	// active and expired are the outcomes while held and once expired; ends are the signals
	// that end the hold early and the outcome each leaves; notExpired is the final state when
	// the expiry finds the hold already ended.
	active, expired string
	ends            []struct{ signal, want string }
	notExpired      any
}

var expiryWorkflows = []expiryWorkflow{reservationWorkflow, tokenWorkflow}

// checkExpires: the hold's timer fires at its expiry, the activity runs once, and the query
// answers active before and the final state after.
func checkExpires(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment, in any, expiresAt time.Time) {
	t.Helper()
	var firedAt time.Time
	w.onExpire(env, true, nil, &firedAt).Once()
	queried := false
	env.RegisterDelayedCallback(func() {
		assert.Equal(t, w.state(w.active, false), w.current(t, env))
		queried = true
	}, time.Minute)

	env.ExecuteWorkflow(w.name, in)

	st := w.result(t, env)
	assert.Equal(t, w.state(w.expired, true), st)
	env.AssertExpectations(t)
	env.AssertActivityNumberOfCalls(t, w.activity, 1)
	assert.True(t, queried)
	assert.False(t, firedAt.Before(expiresAt), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.True(t, firedAt.Before(expiresAt.Add(time.Second)), "fired at %s, expiry %s", firedAt, expiresAt)
	assert.Equal(t, st, w.current(t, env), "the query answers the final state")
}

func TestExpiryWorkflowsExpire(t *testing.T) {
	eachExpiryWorkflow(t, func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment) {
		expiresAt := start.Add(15 * time.Minute)
		checkExpires(t, w, env, w.input(w.id, expiresAt), expiresAt)
	})
}

// A signal before the expiry ends the workflow at once, without the activity.
func TestExpiryWorkflowsEndBeforeExpiry(t *testing.T) {
	t.Parallel()
	for _, w := range expiryWorkflows {
		for _, tc := range w.ends {
			t.Run(w.name+"/"+tc.signal, func(t *testing.T) {
				t.Parallel()
				env := w.newEnv(nil)
				expiresAt := start.Add(15 * time.Minute)
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(w.signal, tc.signal)
				}, 5*time.Minute)

				env.ExecuteWorkflow(w.name, w.input(w.id, expiresAt))

				assert.Equal(t, w.state(tc.want, false), w.result(t, env))
				env.AssertActivityNumberOfCalls(t, w.activity, 0)
				assert.True(t, env.Now().Before(expiresAt), "ended at the signal (%s), not at the expiry", env.Now())
				assert.Equal(t, w.state(tc.want, false), w.current(t, env))
			})
		}
	}
}

// The timer fires while the hold is being ended: Postgres says it was not expired.
func TestExpiryWorkflowsExpiryFindsItEnded(t *testing.T) {
	eachExpiryWorkflow(t, func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment) {
		w.onExpire(env, false, nil, nil).Once()
		env.ExecuteWorkflow(w.name, w.input(w.id, start.Add(time.Minute)))
		assert.Equal(t, w.notExpired, w.result(t, env))
		env.AssertActivityNumberOfCalls(t, w.activity, 1)
	})
}

// A start that arrives after the expiry (the outbox retried) keeps the original deadline:
// the hold expires at once.
func TestExpiryWorkflowsExpiryInThePast(t *testing.T) {
	eachExpiryWorkflow(t, func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment) {
		var firedAt time.Time
		w.onExpire(env, true, nil, &firedAt).Once()
		env.ExecuteWorkflow(w.name, w.input(w.id, start.Add(-time.Hour)))
		assert.Equal(t, w.state(w.expired, true), w.result(t, env))
		assert.True(t, firedAt.Before(start.Add(time.Second)), "fired at once, at %s", firedAt)
	})
}

func TestExpiryWorkflowsRetryNotDue(t *testing.T) {
	eachExpiryWorkflow(t, func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment) {
		w.onExpire(env, false, temporal.NewApplicationError("not due yet", "NotDue"), nil).Twice()
		w.onExpire(env, true, nil, nil).Once()
		env.ExecuteWorkflow(w.name, w.input(w.id, start.Add(time.Minute)))
		assert.Equal(t, w.state(w.expired, true), w.result(t, env))
		env.AssertActivityNumberOfCalls(t, w.activity, 3)
	})
}

func TestExpiryWorkflowsFailOnInvalidInput(t *testing.T) {
	eachExpiryWorkflow(t, func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment) {
		w.onExpire(env, false, temporal.NewNonRetryableApplicationError("bad id", "InvalidInput", nil), nil).Once()
		env.ExecuteWorkflow(w.name, w.input(w.id, start.Add(time.Minute)))
		failureOf(t, env)
		env.AssertActivityNumberOfCalls(t, w.activity, 1)
	})
}

// The real activity and the workflow agree on the NotDue contract (the database clock
// running a moment behind the timer costs a retry, never a stuck locker), and on bad input.
func TestExpiryWorkflowsWithTheRealActivity(t *testing.T) {
	t.Parallel()
	for _, w := range expiryWorkflows {
		t.Run(w.name+"/not due, then expired", func(t *testing.T) {
			t.Parallel()
			fake := &fakeExpiries{notDue: 2}
			env := w.newEnv(fake)
			env.ExecuteWorkflow(w.name, w.input(w.id, start.Add(time.Minute)))
			assert.Equal(t, w.state(w.expired, true), w.result(t, env))
			require.Len(t, fake.calls, 3)
			for _, id := range fake.calls {
				assert.Equal(t, w.id, id.String())
			}
		})
		t.Run(w.name+"/a malformed id fails without retries", func(t *testing.T) {
			t.Parallel()
			fake := &fakeExpiries{}
			env := w.newEnv(fake)
			env.ExecuteWorkflow(w.name, w.input("not-a-uuid", start))
			failureOf(t, env)
			assert.Empty(t, fake.calls)
		})
	}
}

// eachExpiryWorkflow runs test on each expiry workflow, in parallel, in an environment of its
// own with the activities mocked.
func eachExpiryWorkflow(t *testing.T, test func(t *testing.T, w expiryWorkflow, env *testsuite.TestWorkflowEnvironment)) {
	t.Parallel()
	for _, w := range expiryWorkflows {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			test(t, w, w.newEnv(nil))
		})
	}
}

// mockExpiry mocks an expiry activity for the hold id: it answers out (or err) and, with
// at, records when it ran.
func mockExpiry[In, Out any](env *testsuite.TestWorkflowEnvironment, activity any, in In, out Out, err error, at *time.Time) *testsuite.MockCallWrapper {
	return env.OnActivity(activity, mock.Anything, in).Return(func(context.Context, In) (Out, error) {
		if at != nil {
			*at = env.Now()
		}
		return out, err
	})
}
