package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// With LOCKERNET_API_WORKER the apiserver runs a worker of the main task queue on its own
// client, so a workflow its outbox starts starts eagerly (the server hands the first task
// back with the start, recorded as eager_execution_accepted) and runs with no worker
// process at all; without it, the start is not eager and the first task waits for a worker.
func TestInProcessWorkerStartsOutboxWorkflowsEagerly(t *testing.T) {
	ts, tc := testenv.Temporal(t)
	for _, tt := range []struct {
		name      string
		apiWorker string
		wantEager bool
	}{
		{name: "with LOCKERNET_API_WORKER", apiWorker: "true", wantEager: true},
		{name: "without", apiWorker: "false", wantEager: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := testenv.NewSeeded(ctx, t, store.Options{MaxConns: 2})
			addr := testenv.FreeAddr(t)
			queue := "lockernet-apiworker-" + tt.apiWorker
			testenv.RunService(t, "apiserver", ts.GetFrontendHostPort(), map[string]string{
				"TEMPORAL_NAMESPACE": ts.GetDefaultNamespace(), "DATABASE_URL": db.URL,
				"LOCKERNET_MASTER_KEY": hex.EncodeToString(db.Key), "LOCKERNET_API_ADDR": addr,
				"LOCKERNET_PUBLIC_URL": "http://" + addr, "LOCKERNET_ADMIN_ADDR": "", "LOCKERNET_DEBUG_ADDR": "",
				"LOCKERNET_TASK_QUEUE": queue, "LOCKERNET_API_WORKER": tt.apiWorker,
			}, run)
			base := "http://" + addr
			waitReady(t, base)
			sp := db.Demo.Credentials.ServiceProvider
			tok := testenv.ClientToken(t, base+"/oauth/token", url.Values{"grant_type": {"client_credentials"},
				"client_id": {sp.ClientID}, "client_secret": {sp.ClientSecret}}, nil)

			tower := db.Demo.Towers[0]
			res := postJSON(t, fmt.Sprintf("%s/api/v1/towers/%s/lockers/%d/reservations", base, tower.ID, tower.LockerIDs[0]), tok,
				map[string]any{"duration": 600})
			wfID := contract.ReservationWorkflowID(res["id"].(string))

			started := firstEvent(t, tc, wfID)
			assert.Equal(t, tt.wantEager, started.GetWorkflowExecutionStartedEventAttributes().GetEagerExecutionAccepted(),
				"the reservation's workflow started eagerly")
			if !tt.wantEager {
				return
			}
			// No worker process runs: the apiserver's own worker ran the first task, which set
			// the hold's timer.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				it := tc.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				timer := false
				for it.HasNext() {
					ev, err := it.Next()
					if !assert.NoError(c, err) {
						return
					}
					timer = timer || ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED
				}
				assert.True(c, timer, "the first task set the hold's timer")
			}, 10*time.Second, 50*time.Millisecond)
		})
	}
}

// waitReady waits for the apiserver at base to answer /readyz 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a := getEventually(t, base+"/readyz")
		assert.Equal(c, http.StatusOK, a.status)
	}, 60*time.Second, 50*time.Millisecond)
}

// postJSON posts body with the bearer token and returns the 201 answer's JSON.
func postJSON(t *testing.T, u, token string, body any) map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", out)
	return out
}

// firstEvent is the first event of workflow id's history, once the workflow exists.
func firstEvent(t *testing.T, tc client.Client, id string) *historypb.HistoryEvent {
	t.Helper()
	var first *historypb.HistoryEvent
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		it := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !assert.True(c, it.HasNext(), "workflow %s started", id) {
			return
		}
		ev, err := it.Next()
		if assert.NoError(c, err) {
			first = ev
		}
	}, 10*time.Second, 50*time.Millisecond)
	return first
}
