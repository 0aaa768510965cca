package gateway_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// TestOpenRetryPolicy drives the open policy (scaled to milliseconds) through
// every controller behaviour. It asserts attempts and outcomes, never time.
func TestOpenRetryPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		faults       simctl.Faults
		wantStatus   int
		wantCode     string
		wantAttempts int
		wantOpens    int
	}{
		{name: "healthy", faults: simctl.Faults{Mode: simctl.ModeNone},
			wantStatus: 200, wantAttempts: 1, wantOpens: 1},
		{name: "flaky once succeeds on attempt 2", faults: simctl.Faults{Mode: simctl.ModeFlaky, Failures: 1},
			wantStatus: 200, wantAttempts: 2, wantOpens: 1},
		{name: "flaky twice succeeds on attempt 3", faults: simctl.Faults{Mode: simctl.ModeFlaky, Failures: 2},
			wantStatus: 200, wantAttempts: 3, wantOpens: 1},
		{name: "flaky thrice gives up", faults: simctl.Faults{Mode: simctl.ModeFlaky, Failures: 3},
			wantStatus: 503, wantCode: gateway.CodeControllerUnavailable, wantAttempts: 3},
		{name: "hardware fault is not retried", faults: simctl.Faults{Mode: simctl.ModeHardwareFault},
			wantStatus: 500, wantCode: gateway.CodeHardwareFault, wantAttempts: 1},
		{name: "unreachable controller", faults: simctl.Faults{Mode: simctl.ModeControllerUnreachable},
			wantStatus: 503, wantCode: gateway.CodeControllerUnavailable, wantAttempts: 3},
		{name: "hanging controller times out per attempt", faults: simctl.Faults{Mode: simctl.ModeControllerHang},
			wantStatus: 503, wantCode: gateway.CodeControllerUnavailable, wantAttempts: 3},
		{name: "controller slower than an attempt", faults: simctl.Faults{Mode: simctl.ModeControllerSlow, DelayMs: 60_000},
			wantStatus: 503, wantCode: gateway.CodeControllerUnavailable, wantAttempts: 3},
	}
	for _, tc := range tests {
		for _, via := range []string{"maintenance", "transaction"} {
			t.Run(tc.name+" via "+via, func(t *testing.T) {
				t.Parallel()
				gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
				path := "/lockers/205/open"
				lockerID := 205
				if via == "transaction" {
					tx := createTransaction(t, gw, map[string]any{"transactionId": "tx-open"})
					lockerID = tx.LockerID
					path = "/transactions/tx-open/open"
				}
				gw.SetFaults(t, tc.faults)

				r := call(t, gw, http.MethodPost, path, nil)
				if tc.wantCode == "" {
					require.Equal(t, tc.wantStatus, r.status, "body: %s", r.body)
					op := decode[gateway.LockerOperationResponse](t, r)
					assert.True(t, op.Success)
					assert.True(t, op.DoorOpen)
				} else {
					e := requireError(t, r, tc.wantStatus, tc.wantCode)
					assert.EqualValues(t, lockerID, e.Details["lockerId"])
					assert.EqualValues(t, tc.wantAttempts, e.Details["attempts"])
				}
				assert.Equal(t, tc.wantAttempts, gw.Sim.OpenAttempts(), "open commands sent to the controller")
				assert.Equal(t, tc.wantOpens, gw.Sim.Opens(lockerID), "real actuations")
				total := 0
				for _, n := range gw.Sim.Stats().Opens {
					total += n
				}
				assert.Equal(t, tc.wantOpens, total, "no other door moved")
			})
		}
	}
}

func setFaultsHTTP(t *testing.T, gw *gatewaytest.Gateway, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.SimURL+"/sim/faults", stringsReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, send(t, req).status, "set faults %s", body)
}

func simStats(t *testing.T, gw *gatewaytest.Gateway) simctl.Stats {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.SimURL+"/sim/stats", nil)
	require.NoError(t, err)
	return decode[simctl.Stats](t, send(t, req))
}

