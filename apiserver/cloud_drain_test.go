package apiserver_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// A stopping apiserver answers clients that wait for a gateway with the pending request at
// once, instead of holding its graceful shutdown until their waits run out.
func TestDrainAnswersWaitingClients(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	gw, _ := e.StartDemoGateways(t)
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeHang})
	c := newCloudClient(t, e.URL, e.GatewayKey())

	answered := make(chan testenv.Response, 1)
	go func() {
		answered <- c.do(http.MethodGet, fmt.Sprintf("/locations/%d/lockers", gw.LocationID), nil, "Prefer", "wait=30")
	}()
	// Let the request reach its wait (it is stored before it waits).
	require.Eventually(t, func() bool {
		var n int
		_ = e.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM gateway_requests WHERE gateway_id = $1`, gw.DBID).Scan(&n)
		return n > 0
	}, 30*time.Second, 20*time.Millisecond)
	e.DrainAPIServer()
	var r testenv.Response
	select {
	case r = <-answered:
	case <-time.After(25 * time.Second): // far below the 30 s the client asked to wait
		t.Fatal("the waiting client was not answered when the server began to stop")
	}
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	assert.NotEmpty(t, r.Header.Get("Location"))
	assert.Contains(t, []string{"pending", "dispatched"}, r.Header.Get("X-Request-State"))
}
