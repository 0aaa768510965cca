package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// While the worker cannot reach Temporal, its health port answers 503 "starting" at once
// rather than holding the probe in the listen queue.
func TestWorkerNotReadyUntilTemporalIsReachable(t *testing.T) {
	addr := testenv.FreeAddr(t)
	testenv.RunService(t, "worker", testenv.FreeAddr(t), map[string]string{"LOCKERNET_WORKER_ADDR": addr, "LOCKERNET_DEBUG_ADDR": ""}, run)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp := testenv.GetEventually(t, "http://"+addr+p)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var body map[string]any
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &body) != nil || body["status"] != "starting" {
			t.Fatalf("%s while Temporal is unreachable: %d %s", p, resp.StatusCode, b)
		}
	}
}
