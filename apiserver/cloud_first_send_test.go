package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// The fast path (docs/decisions/0009-first-send-in-line.md): a waiting request's first send
// is made by the apiserver itself, and its workflow only runs when more is to be done.

// requireNoWorkflow checks that a request was settled without its workflow ever starting.
func requireNoWorkflow(t *testing.T, e *testenv.Env, id string) {
	t.Helper()
	_, err := e.Temporal.DescribeWorkflowExecution(context.Background(), workflows.GatewayRequestWorkflowID(id), "")
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "the request's workflow was started")
}

func TestFirstSendSettlesWithoutAWorkflow(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCustomerEnv(t)
	c := newCloud(t, e.URL, e.GatewayKey())

	t.Run("a read", func(t *testing.T) {
		status, want, _ := direct(t, gw1, http.MethodGet, "/lockers/101", nil)
		r := c.do(http.MethodGet, locPath(gw1, "/lockers/101"), nil)
		requireProxied(t, r, gw1, "completed")
		assert.Equal(t, status, r.Status)
		assert.Equal(t, string(want), string(r.Body))
		requireNoWorkflow(t, e, r.Header.Get("X-Request-Id"))

		// The poll answers what the caller got, from Postgres.
		p := c.do(http.MethodGet, "/requests/"+r.Header.Get("X-Request-Id"), nil)
		assert.Equal(t, r.Status, p.Status)
		assert.Equal(t, string(r.Body), string(p.Body))
		assert.Equal(t, "completed", p.Header.Get("X-Request-State"))
	})

	t.Run("a door open, replayed with its key", func(t *testing.T) {
		before := simStats(t, gw1).Opens["103"]
		key := uuid.NewString()
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, "Idempotency-Key", key)
		requireProxied(t, r, gw1, "completed")
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		assert.Equal(t, true, r.Map(t)["doorOpen"])
		requireNoWorkflow(t, e, r.Header.Get("X-Request-Id"))

		again := c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, "Idempotency-Key", key)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, r.Status, again.Status)
		assert.Equal(t, string(r.Body), string(again.Body))
		assert.Equal(t, before+1, simStats(t, gw1).Opens["103"], "the door opened once")

		row, err := e.Store.GatewayRequestByID(context.Background(), uuid.MustParse(r.Header.Get("X-Request-Id")))
		require.NoError(t, err)
		assert.Equal(t, 1, row.Attempts)
		assert.Nil(t, row.LeaseUntil, "a settled request holds no lease")
	})

	t.Run("an answer that needs a re-send is handed to the workflow", func(t *testing.T) {
		setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeHTTP500})
		t.Cleanup(func() { setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeNone}) })
		r := c.do(http.MethodGet, locPath(gw1, "/bank-types"), nil)
		requireCustomerError(t, r, http.StatusBadGateway, "GATEWAY_REJECTED")
		id := r.Header.Get("X-Request-Id")
		_, err := e.Temporal.DescribeWorkflowExecution(context.Background(), workflows.GatewayRequestWorkflowID(id), "")
		require.NoError(t, err, "the workflow re-sent the read")
		row, err := e.Store.GatewayRequestByID(context.Background(), uuid.MustParse(id))
		require.NoError(t, err)
		assert.Equal(t, 2, row.Attempts, "sent by the apiserver, then once more by the workflow")
	})
}

