package workflows_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/workflows"
	"github.com/lockernet/lockernet/workflows/contract"
)

const gatewayRequestID = "0b9a6c1e-3f2d-4e5a-8b7c-6d5e4f3a2b1c"

// newGatewayEnv runs the gateway-request workflow; its activities are mocked.
func newGatewayEnv() *testsuite.TestWorkflowEnvironment {
	return newWorkflowEnv(workflows.GatewayRequest, contract.GatewayRequestWorkflowName, &activities.Activities{})
}

func gatewayInput(kind, class, method, path string, body []byte) gatewayreq.Spec {
	return gatewayreq.Spec{
		RequestID: gatewayRequestID, OrganizationID: 1, LocationID: 4, GatewayID: 1, GatewaySerial: "GW-0001",
		Kind: kind, Class: class, Method: method, Path: path, Body: body, Policy: gatewayreq.DefaultPolicy(),
		Revision: gatewayreq.RevisionCurrent,
	}
}

var (
	readLockers = gatewayInput("list-lockers", gatewayreq.ClassRead, http.MethodGet, "/lockers", nil)
	openLocker  = gatewayInput("open-locker", gatewayreq.ClassHardware, http.MethodPost, "/lockers/101/open", nil)
	release     = gatewayInput("release-transaction", gatewayreq.ClassWrite, http.MethodDelete, "/transactions/t1", nil)
	create      = gatewayInput(gatewayreq.KindCreateTransaction, gatewayreq.ClassWrite, http.MethodPost, "/transactions",
		[]byte(`{"transactionId":"t1","lockerTypeId":1}`))
)

func answered(status int, body, code string) activities.SendGatewayRequestResult {
	return activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: status, Body: []byte(body),
		Headers: map[string]string{"Content-Type": "application/json"}, APIJSON: true, ErrorCode: code}
}

// sends scripts the results of successive sends and records their inputs.
type sends struct {
	results []activities.SendGatewayRequestResult
	got     []activities.SendGatewayRequestInput
	at      []time.Time
}

func (s *sends) mock(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(acts.SendGatewayRequest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SendGatewayRequestInput) (activities.SendGatewayRequestResult, error) {
			s.got = append(s.got, in)
			s.at = append(s.at, env.Now())
			i := len(s.got) - 1
			if i >= len(s.results) {
				i = len(s.results) - 1
			}
			r := s.results[i]
			r.Attempts = len(s.got)
			return r, nil
		})
}

// finishes records the outcome the workflow stores and echoes it as stored.
type finishes struct {
	got []activities.FinishGatewayRequestInput
}

func (f *finishes) mock(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(acts.FinishGatewayRequest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishGatewayRequestInput) (activities.FinishGatewayRequestResult, error) {
			f.got = append(f.got, in)
			now := env.Now()
			return activities.FinishGatewayRequestResult{Result: gatewayreq.Result{Outcome: in.Outcome, Attempts: 1, CreatedAt: start, UpdatedAt: now, CompletedAt: now}}, nil
		})
}

// assertFailure checks a failed request's stored outcome: its state, and the status and error
// code its caller is answered with.
func assertFailure(t *testing.T, o gatewayreq.Outcome, state string, httpStatus int, code string) {
	t.Helper()
	assert.Equal(t, state, o.Status)
	assert.Equal(t, httpStatus, o.HTTPStatus)
	assert.Equal(t, code, o.ErrorCode)
}

func runGateway(t *testing.T, in gatewayreq.Spec, results ...activities.SendGatewayRequestResult) (*sends, activities.FinishGatewayRequestInput, gatewayreq.Result) {
	t.Helper()
	env := newGatewayEnv()
	s, f := &sends{results: results}, &finishes{}
	s.mock(env)
	f.mock(env)
	env.ExecuteWorkflow(contract.GatewayRequestWorkflowName, in)
	res := resultOf[gatewayreq.Result](t, env)
	require.Len(t, f.got, 1, "the outcome is stored once, last")
	for i, in := range s.got {
		assert.Equal(t, i+1, in.Send, "sends are numbered")
		assert.Equal(t, gatewayRequestID, in.RequestID)
	}
	return s, f.got[0], res
}

