package activities_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// fakeRequests stands in for Postgres behind the gateway-request activities.
type fakeRequests struct {
	mu        sync.Mutex
	gateway   store.Gateway
	begun     map[int]bool
	abandoned []int
	finished  []gatewayreq.Outcome
	terminal  bool
	answers   map[int][]byte // the bodies stored with their sends
	answerErr error          // what StoreGatewayAnswer fails with
	missing   bool           // no such request: FinishGatewayRequest answers ErrNotFound
	synced    []bool         // each finish's syncMirror
	keys      []bool         // what RecordGatewayKeys recorded, in order
}

func (f *fakeRequests) RecordGatewayKeys(_ context.Context, _ int64, honoured bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, honoured)
	f.gateway.HonoursKeys = honoured
	return nil
}

func (f *fakeRequests) StoreGatewayAnswer(_ context.Context, _ uuid.UUID, send int, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answerErr != nil {
		return f.answerErr
	}
	if f.answers == nil {
		f.answers = map[int][]byte{}
	}
	f.answers[send] = body
	return nil
}

func (f *fakeRequests) BeginGatewaySend(_ context.Context, _ uuid.UUID, send int) (store.GatewaySend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.terminal {
		return store.GatewaySend{}, store.ErrNotFound
	}
	began := !f.begun[send]
	f.begun[send] = true
	return store.GatewaySend{Began: began, Attempts: len(f.begun), Gateway: f.gateway}, nil
}

func (f *fakeRequests) AbandonGatewaySend(_ context.Context, _ uuid.UUID, send int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.begun, send)
	f.abandoned = append(f.abandoned, send)
	return nil
}

func (f *fakeRequests) FinishGatewayRequest(_ context.Context, id uuid.UUID, _ int64, o gatewayreq.Outcome, _ int, syncMirror bool) (store.GatewayRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = append(f.synced, syncMirror)
	if f.missing {
		return store.GatewayRequest{}, fmt.Errorf("get gateway request: %w", store.ErrNotFound)
	}
	f.finished = append(f.finished, o)
	now := time.Now()
	return store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: id, Class: gatewayreq.ClassRead}, Status: o.Status,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, CompletedAt: &now, Outcome: o}, nil
}

type secretFor map[string]string

func (s secretFor) Open(purpose string, _ []byte) ([]byte, error) {
	if v, ok := s[purpose]; ok {
		return []byte(v), nil
	}
	return nil, errors.New("message authentication failed")
}

func send(t *testing.T, f *fakeRequests, in activities.SendGatewayRequestInput) (activities.SendGatewayRequestResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Gateways: activities.GatewayDeps{Store: f,
		Keyring: secretFor{keyring.GatewaySecretPurpose("GW-0001"): "s3cret"}}})
	if in.RequestID == "" {
		in.RequestID = uuid.NewString()
	}
	if in.Send == 0 {
		in.Send = 1
	}
	if in.Timeout == 0 {
		in.Timeout = 5 * time.Second
	}
	v, err := env.ExecuteActivity((&activities.Activities{}).SendGatewayRequest, in)
	if err != nil {
		return activities.SendGatewayRequestResult{}, err
	}
	var res activities.SendGatewayRequestResult
	require.NoError(t, v.Get(&res))
	return res, nil
}

func fakeAt(url string) *fakeRequests {
	return &fakeRequests{gateway: store.Gateway{ID: 1, Serial: "GW-0001", BaseURL: url}, begun: map[int]bool{}}
}

// fakeServedBy starts a gateway that answers with h until the test ends, and returns the
// requests' store pointing at it.
func fakeServedBy(t *testing.T, h http.HandlerFunc) *fakeRequests {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fakeAt(srv.URL)
}

func TestSendGatewayRequestAnswered(t *testing.T) {
	t.Parallel()
	var gotAuth, gotBody, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.RequestURI()
		b := make([]byte, 100)
		n, _ := r.Body.Read(b)
		gotBody = string(b[:n])
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Response-Truncated", "true")
		w.Header().Set("Set-Cookie", "not=kept")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"LOCKER_NOT_FOUND","message":"no locker with that id","details":{}}`))
	}))
	t.Cleanup(srv.Close)
	f := fakeAt(srv.URL + "/")
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/system/logs?limit=1", Body: []byte(`{"a":1}`)})
	require.NoError(t, err)
	assert.Equal(t, activities.SendAnswered, res.Outcome)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.True(t, res.APIJSON)
	assert.Equal(t, "LOCKER_NOT_FOUND", res.ErrorCode)
	assert.Equal(t, "no locker with that id", res.ErrorMessage)
	assert.Equal(t, map[string]string{"Content-Type": "application/json", "X-Response-Truncated": "true"}, res.Headers)
	assert.Equal(t, "Bearer s3cret", gotAuth, "the gateway's own secret")
	assert.Equal(t, "/system/logs?limit=1", gotPath)
	assert.Equal(t, `{"a":1}`, gotBody)
	assert.Equal(t, 1, res.Attempts)
	assert.Empty(t, f.abandoned)
}

func TestSendGatewayRequestTellsNotJSONApart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, contentType, body string
		apiJSON                 bool
	}{
		{"empty 204", "", "", true},
		{"an HTML page from a proxy", "text/html", "<html>bad gateway</html>", false},
		{"JSON declared as text", "text/plain", `{"a":1}`, false},
		{"broken JSON", "application/json", `{"a":`, false},
		{"problem+json", "application/problem+json; charset=utf-8", `{"title":"x"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := fakeServedBy(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				if tc.body == "" {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				_, _ = w.Write([]byte(tc.body))
			})
			res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodGet, Path: "/x"})
			require.NoError(t, err)
			assert.Equal(t, tc.apiJSON, res.APIJSON)
		})
	}
}

func TestSendGatewayRequestDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	elsewhere := 0
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	t.Cleanup(other.Close)
	f := fakeServedBy(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/lockers/101/open", http.StatusTemporaryRedirect)
	})
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusTemporaryRedirect, res.Status)
	assert.Zero(t, elsewhere)
}

func TestSendGatewayRequestTooLargeAnAnswer(t *testing.T) {
	t.Parallel()
	f := fakeServedBy(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`["` + strings.Repeat("x", 2<<20) + `"]`))
	})
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodGet, Path: "/system/logs"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendAnswered, res.Outcome)
	assert.False(t, res.APIJSON)
	assert.Empty(t, res.Body)
	assert.Contains(t, res.Error, "larger than")
}

func TestSendGatewayRequestNotDelivered(t *testing.T) {
	t.Parallel()
	closed := "http://" + testenv.FreeAddr(t)

	f := fakeAt(closed)
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open", Send: 2})
	require.NoError(t, err)
	assert.Equal(t, activities.SendNotDelivered, res.Outcome)
	assert.Equal(t, "the gateway refused the connection", res.Error, "a fixed cause: the error itself names the gateway's address")
	assert.Equal(t, []int{2}, f.abandoned, "the send is released: it may go out again")

	f = fakeAt("http://no-such-host.invalid")
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: http.MethodGet, Path: "/health"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendNotDelivered, res.Outcome, "DNS")

	f = fakeAt(closed)
	f.gateway.Disabled = true
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: http.MethodGet, Path: "/health"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendNotDelivered, res.Outcome)
	assert.Contains(t, res.Error, "disabled")
}

func TestSendGatewayRequestDeliveredWithoutAnswer(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	f := fakeAt(srv.URL)
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, activities.SendNoAnswer, res.Outcome)
	assert.Empty(t, f.abandoned, "it may have arrived: never released")
}

func TestSendGatewayRequestNeverSendsASendTwice(t *testing.T) {
	t.Parallel()
	calls := 0
	f := fakeServedBy(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" { // asking whether the gateway honours keys sends nothing
			calls++
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"doorOpen":true}`))
	})
	f.begun[1] = true // an earlier run of this send, whose fate is unknown
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendUnknown, res.Outcome)
	assert.Zero(t, calls)

	f.terminal = true
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open", Send: 2})
	require.NoError(t, err)
	assert.Equal(t, activities.SendFinished, res.Outcome)
	assert.Zero(t, calls)
}

func TestSendGatewayRequestWithASecretThatDoesNotOpen(t *testing.T) {
	t.Parallel()
	f := fakeAt("http://127.0.0.1:1")
	f.gateway.Serial = "GW-0009"
	_, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodGet, Path: "/health"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeGatewayMisconfigured, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, []int{1}, f.abandoned)
}

func TestSendGatewayRequestStoresItsBody(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"TRANSACTION_EXISTS","message":"exists","transactionId":"t1"}`))
	}))
	t.Cleanup(srv.Close)

	// Stored with the request, not returned: the workflow's history never carries it.
	f := fakeAt(srv.URL)
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: "GET", Path: "/lockers", StoreBody: true})
	require.NoError(t, err)
	assert.Equal(t, activities.SendAnswered, res.Outcome)
	assert.True(t, res.BodyInStore)
	assert.Nil(t, res.Body)
	assert.Equal(t, "TRANSACTION_EXISTS", res.ErrorCode, "the fields the workflow decides on are still returned")
	assert.JSONEq(t, `{"error":"TRANSACTION_EXISTS","message":"exists","transactionId":"t1"}`, string(f.answers[1]))

	// A 409's body is returned too: the workflow compares its transaction with its own.
	status = http.StatusConflict
	f = fakeAt(f.gateway.BaseURL)
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: "POST", Path: "/transactions", StoreBody: true})
	require.NoError(t, err)
	assert.True(t, res.BodyInStore)
	assert.Contains(t, string(res.Body), `"transactionId":"t1"`)
	assert.NotEmpty(t, f.answers[1])

	// The answer could not be stored: the body is carried as before, the answer not lost,
	// whether Postgres was away after the answer or the row moved on meanwhile (settled, or
	// another send began: the workflow carries the answer and the outcome's store keeps the
	// first settlement).
	status = http.StatusOK
	for _, answerErr := range []error{errors.New("connection refused"), store.ErrNotFound} {
		f = fakeAt(f.gateway.BaseURL)
		f.answerErr = answerErr
		res, err = send(t, f, activities.SendGatewayRequestInput{Method: "GET", Path: "/lockers", StoreBody: true})
		require.NoError(t, err, "%v", answerErr)
		assert.Equal(t, activities.SendAnswered, res.Outcome, "%v", answerErr)
		assert.False(t, res.BodyInStore, "%v", answerErr)
		assert.NotEmpty(t, res.Body, "%v", answerErr)
	}

	// Without StoreBody (runs recorded before it): returned, not stored.
	f = fakeAt(f.gateway.BaseURL)
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: "GET", Path: "/lockers"})
	require.NoError(t, err)
	assert.False(t, res.BodyInStore)
	assert.NotEmpty(t, res.Body)
	assert.Empty(t, f.answers)
}

