package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows/contract"
)

type upDB struct{}

func (upDB) Ping(context.Context) error { return nil }

// The worker's /metrics carries the Temporal SDK's metrics and the workflow outcome counter
// once a workflow has run on a worker made from the instrumented client.
func TestWorkerMetricsServeTemporalSDKMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an embedded Temporal server")
	}
	ts, _ := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	reg := prometheus.NewRegistry()
	m, err := worker.NewMetrics(reg, logger)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	tc, err := temporalclient.DialWith(ctx, ts.GetFrontendHostPort(), ts.GetDefaultNamespace(), logger, m.ClientOptions())
	require.NoError(t, err)
	t.Cleanup(tc.Close)

	const queue = "metrics-test"
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx, tc, queue, nil, worker.Options{}) }()
	t.Cleanup(func() { stop(); <-done })

	// A reservation cancelled before its expiry finishes without any activity.
	id := uuid.NewString()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: contract.ReservationWorkflowID(id), TaskQueue: queue},
		contract.ReservationWorkflowName, contract.ReservationInput{ReservationID: id, ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, tc.SignalWorkflow(ctx, run.GetID(), "", contract.SignalReservationEnded, contract.OutcomeCancelled))
	var state contract.ReservationState
	require.NoError(t, run.Get(ctx, &state))
	require.Equal(t, contract.OutcomeCancelled, state.Outcome)

	srv := httptest.NewServer(worker.HealthHandler(upDB{}, tc, reg))
	t.Cleanup(srv.Close)
	var body string
	// The SDK records the completion right after it reports the workflow task; give it a moment.
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return regexp.MustCompile(`(?m)^temporal_workflow_completed_total\{[^}]*workflow_type="Reservation"[^}]*\} 1$`).MatchString(body)
	}, 10*time.Second, 100*time.Millisecond, "no temporal_workflow_completed_total for the Reservation workflow")

	for name, re := range map[string]string{
		"workflow outcome":      `(?m)^lockernet_workflow_outcomes_total\{[^}]*outcome="cancelled"[^}]*workflow_type="Reservation"[^}]*\} 1$`,
		"gRPC requests":         `(?m)^temporal_request_total\{[^}]*operation="StartWorkflowExecution"[^}]*\} 1$`,
		"workflow task latency": `(?m)^temporal_workflow_task_execution_latency_seconds_bucket\{[^}]*workflow_type="Reservation"`,
		"end-to-end latency":    `(?m)^temporal_workflow_endtoend_latency_seconds_count\{[^}]*workflow_type="Reservation"[^}]*\} 1$`,
	} {
		assert.Regexp(t, re, body, name)
	}
}

type downDB struct{}

func (downDB) Ping(context.Context) error {
	return errors.New(`failed to connect to host=db-primary.internal user=lockernet database=lockernet_prod`)
}

// /readyz answers status only: which dependency is down, never the error that names hosts
// and databases.
func TestWorkerReadyzIsStatusOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an embedded Temporal server")
	}
	ts, _ := testenv.Temporal(t)
	ctx := context.Background()
	tc, err := temporalclient.DialWith(ctx, ts.GetFrontendHostPort(), ts.GetDefaultNamespace(),
		slog.New(slog.NewTextHandler(io.Discard, nil)), client.Options{})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	srv := httptest.NewServer(worker.HealthHandler(downDB{}, tc, prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.JSONEq(t, `{"status":"unavailable","checks":{"postgres":"unavailable","temporal":"ok"}}`, string(body))
}