// TestSimFaultModes drives each §9 mode through the simulator's HTTP control
// API and observes what a cloud client would.
func TestSimFaultModes(t *testing.T) {
	t.Parallel()

	t.Run("unreachable refuses connections until none", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		// Keep a connection alive first: it must be cut too.
		client := &http.Client{Transport: &http.Transport{}}
		t.Cleanup(client.CloseIdleConnections)
		get := func() (*http.Response, error) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+"/lockers/101", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+gw.Secret)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return resp, err
		}
		_, err := get()
		require.NoError(t, err)

		setFaultsHTTP(t, gw, `{"mode": "unreachable"}`)
		// The kept-alive connection is reset; whether the client sees that or
		// redials and is refused depends on timing, and both are "not delivered".
		_, err = get()
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF),
			"want refused or reset, got %v", err)
		for i := 0; i < 3; i++ {
			_, err = get()
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		}
		_, err = net.Dial("tcp", gw.URL[len("http://"):])
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		// The simulator control stays reachable.
		st := simStats(t, gw)
		assert.Zero(t, st.Requests-1, "refused requests are not received")

		setFaultsHTTP(t, gw, `{"mode": "none"}`)
		require.Eventually(t, func() bool { _, err := get(); return err == nil }, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("hang never answers", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		setFaultsHTTP(t, gw, `{"mode": "hang"}`)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, _, err := gw.Do(ctx, http.MethodPost, "/lockers/101/open", nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 0, gw.Sim.OpenAttempts(), "the request never reached the hardware")
		assert.EqualValues(t, 1, simStats(t, gw).Requests, "but it was received")

		// Probes still answer.
		assert.Equal(t, http.StatusOK, callWithSecret(t, gw, "", http.MethodGet, "/healthz", nil).status)

		setFaultsHTTP(t, gw, `{"mode": "none"}`)
		assert.Equal(t, http.StatusOK, call(t, gw, http.MethodGet, "/health", nil).status)
	})

	t.Run("http_500 answers INTERNAL_ERROR", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		setFaultsHTTP(t, gw, `{"mode": "http_500"}`)
		for _, op := range []struct{ method, path string }{
			{http.MethodGet, "/health"}, {http.MethodPost, "/transactions"}, {http.MethodPost, "/lockers/101/open"},
		} {
			requireError(t, call(t, gw, op.method, op.path, nil), http.StatusInternalServerError, gateway.CodeInternal)
		}
		assert.Equal(t, 0, gw.Sim.OpenAttempts())
		assert.Equal(t, http.StatusOK, callWithSecret(t, gw, "", http.MethodGet, "/readyz", nil).status)
		setFaultsHTTP(t, gw, `{"mode": "none"}`)
		assert.Empty(t, decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil)),
			"nothing was created while failing")
	})

	t.Run("hardware_fault fails opens only", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		setFaultsHTTP(t, gw, `{"mode": "hardware_fault"}`)
		tx := createTransaction(t, gw, nil)
		e := requireError(t, call(t, gw, http.MethodPost, "/transactions/"+tx.TransactionID+"/open", nil),
			http.StatusInternalServerError, gateway.CodeHardwareFault)
		assert.EqualValues(t, tx.LockerID, e.Details["lockerId"])
		assert.Equal(t, 0, simStats(t, gw).Opens[itoa(tx.LockerID)])
		assert.Equal(t, 1, gw.Sim.OpenAttempts())
	})

	t.Run("slow delays then answers", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		setFaultsHTTP(t, gw, `{"mode": "slow", "delayMs": 5000}`)
		// A client that waits less than the delay gets nothing...
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, _, err := gw.Do(ctx, http.MethodGet, "/health", nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// ...one that waits gets the normal answer.
		setFaultsHTTP(t, gw, `{"mode": "slow", "delayMs": 1}`)
		assert.Equal(t, http.StatusCreated, call(t, gw, http.MethodPost, "/transactions", nil).status)
	})

	t.Run("bad mode is 400", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		for _, body := range []string{`{"mode": "melt"}`, `{"mode": "slow", "delayMs": -5}`, `{"mode": `} {
			resp, err := http.Post(gw.SimURL+"/sim/faults", "application/json", stringsReader(body))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		}
		assert.Equal(t, simctl.ModeNone, gw.Sim.Faults().Mode)
	})

	t.Run("close a door by hand", func(t *testing.T) {
		t.Parallel()
		gw := gatewaytest.Start(t, gatewaytest.Options{})
		require.Equal(t, http.StatusOK, call(t, gw, http.MethodPost, "/lockers/111/open", nil).status)
		resp, err := http.Post(gw.SimURL+"/sim/lockers/111/close", "application/json", stringsReader(`{"itemInside": true}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/111", nil)).DoorOpen)
		assert.Equal(t, 1, simStats(t, gw).Opens["111"])
	})
}