func TestFirstSendThatSettlesStoresItsBodyWithTheOutcome(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"lockers":[]}`))
	}))
	t.Cleanup(srv.Close)
	run := func(f *fakeRequests) activities.SendGatewayRequestResult {
		id := uuid.NewString()
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(&activities.Activities{Gateways: activities.GatewayDeps{Store: f,
			Keyring: secretFor{keyring.GatewaySecretPurpose("GW-0001"): "s3cret"}}})
		v, err := env.ExecuteActivity((&activities.Activities{}).SendGatewayRequest, activities.SendGatewayRequestInput{
			RequestID: id, Send: 1, Method: "GET", Path: "/lockers", Timeout: 5 * time.Second, StoreBody: true,
			Settle: &gatewayreq.Spec{RequestID: id, Class: gatewayreq.ClassRead}})
		require.NoError(t, err)
		var res activities.SendGatewayRequestResult
		require.NoError(t, v.Get(&res))
		return res
	}

	// One write: the outcome carries the body; nothing is stored beforehand.
	f := fakeAt(srv.URL)
	res := run(f)
	assert.Empty(t, f.answers, "the body is not stored on its own first")
	require.Len(t, f.finished, 1)
	assert.JSONEq(t, `{"lockers":[]}`, string(f.finished[0].Body))
	assert.False(t, f.finished[0].BodyInStore)
	// The history carries neither the body nor the settled outcome's body.
	assert.True(t, res.BodyInStore)
	assert.Nil(t, res.Body)
	require.NotNil(t, res.Settled)
	assert.True(t, res.Settled.Outcome.BodyInStore)
	assert.Nil(t, res.Settled.Outcome.Body)

	// The outcome cannot be stored now: the body is stored alone, the workflow settles.
	f = fakeAt(f.gateway.BaseURL)
	f.missing = true
	res = run(f)
	assert.JSONEq(t, `{"lockers":[]}`, string(f.answers[1]))
	assert.True(t, res.BodyInStore)
	assert.Nil(t, res.Settled)
}

func TestFinishGatewayRequestOfARequestNotStored(t *testing.T) {
	t.Parallel()
	f := fakeAt("http://127.0.0.1:1")
	f.missing = true
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Gateways: activities.GatewayDeps{Store: f}})
	_, err := env.ExecuteActivity((&activities.Activities{}).FinishGatewayRequest, activities.FinishGatewayRequestInput{
		RequestID: uuid.NewString(), Class: gatewayreq.ClassRead, Outcome: gatewayreq.Outcome{Status: gatewayreq.StateCompleted, HTTPStatus: 200}})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrTypeRequestNotStored, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "nothing to settle, now or later")
}

func TestFinishGatewayRequestAsksForAMirrorRefreshAfterACompletedWrite(t *testing.T) {
	t.Parallel()
	f := fakeAt("http://127.0.0.1:1")
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Gateways: activities.GatewayDeps{Store: f}})
	for _, tc := range []struct {
		class, state string
		want         bool
	}{
		{gatewayreq.ClassWrite, gatewayreq.StateCompleted, true},
		{gatewayreq.ClassWrite, gatewayreq.StateRejected, false},
		{gatewayreq.ClassHardware, gatewayreq.StateCompleted, false}, // a door open changes nothing the mirror holds
		{gatewayreq.ClassRead, gatewayreq.StateCompleted, false},
	} {
		f.synced = nil
		_, err := env.ExecuteActivity((&activities.Activities{}).FinishGatewayRequest, activities.FinishGatewayRequestInput{
			RequestID: uuid.NewString(), Class: tc.class, Outcome: gatewayreq.Outcome{Status: tc.state, HTTPStatus: 200, Details: map[string]any{}}})
		require.NoError(t, err)
		assert.Equal(t, []bool{tc.want}, f.synced, "%s %s", tc.class, tc.state)
	}
}

// Every send of a mutating request carries the request's id as its Idempotency-Key (the same
// on a re-send); a read carries none. The answer says whether the gateway honours keys.
func TestSendGatewayRequestCarriesItsKey(t *testing.T) {
	t.Parallel()
	var keys []string
	f := fakeServedBy(t, func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if r.Method != http.MethodGet {
			w.Header().Set("X-Idempotency-Keys", "honoured")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	id := uuid.NewString()
	for n := 1; n <= 2; n++ {
		res, err := send(t, f, activities.SendGatewayRequestInput{RequestID: id, Send: n, Method: http.MethodPost, Path: "/lockers/101/open"})
		require.NoError(t, err)
		assert.True(t, res.KeysHonoured)
	}
	res, err := send(t, f, activities.SendGatewayRequestInput{Send: 3, Method: http.MethodGet, Path: "/lockers/101"})
	require.NoError(t, err)
	assert.False(t, res.KeysHonoured)
	assert.Equal(t, []string{id, id, ""}, keys)

	// A send begun before with unknown fate says what the cloud knows of the gateway.
	f = fakeAt(f.gateway.BaseURL)
	f.gateway.HonoursKeys = true
	f.begun[1] = true
	res, err = send(t, f, activities.SendGatewayRequestInput{RequestID: id, Method: http.MethodPost, Path: "/lockers/101/open"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendUnknown, res.Outcome)
	assert.True(t, res.KeysHonoured)
}

// Every answer of a gateway says whether it honours Idempotency-Key: a change is recorded on
// its row at once, not only at the next gateway sync.
func TestSendRecordsWhetherTheGatewayHonoursKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		recorded, header bool
		want             []bool
	}{
		{"says so, not recorded yet", false, true, []bool{true}},
		{"no longer says so", true, false, []bool{false}},
		{"as recorded", true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := fakeServedBy(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.header {
					w.Header().Set("X-Idempotency-Keys", "honoured")
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"success":true,"doorOpen":true}`))
			})
			f.gateway.HonoursKeys = tc.recorded
			res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
			require.NoError(t, err)
			assert.Equal(t, activities.SendAnswered, res.Outcome)
			assert.Equal(t, tc.header, res.KeysHonoured)
			assert.Equal(t, tc.want, f.keys)
		})
	}
}