func TestGatewayRequestWorkflowID(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "gateway-request/"+gatewayRequestID, contract.GatewayRequestWorkflowID(gatewayRequestID))
}

func TestGatewayRequestCompleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     gatewayreq.Spec
		answer activities.SendGatewayRequestResult
	}{
		{"a read's 200", readLockers, answered(200, `[{"lockerId":101}]`, "")},
		{"a gateway 404, verbatim", readLockers, answered(404, `{"error":"LOCKER_NOT_FOUND"}`, "LOCKER_NOT_FOUND")},
		{"a 204 without a body", release, activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 204, APIJSON: true}},
		{"a door open", openLocker, answered(200, `{"success":true,"doorOpen":true}`, "")},
		{"a first-time 409 is the caller's own conflict", create, answered(409, `{"error":"TRANSACTION_EXISTS","transactionId":"t1","lockerId":7}`, "TRANSACTION_EXISTS")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, fin, res := runGateway(t, tc.in, tc.answer)
			assert.Len(t, s.got, 1)
			assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)
			assert.Equal(t, tc.answer.Status, fin.Outcome.HTTPStatus)
			assert.Equal(t, tc.answer.Body, fin.Outcome.Body)
			assert.True(t, fin.GatewayAnswered)
			assert.Equal(t, fin.Outcome, res.Outcome, "the result is what was stored")
			assert.Equal(t, tc.in.Policy.Timeout(tc.in.Class), s.got[0].Timeout)
		})
	}
}

func TestGatewayRequestKeepsBodiesOutOfItsHistory(t *testing.T) {
	t.Parallel()
	stored := activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 200, BodyInStore: true,
		Headers: map[string]string{"Content-Type": "application/json"}, APIJSON: true}
	s, fin, res := runGateway(t, readLockers, stored)
	require.Len(t, s.got, 1)
	assert.True(t, s.got[0].StoreBody, "every send stores its answer's body with the request")
	assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)
	assert.Equal(t, 200, fin.Outcome.HTTPStatus)
	assert.True(t, fin.Outcome.BodyInStore, "the outcome's store takes the body from the request")
	assert.Nil(t, fin.Outcome.Body)
	assert.True(t, res.Outcome.BodyInStore)
	assert.Nil(t, res.Outcome.Body, "nor does the result carry it")

	// A rejected answer has no body to keep either way.
	s, fin, _ = runGateway(t, openLocker, activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 502,
		BodyInStore: true, APIJSON: true})
	assert.True(t, s.got[0].StoreBody)
	assert.Equal(t, gatewayreq.StateRejected, fin.Outcome.Status)
	assert.False(t, fin.Outcome.BodyInStore)
}

func TestGatewayRequestDeadlinesByClass(t *testing.T) {
	t.Parallel()
	s, _, _ := runGateway(t, openLocker, answered(200, `{}`, ""))
	assert.Equal(t, 65*time.Second, s.got[0].Timeout, "hardware: the gateway's open policy and some")
	s, _, _ = runGateway(t, release, answered(204, ``, ""))
	assert.Equal(t, 10*time.Second, s.got[0].Timeout)
}

