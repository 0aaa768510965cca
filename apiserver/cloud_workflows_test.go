package apiserver_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Every gateway request is a gateway-request/<id> workflow from the moment it is stored
// (DESIGN §6.1): the ones that settle on their first send included, listed with their
// search attributes for an operator in the Temporal UI.
func TestEveryGatewayRequestIsAWorkflow(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	org := strconv.FormatInt(e.Creds.OrganizationID, 10)
	loc := strconv.FormatInt(gw1.LocationID, 10)

	cases := []struct {
		name, method, path, kind string
		header                   []string
		status                   int
	}{
		{"a fast proxied read", http.MethodGet, locPath(gw1, "/system"), gatewayreq.SearchKind("GW-0001", gatewayreq.KindSystem), nil, http.StatusOK},
		{"a fast open", http.MethodPost, locPath(gw1, "/lockers/102/open"), gatewayreq.SearchKind("GW-0001", gatewayreq.KindOpenLocker), nil, http.StatusOK},
		{"a wait=0 call", http.MethodGet, locPath(gw1, "/lockers"), gatewayreq.SearchKind("GW-0001", gatewayreq.KindListLockers), []string{"Prefer", "wait=0"}, http.StatusAccepted},
		{"a respond-async call", http.MethodGet, locPath(gw1, "/lockers/config"), gatewayreq.SearchKind("GW-0001", gatewayreq.KindLockerConfig),
			[]string{"Prefer", "respond-async"}, http.StatusAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(tc.method, tc.path, nil, tc.header...)
			require.Equal(t, tc.status, r.Status, "body: %s", r.Body)
			id := r.Header.Get("X-Request-Id")
			require.NotEmpty(t, id)
			requireRequestWorkflow(t, e, id, tc.kind, org, loc)
		})
	}

	t.Run("an access-code open", func(t *testing.T) {
		key := e.Creds.AppEngineAPIKey
		e.StartGatewaySync(t, 200*time.Millisecond)
		e.WaitLockersMirrored(t, gw1, 16)
		made := testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/locker", map[string]string{"x-api-key": key},
			map[string]any{"location_id": loc, "locker_name": "A05", "single_use": false, "expiry": time.Now().Add(time.Hour).Format(time.RFC3339)})
		require.Equal(t, http.StatusOK, made.Status, "body: %s", made.Body)
		r := testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/locker/open", map[string]string{"x-api-key": key},
			map[string]any{"location_id": loc, "access_code": made.Map(t)["access_code"]})
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		id, _ := r.Map(t)["request_id"].(string)
		require.NotEmpty(t, id)
		requireRequestWorkflow(t, e, id, gatewayreq.SearchKind("GW-0001", gatewayreq.KindAccessCodeOpen), org, loc)
	})
}

// requireRequestWorkflow checks that the request has its workflow, completed, with the
// three search attributes.
func requireRequestWorkflow(t *testing.T, e *testenv.Env, id, kind, org, loc string) {
	t.Helper()
	wfID := contract.GatewayRequestWorkflowID(id)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		d, err := e.Temporal.DescribeWorkflowExecution(context.Background(), wfID, "")
		if assert.NoError(c, err) {
			assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus())
		}
	}, 30*time.Second, 50*time.Millisecond, "workflow %s", wfID)
	attrs := searchAttributes(t, e, wfID)
	assert.Equal(t, kind, attrs["RequestKind"])
	assert.Equal(t, org, attrs["OrganizationId"])
	assert.Equal(t, loc, attrs["LocationId"])
}

// A poll of a pending request answers from its workflow's query, bounded, once the first
// send is done; while the first send is out (inside the workflow's first task, which a query
// would wait for) and when the workflow cannot answer (no worker) it answers from the stored
// request, with the same body. Each is counted by its source (DESIGN §6.2).
func TestPendingPollAnswersFromTheWorkflowQuery(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	// The first send is out (a slow gateway): the stored row answers at once.
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 20000})
	r := c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, "Prefer", "respond-async")
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	id := r.Header.Get("X-Request-Id")
	require.Eventually(t, func() bool {
		return c.do(http.MethodGet, "/requests/"+id, nil).Header.Get("X-Request-State") == "dispatched"
	}, 10*time.Second, 20*time.Millisecond, "the send is out")

	// pollDispatched polls the request, which must answer still out after attempts sends.
	pollDispatched := func(attempts int) map[string]any {
		t.Helper()
		polled := c.do(http.MethodGet, "/requests/"+id, nil)
		require.Equal(t, http.StatusOK, polled.Status, "body: %s", polled.Body)
		assert.Equal(t, "dispatched", polled.Header.Get("X-Request-State"))
		body := polled.Map(t)
		assert.Equal(t, "dispatched", body["status"])
		assert.Equal(t, float64(attempts), body["attempts"])
		return body
	}
	workflowBefore, storeBefore := pollsCounted(t, e, "workflow"), pollsCounted(t, e, "store")
	body := pollDispatched(1)
	assert.Nil(t, body["completedAt"])
	assert.Equal(t, id, body["id"])
	assert.Equal(t, storeBefore+1, pollsCounted(t, e, "store"), "the first send is out: answered from the store")
	assert.Equal(t, workflowBefore, pollsCounted(t, e, "workflow"), "the workflow was not asked")

	// A read the gateway does not answer is sent again once (an activity of its own): while
	// the second send is out, the poll asks the workflow.
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeHang})
	r = c.do(http.MethodGet, locPath(gw1, "/lockers"), nil, "Prefer", "respond-async")
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	id = r.Header.Get("X-Request-Id")
	require.Eventually(t, func() bool {
		var lastSend int
		_ = e.Store.Pool().QueryRow(context.Background(), `SELECT last_send FROM gateway_requests WHERE id = $1`, id).Scan(&lastSend)
		return lastSend == 2
	}, 15*time.Second, 20*time.Millisecond, "the second send is out")
	workflowBefore = pollsCounted(t, e, "workflow")
	pollDispatched(2)
	assert.Equal(t, workflowBefore+1, pollsCounted(t, e, "workflow"), "the poll asked the workflow")

	// No worker: the query cannot be answered within its bound, and the stored request answers
	// with the same body.
	e.StopWorker()
	storeBefore = pollsCounted(t, e, "store")
	pollDispatched(2)
	assert.Equal(t, storeBefore+1, pollsCounted(t, e, "store"), "answered from the store")
}

