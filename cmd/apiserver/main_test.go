package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// startRun runs the apiserver as main does, on fresh ports, and stops it when the test ends.
func startRun(t *testing.T, temporalAddr, namespace string) string {
	t.Helper()
	addr := testenv.FreeAddr(t)
	testenv.RunService(t, "apiserver", temporalAddr, map[string]string{"TEMPORAL_NAMESPACE": namespace,
		"LOCKERNET_API_ADDR": addr, "LOCKERNET_ADMIN_ADDR": "", "LOCKERNET_DEBUG_ADDR": ""}, run)
	return "http://" + addr
}

type answer struct {
	status     int
	retryAfter string
	body       map[string]any
}

// getEventually sends GET url once the port answers (run takes it first thing) and reads
// its JSON answer.
func getEventually(t *testing.T, url string) answer {
	t.Helper()
	resp := testenv.GetEventually(t, url)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &a.body); err != nil {
		t.Fatalf("GET %s: %d, body not JSON: %q", url, resp.StatusCode, b)
	}
	return a
}

// While the apiserver cannot reach Temporal it is not ready: /healthz and /readyz answer 503
// "starting" at once (not a connection that hangs), and an API request, after waiting
// startingWait for readiness, 503 + Retry-After in its surface's error body.
func TestNotReadyUntilTemporalIsReachable(t *testing.T) {
	startingWait = 200 * time.Millisecond
	base := startRun(t, testenv.FreeAddr(t), "default")
	for _, p := range []string{"/healthz", "/readyz"} {
		a := getEventually(t, base+p)
		if a.status != http.StatusServiceUnavailable || a.body["status"] != "starting" || a.retryAfter != "1" {
			t.Fatalf("%s while Temporal is unreachable: %d %v Retry-After %q", p, a.status, a.body, a.retryAfter)
		}
	}
	a := getEventually(t, base+"/v1/locations")
	if a.status != http.StatusServiceUnavailable || a.retryAfter != "1" || a.body["status"] != float64(503) || a.body["title"] == nil {
		t.Fatalf("tower API while starting: %d %v Retry-After %q", a.status, a.body, a.retryAfter)
	}
	a = getEventually(t, base+"/api/customer/v1/gateways")
	if a.status != http.StatusServiceUnavailable || a.body["error"] != "SERVICE_UNAVAILABLE" {
		t.Fatalf("gateway cloud API while starting: %d %v", a.status, a.body)
	}
	a = getEventually(t, base+"/oauth/token")
	if a.status != http.StatusServiceUnavailable || a.body["error"] != "server_error" {
		t.Fatalf("token endpoint while starting: %d %v", a.status, a.body)
	}
}

// Once migrations ran and Temporal answers, /healthz and /readyz answer 200.
func TestReadyOnceTemporalIsReachable(t *testing.T) {
	ts, _ := testenv.Temporal(t)
	base := startRun(t, ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := getEventually(t, base+"/healthz")
		if a.status == http.StatusOK {
			if a.body["status"] != "ok" {
				t.Fatalf("/healthz: %v", a.body)
			}
			break
		}
		if a.status != http.StatusServiceUnavailable || a.body["status"] != "starting" {
			t.Fatalf("/healthz while starting: %d %v", a.status, a.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz still 503 after 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := getEventually(t, base+"/readyz"); a.status != http.StatusOK || a.body["status"] != "ok" {
		t.Fatalf("/readyz once ready: %d %v", a.status, a.body)
	}
}
