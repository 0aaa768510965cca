package testenv

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockernet/lockernet/internal/config"
)

// RunService runs a service's run function as its main calls it (internal/process), on the
// settings config.Load reads from the environment: a fresh database, a master key, Temporal
// at temporalAddr and env on top (t.Setenv, so the test may not be parallel). The service
// stops when the test ends; the test fails if it has not stopped 30 s after its context ended.
func RunService(t *testing.T, name, temporalAddr string, env map[string]string,
	run func(context.Context, config.Config, *slog.Logger) error) {
	t.Helper()
	t.Setenv("DATABASE_URL", NewDatabase(t))
	t.Setenv("TEMPORAL_ADDRESS", temporalAddr)
	t.Setenv("LOCKERNET_MASTER_KEY", strings.Repeat("ab", 32))
	for k, v := range env {
		t.Setenv(k, v)
	}
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
			t.Errorf("%s did not stop within 30 s of its context ending", name)
		}
	})
}

// GetEventually sends GET url until a connection is taken (a service's port opens once its
// run has begun), for up to 10 s; the caller reads and closes the answer.
func GetEventually(t *testing.T, url string) *http.Response {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