var pollsLine = regexp.MustCompile(`(?m)^lockernet_gateway_request_polls_total\{source="(\w+)"\} (\d+)`)

// pollsCounted reads lockernet_gateway_request_polls_total{source} from the apiserver's
// internal listener.
func pollsCounted(t *testing.T, e *testenv.Env, source string) int {
	t.Helper()
	m := testenv.DoWithHeaders(t, http.MethodGet, e.MetricsURL(e.URL)+"/metrics", nil, nil)
	for _, line := range pollsLine.FindAllStringSubmatch(string(m.Body), -1) {
		if line[1] == source {
			n, _ := strconv.Atoi(line[2])
			return n
		}
	}
	return 0
}

// A door open whose send's fate became unknown (the worker carrying it stopped mid-call) is
// sent again with its Idempotency-Key when the gateway honours keys: the gateway carried the
// first send through and answers the re-send with what it did, so the request completes and
// the door moved once (DESIGN §6.2; without keys it would end gateway_unresponsive). Right
// after a start, before any gateway sync has recorded that the gateway honours keys, the
// cloud asks the gateway before it decides, so the open is not lost either.
func TestOpenWithUnknownFateIsResentWithItsKey(t *testing.T) {
	t.Parallel()
	for _, synced := range []bool{true, false} {
		t.Run(map[bool]string{true: "recorded by the gateway sync", false: "right after a start, not recorded"}[synced], func(t *testing.T) {
			t.Parallel()
			openWithUnknownFate(t, synced)
		})
	}
}

func openWithUnknownFate(t *testing.T, synced bool) {
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	honoured := func() bool {
		var honoured bool
		_ = e.Store.Pool().QueryRow(context.Background(), `SELECT honours_idempotency_keys FROM gateways WHERE id = $1`, gw1.DBID).Scan(&honoured)
		return honoured
	}
	if synced {
		e.StartGatewaySync(t, 200*time.Millisecond)
		require.Eventually(t, honoured, 30*time.Second, 50*time.Millisecond, "the gateway sync records that GW-0001 honours keys")
	} else {
		require.False(t, honoured(), "no answer of GW-0001 seen yet")
	}
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeControllerSlow, DelayMs: 250})

	r := c.do(http.MethodPost, locPath(gw1, "/lockers/104/open"), nil, "Prefer", "respond-async", "Idempotency-Key", "open-104")
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	id := r.Header.Get("X-Request-Id")
	require.Eventually(t, func() bool {
		var status string
		_ = e.Store.Pool().QueryRow(context.Background(), `SELECT status FROM gateway_requests WHERE id = $1`, id).Scan(&status)
		return status == "dispatched"
	}, 10*time.Second, 5*time.Millisecond, "the first send is out")
	e.StopWorker() // mid-call: the send is cut off, its fate unknown to the cloud
	e.StartWorker()

	got := c.poll(id)
	require.Equal(t, http.StatusOK, got.Status, "body: %s", got.Body)
	assert.Equal(t, "completed", got.Header.Get("X-Request-State"))
	assert.Equal(t, true, got.Map(t)["doorOpen"], "body: %s", got.Body)
	assert.Equal(t, 1, gw1.Sim.Opens(104), "the door moved once")
	var attempts int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT attempts FROM gateway_requests WHERE id = $1`, id).Scan(&attempts))
	assert.Equal(t, 2, attempts, "sent again once its fate was unknown")
	assert.True(t, honoured(), "recorded from the gateway's answers")

	// The client's retry with its key gets the same outcome.
	replay := c.do(http.MethodPost, locPath(gw1, "/lockers/104/open"), nil, "Idempotency-Key", "open-104")
	assert.Equal(t, http.StatusOK, replay.Status)
	assert.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, string(got.Body), string(replay.Body))
	assert.Equal(t, 1, gw1.Sim.Opens(104))
}