func TestGatewayRequestRejected(t *testing.T) {
	t.Parallel()
	notJSON := activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 200, Body: []byte("<html>proxy</html>"),
		Headers: map[string]string{"Content-Type": "text/html"}, APIJSON: false}
	conflict := answered(503, `{"error":"LOCKER_ASSIGNMENT_CONFLICT"}`, "LOCKER_ASSIGNMENT_CONFLICT")
	for _, tc := range []struct {
		name    string
		in      gatewayreq.Spec
		answers []activities.SendGatewayRequestResult
		sends   int
		gwError string
	}{
		{"a read's 5xx is re-sent once", readLockers, []activities.SendGatewayRequestResult{answered(500, `{"error":"INTERNAL_ERROR"}`, "INTERNAL_ERROR")}, 2, "INTERNAL_ERROR"},
		{"a write's 5xx is not re-sent", release, []activities.SendGatewayRequestResult{answered(500, `{"error":"INTERNAL_ERROR"}`, "INTERNAL_ERROR")}, 1, "INTERNAL_ERROR"},
		{"a hardware fault is not re-sent", openLocker, []activities.SendGatewayRequestResult{answered(500, `{"error":"HARDWARE_FAULT"}`, "HARDWARE_FAULT")}, 1, "HARDWARE_FAULT"},
		{"the gateway refuses the cloud's credential", readLockers, []activities.SendGatewayRequestResult{answered(401, `{"error":"GATEWAY_AUTH_FAILED"}`, "GATEWAY_AUTH_FAILED")}, 1, "GATEWAY_AUTH_FAILED"},
		{"not the API's JSON", readLockers, []activities.SendGatewayRequestResult{notJSON}, 1, ""},
		{"a redirect", openLocker, []activities.SendGatewayRequestResult{answered(302, `{}`, "")}, 1, ""},
		{"a create's assignment conflict, retried 3 times", create, []activities.SendGatewayRequestResult{conflict}, 4, "LOCKER_ASSIGNMENT_CONFLICT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, fin, res := runGateway(t, tc.in, tc.answers...)
			assert.Len(t, s.got, tc.sends)
			o := fin.Outcome
			assertFailure(t, o, gatewayreq.StateRejected, http.StatusBadGateway, gatewayreq.CodeGatewayRejected)
			assert.EqualValues(t, tc.answers[0].Status, o.Details["gatewayStatus"])
			if tc.gwError != "" {
				assert.Equal(t, tc.gwError, o.Details["gatewayError"])
			}
			assert.EqualValues(t, tc.sends, o.Details["attempts"])
			assert.True(t, fin.GatewayAnswered)
			assert.Equal(t, o.ErrorCode, res.Outcome.ErrorCode)
		})
	}
}

func TestGatewayRequestRetriesThenCompletes(t *testing.T) {
	t.Parallel()
	notDelivered := activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "connection refused"}
	conflict := answered(503, `{"error":"LOCKER_ASSIGNMENT_CONFLICT"}`, "LOCKER_ASSIGNMENT_CONFLICT")

	t.Run("a read after one 5xx", func(t *testing.T) {
		t.Parallel()
		s, fin, _ := runGateway(t, readLockers, answered(502, `{"error":"X"}`, "X"), answered(200, `[]`, ""))
		assert.Len(t, s.got, 2)
		assert.Equal(t, 200, fin.Outcome.HTTPStatus)
	})
	t.Run("a create after assignment conflicts, with growing pauses", func(t *testing.T) {
		t.Parallel()
		s, fin, _ := runGateway(t, create, conflict, conflict, answered(201, `{"transactionId":"t1","lockerId":7}`, ""))
		require.Len(t, s.got, 3)
		assert.Equal(t, 201, fin.Outcome.HTTPStatus)
		assert.GreaterOrEqual(t, s.at[1].Sub(s.at[0]), 200*time.Millisecond)
		assert.GreaterOrEqual(t, s.at[2].Sub(s.at[1]), 400*time.Millisecond)
	})
	t.Run("any class after failed deliveries, with backoff", func(t *testing.T) {
		t.Parallel()
		s, fin, _ := runGateway(t, openLocker, notDelivered, notDelivered, answered(200, `{"doorOpen":true}`, ""))
		require.Len(t, s.got, 3)
		assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)
		assert.GreaterOrEqual(t, s.at[1].Sub(s.at[0]), 500*time.Millisecond)
		assert.GreaterOrEqual(t, s.at[2].Sub(s.at[1]), time.Second)
	})
}

func TestGatewayRequestDispatchFailed(t *testing.T) {
	t.Parallel()
	notDelivered := activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "dial tcp: connection refused"}
	s, fin, res := runGateway(t, openLocker, notDelivered)
	assert.Len(t, s.got, 3, "the dispatch budget")
	o := fin.Outcome
	assertFailure(t, o, gatewayreq.StateDispatchFailed, http.StatusServiceUnavailable, gatewayreq.CodeDispatchFailed)
	assert.Equal(t, "dial tcp: connection refused", o.Details["error"])
	assert.True(t, fin.GatewayUnreachable, "the gateway is recorded offline")
	assert.False(t, fin.GatewayAnswered)
	assert.Equal(t, o.Status, res.Outcome.Status)
}