// A send found begun before (its fate unknown) at a gateway whose row does not say it honours
// keys asks the gateway (its /health answer) before the workflow decides, and records the
// answer; the request itself is not sent again.
func TestSendOfUnknownFateAsksTheGatewayAboutKeys(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("honours=%v", honours), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var calls []string
			f := fakeServedBy(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls = append(calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				if honours {
					w.Header().Set("X-Idempotency-Keys", "honoured")
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"status":"ok","controllers":[],"uptimeSeconds":3}`))
			})
			f.begun[1] = true // an earlier run of this send, cut off with its process
			res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
			require.NoError(t, err)
			assert.Equal(t, activities.SendUnknown, res.Outcome)
			assert.Equal(t, honours, res.KeysHonoured)
			assert.Equal(t, []string{"GET /health Bearer s3cret"}, calls, "the gateway is asked; the open is not sent")
			if honours {
				assert.Equal(t, []bool{true}, f.keys, "recorded on the gateway's row")
			} else {
				assert.Empty(t, f.keys)
			}
		})
	}

	// A gateway already recorded as honouring keys is not asked.
	f := fakeAt("http://" + testenv.FreeAddr(t))
	f.gateway.HonoursKeys = true
	f.begun[1] = true
	res, err := send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
	require.NoError(t, err)
	assert.True(t, res.KeysHonoured)
	assert.Empty(t, f.keys)

	// One that cannot be asked (down) does not honour keys, as far as the cloud can know.
	f = fakeAt("http://" + testenv.FreeAddr(t))
	f.begun[1] = true
	res, err = send(t, f, activities.SendGatewayRequestInput{Method: http.MethodPost, Path: "/lockers/101/open"})
	require.NoError(t, err)
	assert.Equal(t, activities.SendUnknown, res.Outcome)
	assert.False(t, res.KeysHonoured)
}
