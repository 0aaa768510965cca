package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// requireProxiedError requires r proxied to g and ending in state, answered with the cloud
// error of status and code; it returns the error's body.
func requireProxiedError(t *testing.T, r testenv.Response, g *testenv.Gateway, state string, status int, code string) map[string]any {
	t.Helper()
	requireProxied(t, r, g, state)
	return requireCloudError(t, r, status, code)
}

// Every fault mode of the simulator (DESIGN §9) ends in the terminal state and status of
// DESIGN §6.2, with the gateway's status and error in details.
func TestCloudFaultModes(t *testing.T) {
	t.Parallel()
	e, gw1, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	wait := []string{"Prefer", "wait=30"}

	t.Run("none: completed", func(t *testing.T) {
		setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeNone})
		r := c.do(http.MethodGet, locPath(gw1, "/lockers"), nil, wait...)
		requireProxied(t, r, gw1, "completed")
		assert.Equal(t, http.StatusOK, r.Status)
	})

	t.Run("unreachable: dispatch_failed 503 after the dispatch budget", func(t *testing.T) {
		faultUntilEnd(t, gw2, simctl.Faults{Mode: simctl.ModeUnreachable})
		for _, call := range []struct{ method, path string }{
			{http.MethodGet, "/lockers"}, {http.MethodPost, "/lockers/204/open"}, {http.MethodPost, "/transactions"},
		} {
			r := c.do(call.method, locPath(gw2, call.path), nil, wait...)
			m := requireProxiedError(t, r, gw2, "dispatch_failed", http.StatusServiceUnavailable, "DISPATCH_FAILED")
			assert.Equal(t, r.Header.Get("X-Request-Id"), m["requestId"])
			details := m["details"].(map[string]any)
			assert.Nil(t, details["gatewayStatus"], "nothing answered")
			assert.NotEmpty(t, details["error"])
			assert.NotContains(t, string(r.Body), "127.0.0.1", "a fixed cause, never the gateway's internal address")
			assert.NotContains(t, string(r.Body), "dial tcp")
			assert.Equal(t, float64(3), details["attempts"], "three deliveries tried")
		}
		assert.Zero(t, simStats(t, gw2).Opens["204"])
	})

	t.Run("hang: gateway_unresponsive 504", func(t *testing.T) {
		faultUntilEnd(t, gw1, simctl.Faults{Mode: simctl.ModeHang})
		before := simStats(t, gw1).Requests

		// A read is re-sent once after no answer.
		r := c.do(http.MethodGet, locPath(gw1, "/lockers"), nil, wait...)
		m := requireProxiedError(t, r, gw1, "gateway_unresponsive", http.StatusGatewayTimeout, "GATEWAY_UNRESPONSIVE")
		assert.Equal(t, float64(2), m["details"].(map[string]any)["attempts"])
		assert.NotContains(t, string(r.Body), "127.0.0.1", "a fixed cause, never the gateway's internal address")
		assert.Equal(t, before+2, simStats(t, gw1).Requests)

		// A hardware call is never re-sent once delivered.
		r = c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, wait...)
		m = requireCloudError(t, r, http.StatusGatewayTimeout, "GATEWAY_UNRESPONSIVE")
		details := m["details"].(map[string]any)
		assert.Equal(t, float64(1), details["attempts"])
		assert.Equal(t, float64(5), details["timeoutSeconds"], "the scaled hardware deadline")
		assert.Equal(t, before+3, simStats(t, gw1).Requests)

		// Neither is a release (it would answer 404 the second time).
		r = c.do(http.MethodDelete, locPath(gw1, "/transactions/abc"), nil, wait...)
		requireCloudError(t, r, http.StatusGatewayTimeout, "GATEWAY_UNRESPONSIVE")
		assert.Equal(t, before+4, simStats(t, gw1).Requests)
	})

	t.Run("http_500: rejected 502", func(t *testing.T) {
		faultUntilEnd(t, gw2, simctl.Faults{Mode: simctl.ModeHTTP500})
		before := simStats(t, gw2).Requests

		r := c.do(http.MethodGet, locPath(gw2, "/lockers/config"), nil, wait...)
		m := requireProxiedError(t, r, gw2, "rejected", http.StatusBadGateway, "GATEWAY_REJECTED")
		details := m["details"].(map[string]any)
		assert.Equal(t, float64(500), details["gatewayStatus"])
		assert.Equal(t, "INTERNAL_ERROR", details["gatewayError"])
		assert.Equal(t, before+2, simStats(t, gw2).Requests, "a read is re-sent once")

		r = c.do(http.MethodPatch, locPath(gw2, "/lockers/202"), map[string]any{"outOfService": true}, wait...)
		requireCloudError(t, r, http.StatusBadGateway, "GATEWAY_REJECTED")
		assert.Equal(t, before+3, simStats(t, gw2).Requests, "a write is not")

		r = c.do(http.MethodPost, locPath(gw2, "/lockers/202/open"), nil, wait...)
		requireCloudError(t, r, http.StatusBadGateway, "GATEWAY_REJECTED")
		assert.Equal(t, before+4, simStats(t, gw2).Requests)
		assert.Zero(t, simStats(t, gw2).Opens["202"])
	})

	t.Run("hardware_fault: rejected 502 for door opens, reads still complete", func(t *testing.T) {
		faultUntilEnd(t, gw1, simctl.Faults{Mode: simctl.ModeHardwareFault})

		r := c.do(http.MethodPost, locPath(gw1, "/lockers/105/open"), nil, wait...)
		m := requireProxiedError(t, r, gw1, "rejected", http.StatusBadGateway, "GATEWAY_REJECTED")
		details := m["details"].(map[string]any)
		assert.Equal(t, float64(500), details["gatewayStatus"])
		assert.Equal(t, "HARDWARE_FAULT", details["gatewayError"])
		assert.Equal(t, float64(1), details["attempts"], "never re-sent")

		r = c.do(http.MethodGet, locPath(gw1, "/lockers/105"), nil, wait...)
		requireProxied(t, r, gw1, "completed")
		assert.Equal(t, http.StatusOK, r.Status)
	})

	t.Run("slow: 202 within a short wait, then completed", func(t *testing.T) {
		faultUntilEnd(t, gw2, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 500})

		r := c.do(http.MethodPost, locPath(gw2, "/lockers/206/open"), nil, "Prefer", "wait=0")
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		id := r.Header.Get("X-Request-Id")
		final := c.poll(id)
		requireProxied(t, final, gw2, "completed")
		assert.Equal(t, http.StatusOK, final.Status)
		assert.Equal(t, true, final.Map(t)["doorOpen"])
		assert.Equal(t, 1, simStats(t, gw2).Opens["206"])

		// Within the wait it is simply the gateway's answer.
		r = c.do(http.MethodGet, locPath(gw2, "/bank-types"), nil, wait...)
		requireProxied(t, r, gw2, "completed")
		assert.Equal(t, http.StatusOK, r.Status)
	})
}