func TestGatewayRequestMisconfiguredGatewayFailsToDispatch(t *testing.T) {
	t.Parallel()
	env := newGatewayEnv()
	env.OnActivity(acts.SendGatewayRequest, mock.Anything, mock.Anything).Return(activities.SendGatewayRequestResult{},
		temporal.NewNonRetryableApplicationError("secret does not open", activities.ErrTypeGatewayMisconfigured, nil)).Once()
	f := &finishes{}
	f.mock(env)
	env.ExecuteWorkflow(contract.GatewayRequestWorkflowName, readLockers)
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, f.got, 1)
	assert.Equal(t, gatewayreq.StateDispatchFailed, f.got[0].Outcome.Status)
}

func TestGatewayRequestUnresponsive(t *testing.T) {
	t.Parallel()
	noAnswer := activities.SendGatewayRequestResult{Outcome: activities.SendNoAnswer, Error: "context deadline exceeded"}
	unknown := activities.SendGatewayRequestResult{Outcome: activities.SendUnknown}
	for _, tc := range []struct {
		name   string
		in     gatewayreq.Spec
		answer activities.SendGatewayRequestResult
		sends  int
	}{
		{"a hardware call is never re-sent once delivered", openLocker, noAnswer, 1},
		{"nor when its send's fate is unknown", openLocker, unknown, 1},
		{"a release is not re-sent", release, noAnswer, 1},
		{"a read is re-sent once", readLockers, noAnswer, 2},
		{"a create is re-sent once", create, noAnswer, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, fin, _ := runGateway(t, tc.in, tc.answer)
			assert.Len(t, s.got, tc.sends)
			o := fin.Outcome
			assertFailure(t, o, gatewayreq.StateGatewayUnresponsive, http.StatusGatewayTimeout, gatewayreq.CodeGatewayUnresponsive)
			assert.Nil(t, o.Details["gatewayStatus"])
			assert.Equal(t, gatewayreq.OutcomeUnknown, o.Details["outcome"], "the door may have moved")
			assert.Equal(t, tc.in.Policy.Timeout(tc.in.Class).Seconds(), o.Details["timeoutSeconds"])
			assert.False(t, fin.GatewayAnswered)
			assert.False(t, fin.GatewayUnreachable)
		})
	}
}

func TestGatewayRequestCreateResentAfterALostAnswerCountsAsTheOriginal(t *testing.T) {
	t.Parallel()
	noAnswer := activities.SendGatewayRequestResult{Outcome: activities.SendNoAnswer}
	exists := answered(409, `{"error":"TRANSACTION_EXISTS","message":"transaction \"t1\" already exists","timestamp":"2026-03-14T15:09:27.000Z",`+
		`"details":{},"transactionId":"t1","lockerId":7,"createdAt":"2026-03-14T15:09:26.500Z"}`+"\n", "TRANSACTION_EXISTS")
	s, fin, _ := runGateway(t, create, noAnswer, exists)
	assert.Len(t, s.got, 2)
	assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)
	assert.Equal(t, http.StatusCreated, fin.Outcome.HTTPStatus)
	assert.JSONEq(t, `{"transactionId":"t1","lockerId":7,"createdAt":"2026-03-14T15:09:26.500Z"}`, string(fin.Outcome.Body))

	// A 409 naming another transaction is not ours: passed through.
	other := answered(409, `{"error":"TRANSACTION_EXISTS","transactionId":"t2","lockerId":8}`, "TRANSACTION_EXISTS")
	_, fin, _ = runGateway(t, create, noAnswer, other)
	assert.Equal(t, http.StatusConflict, fin.Outcome.HTTPStatus)
}

