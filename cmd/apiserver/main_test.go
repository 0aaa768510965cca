package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// startRun runs the apiserver as main does, on fresh ports, and stops it when the test ends.
func startRun(t *testing.T, temporalAddr, namespace string) string {
	t.Helper()
	t.Setenv("DATABASE_URL", testenv.NewDatabase(t))
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("TEMPORAL_NAMESPACE", namespace)
	t.Setenv("LOCKERNET_MASTER_KEY", strings.Repeat("ab", 32))
	addr := testenv.FreeAddr(t)
	t.Setenv("LOCKERNET_API_ADDR", addr)
	t.Setenv("LOCKERNET_ADMIN_ADDR", "")
	t.Setenv("LOCKERNET_DEBUG_ADDR", "")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("apiserver did not stop within 30 s of its context ending")
		}
	})
	return "http://" + addr
}

type answer struct {
	status     int
	retryAfter string
	body       map[string]any
}

func get(t *testing.T, url string) (answer, error) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &a.body); err != nil {
		t.Fatalf("GET %s: %d, body not JSON: %q", url, resp.StatusCode, b)
	}
	return a, nil
}

// getEventually retries until the port answers (run takes it first thing).
func getEventually(t *testing.T, url string) answer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := get(t, url)
		if err == nil {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
