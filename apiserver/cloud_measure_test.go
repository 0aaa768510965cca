package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/worker"
)

// TestMeasureCloudOverhead measures what the cloud adds to a gateway call: the same read
// (GET /lockers/config) straight to a gateway's local API, and through the gateway cloud
// API, where every request is sent by its workflow (request row, workflow start, send
// activity that stores the outcome, answer; decision 0012), the worker
//
//   - on the apiserver's own Temporal client, so the workflow starts eagerly (its first task
//     comes back in the start response): "cloud-eager";
//   - on the same client but with eager start disabled: "cloud-no-eager";
//   - on a client of its own, as in production where apiserver and worker are separate
//     processes: "cloud-separate-worker".
//
// It logs p50 and p99 per call; it asserts nothing about them. Run it with
//
//	LOCKERNET_MEASURE_OVERHEAD=1 go test -count=1 -v -run TestMeasureCloudOverhead ./apiserver/
//
// (LOCKERNET_MEASURE_CALLS sets the calls per mode, 400 by default). The embedded Temporal
// server has one history shard with its transfer-queue limit raised (testenv), as a
// production cluster with many shards behaves; Postgres and Temporal run on the same host.
func TestMeasureCloudOverhead(t *testing.T) {
	if os.Getenv("LOCKERNET_MEASURE_OVERHEAD") != "1" {
		t.Skip("set LOCKERNET_MEASURE_OVERHEAD=1 to measure")
	}
	n := 400
	if v, err := strconv.Atoi(os.Getenv("LOCKERNET_MEASURE_CALLS")); err == nil && v > 0 {
		n = v
	}
	for _, mode := range []string{"direct", "cloud-eager", "cloud-no-eager", "cloud-separate-worker"} {
		t.Run(mode, func(t *testing.T) {
			p50, p99 := measureOverhead(t, mode, n)
			t.Logf("%-22s n=%d p50=%.2fms p99=%.2fms", mode, n, p50, p99)
		})
	}
}

func measureOverhead(t *testing.T, mode string, n int) (p50, p99 float64) {
	settings := testenv.ScaledCloudSettings()
	settings.DisableEagerStart = mode == "cloud-no-eager"
	e := testenv.Start(t, testenv.Options{Cloud: settings})
	e.RunGatewayCloud(t)
	gw := e.StartGateway(t, "GW-0001", "two-banks")
	unlimited := 1_000_000
	key, _, err := e.Store.IssueGatewayKey(context.Background(), e.Creds.OrganizationID, "measure", &unlimited)
	require.NoError(t, err)

	if mode == "cloud-separate-worker" {
		e.StopWorker()
		other, err := client.NewClientFromExisting(e.Temporal, client.Options{Namespace: e.Namespace})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		acts := &activities.Activities{Reservations: e.Store, Tokens: e.Store, Gateways: activities.GatewayDeps{Store: e.Store, Keyring: e.Keyring}}
		go func() { _ = worker.Run(ctx, other, e.TaskQueue, acts, worker.Options{}); close(done) }()
		t.Cleanup(func() { cancel(); <-done; other.Close() })
	}

	call := func() {
		if mode == "direct" {
			resp, _, err := gw.Do(context.Background(), http.MethodGet, "/lockers/config", nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("direct call: %v", err)
			}
			return
		}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s/locations/%d/lockers/config", e.URL, cloudBase, gw.LocationID), nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("cloud call: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-State") != "completed" {
			t.Fatalf("cloud call: status %d, state %s", resp.StatusCode, resp.Header.Get("X-Request-State"))
		}
	}
	for range 20 { // warm up connections, caches and the worker
		call()
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		call()
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	return pct(0.50), pct(0.99)
}