func TestGatewayRequestAlreadySettledElsewhere(t *testing.T) {
	t.Parallel()
	s, fin, _ := runGateway(t, readLockers, activities.SendGatewayRequestResult{Outcome: activities.SendFinished})
	assert.Len(t, s.got, 1)
	assert.Len(t, fin.RequestID, len(gatewayRequestID), "finishing returns the stored outcome")
}

func TestGatewayRequestQueryAnswersThePendingState(t *testing.T) {
	t.Parallel()
	env := newGatewayEnv()
	notDelivered := activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "connection refused", Attempts: 1}
	env.OnActivity(acts.SendGatewayRequest, mock.Anything, mock.MatchedBy(func(in activities.SendGatewayRequestInput) bool { return in.Send == 1 })).
		After(50*time.Millisecond).Return(notDelivered, nil).Once()
	env.OnActivity(acts.SendGatewayRequest, mock.Anything, mock.MatchedBy(func(in activities.SendGatewayRequestInput) bool { return in.Send == 2 })).
		After(10*time.Second).Return(activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 200, APIJSON: true, Attempts: 2}, nil).Once()
	(&finishes{}).mock(env)

	var states []contract.GatewayRequestState
	q := func() {
		states = append(states, queryOf[contract.GatewayRequestState](t, env, contract.QueryGatewayRequestState))
	}
	env.RegisterDelayedCallback(q, 20*time.Millisecond)  // the first send is out
	env.RegisterDelayedCallback(q, 300*time.Millisecond) // backing off after the refused delivery
	env.RegisterDelayedCallback(q, 5*time.Second)        // the second send is out
	start := env.Now()
	env.ExecuteWorkflow(contract.GatewayRequestWorkflowName, openLocker)
	require.NoError(t, env.GetWorkflowError())
	q()
	require.Len(t, states, 4)
	// While a send is out the query answers what the stored row says: dispatched, counted.
	assert.Equal(t, gatewayreq.StateDispatched, states[0].Status)
	assert.Equal(t, 1, states[0].Attempts)
	assert.True(t, states[0].NextAttemptAt.IsZero())
	// Backing off: pending again, with the cause and when the next send goes out.
	assert.Equal(t, gatewayreq.StatePending, states[1].Status)
	assert.Equal(t, "connection refused", states[1].LastError)
	assert.Equal(t, 1, states[1].Attempts)
	assert.True(t, states[1].NextAttemptAt.After(start.Add(300*time.Millisecond)) &&
		!states[1].NextAttemptAt.After(start.Add(600*time.Millisecond)),
		"the next send is the refused delivery's backoff (500 ms) after it came back: %s after the start", states[1].NextAttemptAt.Sub(start))
	assert.Equal(t, gatewayreq.StateDispatched, states[2].Status)
	assert.Equal(t, 2, states[2].Attempts)
	assert.Equal(t, "connection refused", states[2].LastError, "the last cause stays until the request settles")
	assert.True(t, states[2].NextAttemptAt.IsZero())
	assert.Equal(t, gatewayreq.StateCompleted, states[3].Status)
}

func TestGatewayRequestRefusesBadInput(t *testing.T) {
	t.Parallel()
	env := newGatewayEnv()
	in := readLockers
	in.Class = "sometimes"
	env.ExecuteWorkflow(contract.GatewayRequestWorkflowName, in)
	failureOf(t, env)
}

