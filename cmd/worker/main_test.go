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

// While the worker cannot reach Temporal, its health port answers 503 "starting" at once
// rather than holding the probe in the listen queue.
func TestWorkerNotReadyUntilTemporalIsReachable(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.NewDatabase(t))
	t.Setenv("TEMPORAL_ADDRESS", testenv.FreeAddr(t))
	t.Setenv("LOCKERNET_MASTER_KEY", strings.Repeat("ab", 32))
	addr := testenv.FreeAddr(t)
	t.Setenv("LOCKERNET_WORKER_ADDR", addr)
	t.Setenv("LOCKERNET_DEBUG_ADDR", "")
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop within 30 s of its context ending")
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		var resp *http.Response
		deadline := time.Now().Add(10 * time.Second)
		for resp, err = hc.Get("http://" + addr + p); err != nil; resp, err = hc.Get("http://" + addr + p) {
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", p, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var body map[string]any
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &body) != nil || body["status"] != "starting" {
			t.Fatalf("%s while Temporal is unreachable: %d %s", p, resp.StatusCode, b)
		}
	}
}
