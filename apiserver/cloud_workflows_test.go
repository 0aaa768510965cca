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
	"github.com/lockernet/lockernet/workflows"
)

// Every gateway request is a gateway-request/<id> workflow from the moment it is stored
// (DESIGN §6.1): the ones that settle on their first send included, listed with their
// search attributes for an operator in the Temporal UI.
func TestEveryGatewayRequestIsAWorkflow(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCustomerEnv(t)
	c := newCloud(t, e.URL, e.GatewayKey())
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
		require.Eventually(t, func() bool {
			var n int
			_ = e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_lockers WHERE gateway_id = $1`, gw1.DBID).Scan(&n)
			return n == 16
		}, 30*time.Second, 50*time.Millisecond, "the locker mirror of GW-0001 is filled")
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
	wfID := workflows.GatewayRequestWorkflowID(id)
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

// A poll of a pending request answers from its workflow's query, bounded, and from the
// stored request when the workflow cannot answer (no worker); both are counted.
func TestPendingPollAnswersFromTheWorkflowQuery(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCustomerEnv(t)
	c := newCloud(t, e.URL, e.GatewayKey())
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 20000})

	r := c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, "Prefer", "respond-async")
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	id := r.Header.Get("X-Request-Id")

	var polled testenv.Response
	require.Eventually(t, func() bool {
		polled = c.do(http.MethodGet, "/requests/"+id, nil)
		return polled.Header.Get("X-Request-State") == "dispatched"
	}, 10*time.Second, 20*time.Millisecond, "the send is out")
	require.Equal(t, http.StatusOK, polled.Status, "body: %s", polled.Body)
	body := polled.Map(t)
	assert.Equal(t, "dispatched", body["status"])
	assert.Equal(t, float64(1), body["attempts"])
	assert.Nil(t, body["completedAt"])
	assert.Equal(t, id, body["id"])
	assert.Positive(t, pollsCounted(t, e, "workflow"), "the poll asked the workflow")

	// No worker: the query cannot be answered within its bound, and the stored request answers
	// with the same body.
	e.StopWorker()
	before := pollsCounted(t, e, "store")
	polled = c.do(http.MethodGet, "/requests/"+id, nil)
	require.Equal(t, http.StatusOK, polled.Status, "body: %s", polled.Body)
	assert.Equal(t, "dispatched", polled.Header.Get("X-Request-State"))
	body = polled.Map(t)
	assert.Equal(t, "dispatched", body["status"])
	assert.Equal(t, float64(1), body["attempts"])
	assert.Equal(t, before+1, pollsCounted(t, e, "store"), "answered from the store")
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