// A first send whose answer decides the request stores the outcome itself: the workflow
// ends with it, with no finish of its own, and follows it up (a used access code's workflow
// is told). Only the first send is asked to, and it is not given the request's body.
func TestGatewayRequestFirstSendSettlesIt(t *testing.T) {
	t.Parallel()
	env := newGatewayEnv()
	stored := gatewayreq.Result{Outcome: gatewayreq.Outcome{Status: gatewayreq.StateCompleted, HTTPStatus: 200, BodyInStore: true},
		Attempts: 1, CreatedAt: start, UpdatedAt: start, CompletedAt: start}
	s, f := &sends{results: []activities.SendGatewayRequestResult{{Outcome: activities.SendAnswered, Status: 200, APIJSON: true,
		Settled: &stored, UsedCode: "7f3c0c52-1d5e-4c1f-9d55-0b8a3c1c2d11"}}}, &finishes{}
	s.mock(env)
	f.mock(env)
	env.OnSignalExternalWorkflow(mock.Anything, contract.AccessCodeWorkflowID("7f3c0c52-1d5e-4c1f-9d55-0b8a3c1c2d11"), "",
		contract.SignalCodeEnded, contract.CodeOutcomeUsed).Return(nil).Once()
	in := gatewayInput(gatewayreq.KindAccessCodeOpen, gatewayreq.ClassHardware, http.MethodPost, "/transactions/x/open", []byte(`{}`))
	env.ExecuteWorkflow(contract.GatewayRequestWorkflowName, in)
	res := resultOf[gatewayreq.Result](t, env)
	assert.Equal(t, stored, res)
	assert.Empty(t, f.got, "no finish: the send stored the outcome")
	require.Len(t, s.got, 1)
	require.NotNil(t, s.got[0].Settle, "the first send may settle the request")
	assert.Nil(t, s.got[0].Settle.Body, "without the request's body")
	assert.Equal(t, gatewayreq.ClassHardware, s.got[0].Settle.Class)
	env.AssertNumberOfCalls(t, "workflow.SignalExternalWorkflow", 1)

	// A send after the first is never asked to settle: the workflow's own rules apply.
	s2, _, _ := runGateway(t, openLocker, activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "refused"},
		activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 200, APIJSON: true})
	require.Len(t, s2.got, 2)
	assert.NotNil(t, s2.got[0].Settle)
	assert.Nil(t, s2.got[1].Settle)
}

// A request whose send's fate is unknown goes out again when its gateway honours
// Idempotency-Key, a door open included (the gateway answers what the first send did), at
// most maxKeyedResends times; without keys a door open is never sent twice.
func TestGatewayRequestResendsWithKeysOnly(t *testing.T) {
	t.Parallel()
	unknownKeyed := activities.SendGatewayRequestResult{Outcome: activities.SendUnknown, KeysHonoured: true}
	ok := activities.SendGatewayRequestResult{Outcome: activities.SendAnswered, Status: 200, APIJSON: true, Body: []byte(`{"doorOpen":true}`)}
	s, fin, _ := runGateway(t, openLocker, unknownKeyed, ok)
	assert.Len(t, s.got, 2, "sent again with its key")
	assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)

	s, fin, _ = runGateway(t, openLocker, unknownKeyed, unknownKeyed, unknownKeyed, ok)
	assert.Len(t, s.got, 3, "at most two re-sends")
	assert.Equal(t, gatewayreq.StateGatewayUnresponsive, fin.Outcome.Status)

	s, fin, _ = runGateway(t, openLocker, activities.SendGatewayRequestResult{Outcome: activities.SendUnknown}, ok)
	assert.Len(t, s.got, 1, "a gateway without keys: a door open is never sent twice")
	assert.Equal(t, gatewayreq.StateGatewayUnresponsive, fin.Outcome.Status)

	s, fin, _ = runGateway(t, openLocker, activities.SendGatewayRequestResult{Outcome: activities.SendNoAnswer, KeysHonoured: true}, ok)
	assert.Len(t, s.got, 1, "a gateway that did not answer in time is not sent the open again, keys or not")
	assert.Equal(t, gatewayreq.StateGatewayUnresponsive, fin.Outcome.Status)
}

