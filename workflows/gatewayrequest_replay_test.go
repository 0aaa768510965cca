package workflows_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows"
)

// Recorded histories of real gateway-request runs (see TestRecordGatewayRequestHistories):
// an answered read, and an open whose first delivery was refused.
var gatewayHistories = []string{"gateway_request_completed.json", "gateway_request_redelivered.json"}

func TestReplayGatewayRequest(t *testing.T) {
	t.Parallel()
	replayHistories(t, workflows.GatewayRequest, workflows.GatewayRequestWorkflowName, gatewayHistories)
}

// recordingStore stands in for Postgres behind the recording worker's activities: the first
// send of a request marked "refuse" goes to a closed port.
type recordingStore struct {
	live, dead string
	refused    atomic.Bool
}

func (s *recordingStore) BeginGatewaySend(_ context.Context, _ uuid.UUID, send int) (store.GatewaySend, error) {
	url := s.live
	if send == 1 && s.refused.Load() {
		url = s.dead
	}
	return store.GatewaySend{Began: true, Attempts: send, Gateway: store.Gateway{ID: 1, Serial: "GW-0001", BaseURL: url}}, nil
}

func (s *recordingStore) AbandonGatewaySend(context.Context, uuid.UUID, int) error { return nil }

func (s *recordingStore) FinishGatewayRequest(_ context.Context, id uuid.UUID, o gatewayreq.Outcome, _ int, _ bool) (store.GatewayRequest, error) {
	now := time.Now()
	return store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: id, Class: gatewayreq.ClassRead}, Status: o.Status,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, CompletedAt: &now, Outcome: o}, nil
}

type plainSecret struct{}

func (plainSecret) Open(string, []byte) ([]byte, error) { return []byte("secret"), nil }

// TestRecordGatewayRequestHistories runs the workflow on an embedded Temporal server against
// a fake gateway and writes its histories to testdata/. Run it with
// LOCKERNET_RECORD_HISTORIES=1.
func TestRecordGatewayRequestHistories(t *testing.T) {
	recordHistories(t)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"success":true,"lockerId":101,"doorOpen":true,"message":"locker opened"}` + "\n"))
	}))
	t.Cleanup(gw.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	st := &recordingStore{live: gw.URL, dead: dead}

	_, c := testenv.Temporal(t)
	const taskQueue = "record-gateway-request-histories"
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, &activities.Activities{Gateways: activities.GatewayDeps{Store: st, Keyring: plainSecret{}}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(in gatewayreq.Spec) (client.WorkflowRun, gatewayreq.Result) {
		in.RequestID = uuid.NewString()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.GatewayRequestWorkflowID(in.RequestID), TaskQueue: taskQueue},
			workflows.GatewayRequestWorkflowName, in)
		require.NoError(t, err)
		var res gatewayreq.Result
		require.NoError(t, r.Get(ctx, &res))
		return r, res
	}

	r, res := run(readLockers)
	assert.Equal(t, gatewayreq.StateCompleted, res.Outcome.Status)
	writeHistory(ctx, t, c, r, "gateway_request_completed.json")

	st.refused.Store(true)
	r, res = run(openLocker)
	assert.Equal(t, gatewayreq.StateCompleted, res.Outcome.Status)
	writeHistory(ctx, t, c, r, "gateway_request_redelivered.json")
}

// changedGatewayRequest skips the dispatch entirely: the kind of edit the replay test exists
// to catch.
func changedGatewayRequest(ctx workflow.Context, in gatewayreq.Spec) (gatewayreq.Result, error) {
	return gatewayreq.Result{}, nil
}

func TestReplayCatchesAChangedGatewayRequest(t *testing.T) {
	t.Parallel()
	requireReplayFails(t, changedGatewayRequest, workflows.GatewayRequestWorkflowName, gatewayHistories[0])
}
