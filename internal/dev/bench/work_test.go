package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// work is what Temporal did for one workflow run, read from its history.
type work struct {
	Events, WorkflowTasks, ActivityTasks, LocalActivities, Signals, Updates, Timers, Children int
	Status                                                                                    enumspb.WorkflowExecutionStatus
}

func (w *work) add(o work) {
	w.Events += o.Events
	w.WorkflowTasks += o.WorkflowTasks
	w.ActivityTasks += o.ActivityTasks
	w.LocalActivities += o.LocalActivities
	w.Signals += o.Signals
	w.Updates += o.Updates
	w.Timers += o.Timers
	w.Children += o.Children
}

// historyWork counts a run's history: workflow tasks (each scheduled one), activity tasks
// (each attempt started), local activities (their markers), signals, updates, timers and
// child workflows.
func historyWork(t *testing.T, c client.Client, workflowID string) work {
	t.Helper()
	var w work
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		w.Events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			w.WorkflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			w.ActivityTasks += int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				w.LocalActivities++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			w.Signals++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			w.Updates++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			w.Timers++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			w.Children++
		}
	}
	desc, err := c.DescribeWorkflowExecution(context.Background(), workflowID, "")
	require.NoError(t, err)
	w.Status = desc.GetWorkflowExecutionInfo().GetStatus()
	return w
}

// settled waits until the workflow has closed (or, with running, has nothing pending: no
// workflow task, activity or child in flight) and returns its work.
func settled(t *testing.T, c client.Client, workflowID string, running bool) work {
	t.Helper()
	var w work
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		desc, err := c.DescribeWorkflowExecution(context.Background(), workflowID, "")
		if !assert.NoError(ct, err) {
			return
		}
		st := desc.GetWorkflowExecutionInfo().GetStatus()
		if running {
			assert.Equal(ct, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, st)
			assert.Nil(ct, desc.GetPendingWorkflowTask(), "a workflow task in flight")
			assert.Empty(ct, desc.GetPendingActivities())
			assert.Empty(ct, desc.GetPendingChildren())
		} else {
			assert.NotEqual(ct, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, st)
		}
	}, 60*time.Second, 20*time.Millisecond, workflowID)
	time.Sleep(200 * time.Millisecond) // a signal or task right behind would show by now
	w = historyWork(t, c, workflowID)
	return w
}

type workRow struct {
	op, what string
	w        work
}