// An outcome that is unknown is never "rejected" (DESIGN §6.2): a gateway answer that says so
// (REQUEST_OUTCOME_UNKNOWN, after a keyed request interrupted by a gateway restart), and
// re-sends that never reached a gateway an earlier send may have reached, end
// gateway_unresponsive with "outcome": "unknown" — never 502 or 503, which tell the caller the
// door did not move.
func TestGatewayRequestOutcomeUnknownIsNeverRefused(t *testing.T) {
	t.Parallel()
	unknownAnswer := answered(500, `{"error":"REQUEST_OUTCOME_UNKNOWN","message":"begun before the gateway restarted"}`, "REQUEST_OUTCOME_UNKNOWN")
	unknownAnswer.ErrorMessage = "begun before the gateway restarted"
	notDelivered := activities.SendGatewayRequestResult{Outcome: activities.SendNotDelivered, Error: "connection refused"}
	unknownKeyed := activities.SendGatewayRequestResult{Outcome: activities.SendUnknown, KeysHonoured: true}

	t.Run("the gateway says its outcome is unknown", func(t *testing.T) {
		t.Parallel()
		s, fin, res := runGateway(t, openLocker, unknownAnswer)
		assert.Len(t, s.got, 1, "not sent again: it would answer the same")
		o := fin.Outcome
		assertFailure(t, o, gatewayreq.StateGatewayUnresponsive, http.StatusGatewayTimeout, gatewayreq.CodeGatewayUnresponsive)
		assert.Equal(t, gatewayreq.OutcomeUnknown, o.Details["outcome"])
		assert.Equal(t, "REQUEST_OUTCOME_UNKNOWN", o.Details["gatewayError"])
		assert.Equal(t, "begun before the gateway restarted", o.Details["gatewayMessage"])
		assert.EqualValues(t, 500, o.Details["gatewayStatus"])
		assert.True(t, fin.GatewayAnswered, "the gateway answered: it is online")
		assert.Equal(t, gatewayreq.StateGatewayUnresponsive, res.Outcome.Status)
	})
	t.Run("after a keyed re-send", func(t *testing.T) {
		t.Parallel()
		s, fin, _ := runGateway(t, openLocker, unknownKeyed, unknownAnswer)
		assert.Len(t, s.got, 2)
		assert.Equal(t, gatewayreq.StateGatewayUnresponsive, fin.Outcome.Status)
	})
	t.Run("re-sends not delivered after a send that may have arrived", func(t *testing.T) {
		t.Parallel()
		s, fin, _ := runGateway(t, openLocker, unknownKeyed, notDelivered)
		assert.Len(t, s.got, 4, "the re-send, then the dispatch budget")
		o := fin.Outcome
		assert.Equal(t, gatewayreq.StateGatewayUnresponsive, o.Status, "not dispatch_failed: the first send may have opened the door")
		assert.Equal(t, gatewayreq.OutcomeUnknown, o.Details["outcome"])
		assert.False(t, fin.GatewayUnreachable)
	})
	t.Run("a read whose re-sends were not delivered did not act", func(t *testing.T) {
		t.Parallel()
		_, fin, _ := runGateway(t, readLockers, activities.SendGatewayRequestResult{Outcome: activities.SendNoAnswer}, notDelivered)
		assert.Equal(t, gatewayreq.StateDispatchFailed, fin.Outcome.Status)
	})
}

// A gateway that is stopping refuses new work and does nothing (503 GATEWAY_STOPPING): the
// request goes out again as after a refused delivery, within the dispatch budget, and is never
// settled by the first send; runs of the revision before settle it rejected, as they did.
func TestGatewayRequestSentAgainWhenTheGatewayWasStopping(t *testing.T) {
	t.Parallel()
	stopping := answered(503, `{"error":"GATEWAY_STOPPING","message":"the gateway is stopping"}`, "GATEWAY_STOPPING")
	ok := answered(200, `{"success":true,"lockerId":101,"doorOpen":true}`, "")
	s, fin, _ := runGateway(t, openLocker, stopping, ok)
	require.Len(t, s.got, 2)
	assert.GreaterOrEqual(t, s.at[1].Sub(s.at[0]), 500*time.Millisecond, "after the dispatch backoff")
	assert.Equal(t, gatewayreq.StateCompleted, fin.Outcome.Status)

	_, fin, _ = runGateway(t, openLocker, stopping)
	assert.Equal(t, gatewayreq.StateDispatchFailed, fin.Outcome.Status, "still stopping after the dispatch budget: not carried out")

	_, settles := openLocker.SettleFirstSend(stopping)
	assert.False(t, settles, "the first send leaves it to the workflow")

	before := openLocker
	before.Revision = gatewayreq.RevisionMarkerless
	_, fin, _ = runGateway(t, before, stopping)
	assert.Equal(t, gatewayreq.StateRejected, fin.Outcome.Status)
}