// An apiserver that stopped after storing a request with its first send begun (before or
// during the call) leaves a lease that lapses; whoever finds it so starts the workflow, which
// settles the request under the crash rules: a door open whose fate is unknown is never sent
// again, a read is sent again.
func TestFirstSendOwnerGoneIsTakenOver(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCustomerEnv(t)
	c := newCloud(t, e.URL, e.GatewayKey())
	ctx := context.Background()
	orphan := func(kind, class, method, gatewayPath string) uuid.UUID {
		t.Helper()
		id := uuid.New()
		row, created, err := e.Store.CreateGatewayRequest(ctx, store.NewGatewayRequest{
			ID: id, OrganizationID: e.Creds.OrganizationID, LocationID: gw1.LocationID, GatewayID: gw1.DBID, GatewaySerial: gw1.Serial,
			Kind: kind, Class: class, Method: method, Path: fmt.Sprintf("%s/locations/%d%s", customerBase, gw1.LocationID, gatewayPath),
			GatewayPath: gatewayPath, Lease: 300 * time.Millisecond,
		}, nil)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, "dispatched", row.Status)
		require.Equal(t, 1, row.Attempts)
		require.NotNil(t, row.LeaseUntil)
		return id
	}

	t.Run("a door open: a poll takes it over once the lease lapses, and it is never sent", func(t *testing.T) {
		before := simStats(t, gw1).Opens["110"]
		id := orphan("open-locker", "hardware", http.MethodPost, "/lockers/110/open")

		// While the lease holds, a poll without a wait answers the stored state at once.
		r := c.do(http.MethodGet, "/requests/"+id.String(), nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "dispatched", r.Header.Get("X-Request-State"))

		final := c.do(http.MethodGet, "/requests/"+id.String(), nil, "Prefer", "wait=10")
		m := requireCustomerError(t, final, http.StatusGatewayTimeout, "GATEWAY_UNRESPONSIVE")
		assert.Equal(t, "gateway_unresponsive", final.Header.Get("X-Request-State"))
		assert.Contains(t, fmt.Sprint(m["details"]), "interrupted")
		assert.Equal(t, before, simStats(t, gw1).Opens["110"], "a door open whose fate is unknown is never sent again")
	})

	t.Run("a read: the reconciler takes it over, and it is sent again", func(t *testing.T) {
		id := orphan("get-locker", "read", http.MethodGet, "/lockers/102")
		time.Sleep(400 * time.Millisecond) // the lease lapses
		e.ReconcileGatewayRequests(t, time.Minute)
		final := c.poll(id.String())
		requireProxied(t, final, gw1, "completed")
		assert.Equal(t, http.StatusOK, final.Status)
		row, err := e.Store.GatewayRequestByID(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, 2, row.Attempts)
		assert.Nil(t, row.LeaseUntil)
	})

	t.Run("a lease still held is left to its owner", func(t *testing.T) {
		id := uuid.New()
		_, _, err := e.Store.CreateGatewayRequest(ctx, store.NewGatewayRequest{
			ID: id, OrganizationID: e.Creds.OrganizationID, LocationID: gw1.LocationID, GatewayID: gw1.DBID, GatewaySerial: gw1.Serial,
			Kind: "open-locker", Class: "hardware", Method: http.MethodPost, GatewayPath: "/lockers/111/open",
			Path: fmt.Sprintf("%s/locations/%d/lockers/111/open", customerBase, gw1.LocationID), Lease: time.Minute,
		}, nil)
		require.NoError(t, err)
		e.ReconcileGatewayRequests(t, 0)
		r := c.do(http.MethodGet, "/requests/"+id.String(), nil, "Prefer", "wait=1")
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "dispatched", r.Header.Get("X-Request-State"))
		requireNoWorkflow(t, e, id.String())
	})
}

// A call slower than the lease keeps its owner: the apiserver renews the lease while the call
// is in flight, so nobody takes it over and the door opens once.
func TestFirstSendRenewsItsLease(t *testing.T) {
	t.Parallel()
	settings := testenv.ScaledCustomerSettings()
	settings.FirstSendLease = 600 * time.Millisecond
	e, _, gw2 := startCustomerEnvWith(t, settings)
	c := newCloud(t, e.URL, e.GatewayKey())
	setFaults(t, gw2, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 2000})
	o := e.NewOtherOrg(t)
	rivalKey, _, err := e.Store.IssueGatewayKey(context.Background(), o.OrgID, "rival", nil)
	require.NoError(t, err)
	rival := newCloud(t, e.URL, rivalKey)

	done := make(chan testenv.Response, 1)
	go func() { done <- c.do(http.MethodPost, locPath(gw2, "/lockers/204/open"), nil, "Prefer", "wait=10") }()
	// Past the lease's first length, the reconciler finds it renewed (held), and another
	// organization polling the request, even with a wait, finds nothing.
	time.Sleep(time.Second)
	e.ReconcileGatewayRequests(t, 0)
	var id string
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT id::text FROM gateway_requests WHERE lease_until IS NOT NULL AND completed_at IS NULL`).Scan(&id))
	requireCustomerError(t, rival.do(http.MethodGet, "/requests/"+id, nil, "Prefer", "wait=1"), http.StatusNotFound, "REQUEST_NOT_FOUND")
	r := <-done
	requireProxied(t, r, gw2, "completed")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	assert.Equal(t, true, r.Map(t)["doorOpen"])
	requireNoWorkflow(t, e, r.Header.Get("X-Request-Id"))
	assert.Equal(t, 1, simStats(t, gw2).Opens["204"])
}

// Without the apiserver's own sender, every request is sent by its workflow, as before.
func TestFirstSendOffSendsByWorkflow(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Customer: testenv.ScaledCustomerSettings(), NoFirstSend: true})
	e.RunGatewayCloud(t)
	gw1, _ := e.StartDemoGateways(t)
	c := newCloud(t, e.URL, e.GatewayKey())
	r := c.do(http.MethodGet, locPath(gw1, "/lockers/101"), nil)
	requireProxied(t, r, gw1, "completed")
	assert.Regexp(t, `(^|, )start;dur=`, r.Header.Get("Server-Timing"))
	_, err := e.Temporal.DescribeWorkflowExecution(context.Background(), workflows.GatewayRequestWorkflowID(r.Header.Get("X-Request-Id")), "")
	require.NoError(t, err)
}