// TestTemporalWorkPerOperation runs one of each operation on an embedded Temporal server
// with the whole system around it (testenv: apiserver, worker, Postgres) and counts, from
// the histories, what Temporal did for it. With -v it prints the table docs/performance.md
// shows.
func TestTemporalWorkPerOperation(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	e.RunGatewayCloud(t)
	gw1, _ := e.StartDemoGateways(t)
	tok := e.Token("service_provider")
	tower := e.Seed.Towers[0]
	require.GreaterOrEqual(t, len(tower.LockerIDs), 3)
	var rows []workRow

	// Tower flow as the bench drives it: a reservation, then a drop-off token for the locker
	// (which ends the reservation); the token then waits for its use or expiry.
	path := fmt.Sprintf("/api/v1/towers/%s/lockers/%d/", tower.ID, tower.LockerIDs[0])
	r := e.Do(http.MethodPost, path+"reservations", tok, map[string]any{"duration": 600})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	res := r.Map(t)
	r = e.Do(http.MethodPost, path+"dropoff-locker-tokens", tok, map[string]any{"duration": 300, "client_info": "work"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	token := r.Map(t)
	resWork := settled(t, e.Temporal, contract.ReservationWorkflowID(res["id"].(string)), false)
	tokWork := settled(t, e.Temporal, contract.LockerTokenWorkflowID(token["id"].(string)), true)
	flow := resWork
	flow.add(tokWork)
	flow.Status = enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
	rows = append(rows,
		workRow{"tower flow: reservation", "`reservation/<id>`, ended by the drop-off token", resWork},
		workRow{"tower flow: drop-off token", "`locker-token/<id>`, waiting for its use or expiry", tokWork},
		workRow{"tower flow (both)", "reservation + drop-off token", flow})

	// Expiry: a reservation left to its timer.
	path = fmt.Sprintf("/api/v1/towers/%s/lockers/%d/", tower.ID, tower.LockerIDs[1])
	r = e.Do(http.MethodPost, path+"reservations", tok, map[string]any{"duration": 1})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	rows = append(rows, workRow{"expiry", "`reservation/<id>` expiring on its timer", settled(t, e.Temporal,
		contract.ReservationWorkflowID(r.Map(t)["id"].(string)), false)})

	// The drop-off token's end when it is never used: its timer, then the write-back.
	path = fmt.Sprintf("/api/v1/towers/%s/lockers/%d/", tower.ID, tower.LockerIDs[2])
	r = e.Do(http.MethodPost, path+"reservations", tok, map[string]any{"duration": 600})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = e.Do(http.MethodPost, path+"dropoff-locker-tokens", tok, map[string]any{"duration": 1, "client_info": "work"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	rows = append(rows, workRow{"token expiry", "`locker-token/<id>` of a drop-off token expiring unused (the whole run)", settled(t, e.Temporal,
		contract.LockerTokenWorkflowID(r.Map(t)["id"].(string)), false)})

	// Webhook delivery: one event to one endpoint that answers 204.
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(recv.Close)
	ctx := context.Background()
	epID := uuid.New()
	org := e.Creds.OrganizationID
	_, err := e.Store.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{ID: epID, OrgID: org, URL: recv.URL, Enabled: true,
		SecretSealed: e.Keyring.Seal(keyring.WebhookSecretPurpose(epID), []byte("a secret"))})
	require.NoError(t, err)
	_, err = e.Store.RecordEvent(ctx, store.Event{OrgID: org, Type: "webhook.test", Only: &epID, Data: map[string]string{"n": "1"}})
	require.NoError(t, err)
	var deliveryID uuid.UUID
	require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT id FROM webhook_deliveries WHERE endpoint_id = $1`, epID).Scan(&deliveryID))
	rows = append(rows, workRow{"webhook delivery", "`webhook-delivery/<id>`, delivered at the first attempt",
		settled(t, e.Temporal, contract.WebhookDeliveryWorkflowID(deliveryID.String(), 0), false)})

	// Gateway request: an open through the gateway cloud API, answered by the gateway at once.
	for _, pref := range []string{"respond-async", "wait=10"} {
		h := http.Header{"X-Api-Key": {e.GatewayKey()}, "Prefer": {pref}}
		gr, err := testenv.Exchange(http.MethodPost, fmt.Sprintf("%s/api/customer/v1/locations/%d/lockers/101/open", e.URL, gw1.LocationID), h, nil)
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, gr.Status, "%s", gr.Body)
		id := contract.GatewayRequestWorkflowID(gr.Header.Get("X-Request-Id"))
		what := "`gateway-request/<id>` of an open, `Prefer: " + pref + "`"
		// Every gateway request is a workflow (decision 0012), the one that waits included.
		_, err = e.Temporal.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err, "the request's workflow")
		rows = append(rows, workRow{"gateway request", what, settled(t, e.Temporal, id, false)})
	}

	// Bare workflow: one local activity, started eagerly on a worker of the same client.
	w := worker.New(e.Temporal, bareQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: "BenchBare"})
	w.RegisterActivity(bareActivity)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bench-bare/work", TaskQueue: bareQueue, EnableEagerStart: true}, "BenchBare")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	rows = append(rows, workRow{"bare workflow", "one local activity, eager start (the bench's)", settled(t, e.Temporal, "bench-bare/work", false)})

	var b strings.Builder
	b.WriteString("| operation | workflow run(s) | history events | workflow tasks | activity tasks | local activities | signals | updates | timers | children | status |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		status := strings.ToLower(strings.TrimPrefix(r.w.Status.String(), "WORKFLOW_EXECUTION_STATUS_"))
		if r.w.Status == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
			status = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.op, r.what, r.w.Events, r.w.WorkflowTasks,
			r.w.ActivityTasks, r.w.LocalActivities, r.w.Signals, r.w.Updates, r.w.Timers, r.w.Children, status)
	}
	t.Log("Temporal's work per operation:\n" + b.String())
	for _, r := range rows[:len(rows)-1] {
		if r.w.Events > 0 {
			assert.Positive(t, r.w.WorkflowTasks, r.op)
		}
	}
}
