package process

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/internal/config"
)

// quietEnv keeps the service's settings valid and its tracing off.
func quietEnv(t *testing.T) {
	t.Setenv("LOCKERNET_LOG_LEVEL", "error")
	t.Setenv("OTEL_SDK_DISABLED", "true")
}

func TestStartRunsUntilTheContextEnds(t *testing.T) {
	quietEnv(t)
	t.Setenv("LOCKERNET_ENVIRONMENT", "sandbox")
	ctx, cancel := context.WithCancel(context.Background())
	var got config.Config
	done := make(chan int, 1)
	go func() {
		done <- Start(ctx, "svc", func(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
			got = cfg
			assert.NotNil(t, logger)
			<-ctx.Done()
			return nil
		}, &bytes.Buffer{})
	}()
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, ExitOK, code)
		assert.Equal(t, "sandbox", got.Environment, "run gets the settings of the environment")
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}

func TestStartExitCodes(t *testing.T) {
	ran := func(called *bool, err error) Run {
		return func(context.Context, config.Config, *slog.Logger) error { *called = true; return err }
	}
	t.Run("run fails", func(t *testing.T) {
		quietEnv(t)
		var called bool
		assert.Equal(t, ExitFailed, Start(context.Background(), "svc", ran(&called, errors.New("boom")), &bytes.Buffer{}))
		assert.True(t, called)
	})
	t.Run("bad setting", func(t *testing.T) {
		quietEnv(t)
		t.Setenv("LOCKERNET_ENVIRONMENT", "Not Valid")
		var called bool
		var stderr bytes.Buffer
		assert.Equal(t, ExitSetting, Start(context.Background(), "svc", ran(&called, nil), &stderr))
		assert.False(t, called, "run does not start on a settings error")
		assert.Contains(t, stderr.String(), "svc: ")
		assert.Contains(t, stderr.String(), "LOCKERNET_ENVIRONMENT")
	})
	t.Run("bad tracing setting", func(t *testing.T) {
		quietEnv(t)
		t.Setenv("OTEL_SDK_DISABLED", "")
		t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
		var called bool
		assert.Equal(t, ExitSetting, Start(context.Background(), "svc", ran(&called, nil), &bytes.Buffer{}))
		assert.False(t, called, "run does not start when tracing cannot be set up")
	})
}

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"starting"}`)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name, url  string
		want       int
		wantStderr string
	}{
		{"ready", srv.URL + "/readyz", 0, ""},
		{"not ready", srv.URL + "/starting", 1, `503 Service Unavailable {"status":"starting"}`},
		{"nothing listening", closed.URL + "/readyz", 1, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, tt.want, Probe(tt.url, &stderr))
			if tt.wantStderr == "" {
				assert.Empty(t, stderr.String())
			} else {
				assert.Contains(t, stderr.String(), tt.wantStderr)
			}
		})
	}
}
