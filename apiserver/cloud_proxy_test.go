package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// requireProxied checks the headers every proxy answer carries and that it is terminal.
func requireProxied(t *testing.T, r testenv.Response, g *testenv.Gateway, state string) {
	t.Helper()
	_, err := uuid.Parse(r.Header.Get("X-Request-Id"))
	assert.NoError(t, err, "X-Request-Id is a uuid")
	assert.Equal(t, g.Serial, r.Header.Get("X-Gateway-Id"))
	assert.Equal(t, state, r.Header.Get("X-Request-State"))
	_, err = strconv.Atoi(r.Header.Get("X-Request-Duration-Ms"))
	assert.NoError(t, err, "X-Request-Duration-Ms is an integer")
	assert.NotEmpty(t, r.Header.Get("X-RateLimit-Limit"))
}

func withoutTimestamp(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "body: %s", b)
	delete(m, "timestamp")
	return m
}

func TestCloudProxiesEveryReadVerbatim(t *testing.T) {
	t.Parallel()
	e, gw1, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	// Stable reads: the body is the gateway's, byte for byte.
	// (Error bodies carry the gateway's own timestamp, which differs between two calls.)
	firstLocker := map[string]string{"GW-0001": "101", "GW-0002": "201"}
	for _, g := range []*testenv.Gateway{gw1, gw2} {
		for _, path := range []string{"/lockers", "/lockers/config", "/lockers/" + firstLocker[g.Serial], "/locker-types",
			"/locker-types/1", "/bank-types", "/bank-types/1", "/transactions", "/lockers/999", "/locker-types/999",
			"/bank-types/999", "/transactions/nope"} {
			t.Run(g.Serial+path, func(t *testing.T) {
				status, want, hdr := direct(t, g, http.MethodGet, path, nil)
				r := c.do(http.MethodGet, locPath(g, path), nil)
				requireProxied(t, r, g, "completed")
				assert.Equal(t, status, r.Status)
				assert.Equal(t, hdr.Get("Content-Type"), r.Header.Get("Content-Type"))
				if status < 300 {
					assert.Equal(t, string(want), string(r.Body))
					return
				}
				assert.Equal(t, withoutTimestamp(t, want), withoutTimestamp(t, r.Body))
			})
		}
	}

	t.Run("operators find a gateway's requests in Temporal and on /metrics", func(t *testing.T) {
		// Every request is a workflow (decision 0012): the reads above, settled by their first
		// send, as well as those answered 202 (respond-async).
		for _, path := range []string{"/lockers", "/bank-types"} {
			r := c.do(http.MethodGet, locPath(gw2, path), nil, "Prefer", "respond-async")
			require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
			requireProxied(t, c.poll(r.Header.Get("X-Request-Id")), gw2, "completed")
		}
		var stored int
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM gateway_requests WHERE location_id = $1`, gw2.LocationID).Scan(&stored))
		require.Greater(t, stored, 2, "the reads above and the two here")
		q := `RequestKind STARTS_WITH "gateway:GW-0002:" AND LocationId = "` + strconv.FormatInt(gw2.LocationID, 10) + `"`
		require.Eventually(t, func() bool {
			resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.Namespace, Query: q})
			return err == nil && len(resp.GetExecutions()) == stored
		}, 30*time.Second, 100*time.Millisecond, "one workflow per stored request of GW-0002")
		body := string(testenv.DoWithHeaders(t, http.MethodGet, e.MetricsURL(e.URL)+"/metrics", nil, nil).Body)
		assert.Regexp(t, `lockernet_cloud_gateway_request_responses_total\{class="read",state="completed"\} [1-9]`, body)
	})

	t.Run("a workflow keeps the gateway's body out of its history", func(t *testing.T) {
		r := c.do(http.MethodGet, locPath(gw2, "/system"), nil, "Prefer", "respond-async")
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		id := r.Header.Get("X-Request-Id")
		got := c.poll(id)
		requireProxied(t, got, gw2, "completed")
		require.Equal(t, "GW-0002", got.Map(t)["gatewayId"], "the answer is the gateway's body, from Postgres")

		// Every payload the run recorded (its sends' results, which carry the stored outcome
		// when the first send settled it, a finish's, its own result): none carries the body.
		ctx := context.Background()
		// The poll answers from Postgres as soon as the outcome is stored; the run's history
		// is complete once the run is.
		require.NoError(t, e.Temporal.GetWorkflow(ctx, "gateway-request/"+id, "").Get(ctx, nil))
		var payloads []string
		it := e.Temporal.GetWorkflowHistory(ctx, "gateway-request/"+id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			var ps []*commonpb.Payload
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
				ps = append(ps, m.GetDetails()["result"].GetPayloads()...)
			}
			ps = append(ps, ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()...)
			ps = append(ps, ev.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()...)
			for _, p := range ps {
				var raw json.RawMessage
				require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &raw))
				payloads = append(payloads, string(raw))
			}
		}
		require.NotEmpty(t, payloads)
		encoded := base64.StdEncoding.EncodeToString(got.Body) // how a []byte field would carry it
		for _, p := range payloads {
			assert.NotContains(t, p, `gatewayId`)
			assert.NotContains(t, p, encoded)
		}
		assert.Contains(t, payloads[len(payloads)-1], `"BodyInStore":true`)
	})

	t.Run("health and system", func(t *testing.T) {
		r := c.do(http.MethodGet, locPath(gw1, "/health"), nil)
		requireProxied(t, r, gw1, "completed")
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "ok", r.Map(t)["status"])

		r = c.do(http.MethodGet, locPath(gw2, "/system"), nil)
		requireProxied(t, r, gw2, "completed")
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "GW-0002", r.Map(t)["gatewayId"])
	})

	t.Run("Server-Timing names where a proxied answer spent its time", func(t *testing.T) {
		r := c.do(http.MethodGet, locPath(gw1, "/lockers/config"), nil)
		requireProxied(t, r, gw1, "completed")
		timing := r.Header.Get("Server-Timing")
		assert.Regexp(t, `^app;dur=[0-9.]+, `, timing, "app comes first")
		for _, phase := range []string{"store", "wait"} {
			assert.Regexp(t, `(^|, )`+phase+`;dur=[0-9.]+(,|$)`, timing)
		}
		assert.NotContains(t, timing, "auth;", "a proxied call's key is checked in the store round trip")
		assert.Regexp(t, `(^|, )start;dur=[0-9.]+(,|$)`, timing, "every request starts its workflow (decision 0012)")
		// A poll checks its key on its own.
		poll := c.do(http.MethodGet, "/requests/"+r.Header.Get("X-Request-Id"), nil)
		require.Equal(t, http.StatusOK, poll.Status, "body: %s", poll.Body)
		assert.Regexp(t, `(^|, )auth;dur=[0-9.]+(,|$)`, poll.Header.Get("Server-Timing"))

		// So does one answered at once (respond-async).
		r = c.do(http.MethodGet, locPath(gw1, "/lockers/config"), nil, "Prefer", "respond-async")
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		assert.Regexp(t, `(^|, )start;dur=[0-9.]+(,|$)`, r.Header.Get("Server-Timing"))
	})

	t.Run("logs pass X-Response-Truncated through", func(t *testing.T) {
		for range 2 { // log entries to page through
			require.Equal(t, http.StatusCreated, c.do(http.MethodPost, locPath(gw1, "/transactions"), nil).Status)
		}
		r := c.do(http.MethodGet, locPath(gw1, "/system/logs?limit=1"), nil)
		requireProxied(t, r, gw1, "completed")
		require.Equal(t, http.StatusOK, r.Status)
		var entries []map[string]any
		r.JSON(t, &entries)
		assert.Len(t, entries, 1)
		assert.Equal(t, "true", r.Header.Get("X-Response-Truncated"))

		r = c.do(http.MethodGet, locPath(gw1, "/system/logs?limit=1000"), nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Empty(t, r.Header.Get("X-Response-Truncated"))
	})
}

func TestCloudTransactionLifecycle(t *testing.T) {
	t.Parallel()
	// Without the outcome listener (RunGatewayCloud): answers come from the workflow results.
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	gw1, _ := e.StartDemoGateways(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	// Without a transactionId the cloud uses the request id.
	r := c.do(http.MethodPost, locPath(gw1, "/transactions"), map[string]any{"lockerTypeId": 1})
	requireProxied(t, r, gw1, "completed")
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	var tx struct {
		TransactionID string `json:"transactionId"`
		LockerID      int    `json:"lockerId"`
		CreatedAt     string `json:"createdAt"`
	}
	r.JSON(t, &tx)
	assert.Equal(t, r.Header.Get("X-Request-Id"), tx.TransactionID)
	assert.NotZero(t, tx.LockerID)

	// An empty body works too; a numeric transactionId is accepted as the gateway accepts it.
	r = c.do(http.MethodPost, locPath(gw1, "/transactions"), nil)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	r = c.do(http.MethodPost, locPath(gw1, "/transactions"), map[string]any{"transactionId": 4711, "lockerTypeId": "2", "requireLowLocker": false})
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	assert.Equal(t, "4711", r.Map(t)["transactionId"])

	// The same transactionId again is the gateway's 409, passed through.
	r = c.do(http.MethodPost, locPath(gw1, "/transactions"), map[string]any{"transactionId": "4711"})
	requireProxied(t, r, gw1, "completed")
	require.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "TRANSACTION_EXISTS", r.Map(t)["error"])

	r = c.do(http.MethodGet, locPath(gw1, "/transactions/"+tx.TransactionID), nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, float64(tx.LockerID), r.Map(t)["lockerId"])

	before := simStats(t, gw1).Opens[strconv.Itoa(tx.LockerID)]
	r = c.do(http.MethodPost, locPath(gw1, "/transactions/"+tx.TransactionID+"/open"), nil)
	requireProxied(t, r, gw1, "completed")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	assert.Equal(t, true, r.Map(t)["doorOpen"])
	assert.Equal(t, before+1, simStats(t, gw1).Opens[strconv.Itoa(tx.LockerID)])

	r = c.do(http.MethodDelete, locPath(gw1, "/transactions/"+tx.TransactionID), nil)
	requireProxied(t, r, gw1, "completed")
	require.Equal(t, http.StatusNoContent, r.Status)
	assert.Empty(t, r.Body)

	r = c.do(http.MethodGet, locPath(gw1, "/transactions/"+tx.TransactionID), nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "TRANSACTION_NOT_FOUND", r.Map(t)["error"], "the gateway's own 404, verbatim")
}

func TestCloudLockerOperations(t *testing.T) {
	t.Parallel()
	e, _, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	r := c.do(http.MethodPatch, locPath(gw2, "/lockers/203"), map[string]any{"outOfService": true, "reasonCode": "DAMAGED", "reason": "hinge"})
	requireProxied(t, r, gw2, "completed")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	assert.Equal(t, true, r.Map(t)["success"])

	r = c.do(http.MethodGet, locPath(gw2, "/lockers/203"), nil)
	require.Equal(t, http.StatusOK, r.Status)
	var lk map[string]any
	r.JSON(t, &lk)
	assert.Equal(t, true, lk["outOfService"])
	assert.Equal(t, "DAMAGED", lk["reasonCode"])

	r = c.do(http.MethodPatch, locPath(gw2, "/lockers/203"), map[string]any{"outOfService": false})
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)

	r = c.do(http.MethodPost, locPath(gw2, "/lockers/205/open"), nil)
	requireProxied(t, r, gw2, "completed")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var op map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &op))
	assert.Equal(t, true, op["doorOpen"])
	assert.Equal(t, 1, simStats(t, gw2).Opens["205"])

	// Validation happens at the cloud, in its own error body.
	r = c.do(http.MethodPatch, locPath(gw2, "/lockers/203"), map[string]any{"reason": "no state"})
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	r = c.do(http.MethodPatch, locPath(gw2, "/lockers/203"), `{"outOfService": "yes"}`)
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	r = c.do(http.MethodPost, locPath(gw2, "/transactions"), `{"lockerTypeId": -1}`)
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	r = c.do(http.MethodPost, locPath(gw2, "/transactions"), `{"transactionId": "bad id with spaces"}`)
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	r = c.do(http.MethodPost, locPath(gw2, "/transactions"), `{not json`)
	requireCloudError(t, r, http.StatusBadRequest, "BAD_REQUEST")
	r = c.do(http.MethodGet, "/locations/abc/lockers", nil)
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	r = c.do(http.MethodGet, locPath(gw2, "/system/logs?limit=0"), nil)
	requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}
