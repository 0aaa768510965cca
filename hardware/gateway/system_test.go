package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

func TestHealthAndSystem(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})

	h := decode[gateway.Health](t, call(t, gw, http.MethodGet, "/health", nil))
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, []gateway.ControllerHealth{{ID: "CTL-1", Online: true}}, h.Controllers)

	sys := decode[gateway.System](t, call(t, gw, http.MethodGet, "/system", nil))
	assert.Equal(t, "GW-0002", sys.GatewayID)
	assert.Equal(t, "test", sys.Version)
	assert.Regexp(t, timestampPattern, sys.Time)
	require.Len(t, sys.Controllers, 1)
	assert.Equal(t, 8, sys.Controllers[0].LockerCount)

	// A controller that does not answer makes the gateway degraded.
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerUnreachable})
	h = decode[gateway.Health](t, call(t, gw, http.MethodGet, "/health", nil))
	assert.Equal(t, "degraded", h.Status)
	assert.Equal(t, []gateway.ControllerHealth{{ID: "CTL-1", Online: false}}, h.Controllers)
	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/201", nil))
	assert.False(t, lk.Operational)
	assert.False(t, lk.Available)
	requireError(t, call(t, gw, http.MethodPost, "/transactions", nil), http.StatusNotFound, gateway.CodeNoAvailableLockers)

	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	assert.Equal(t, "ok", decode[gateway.Health](t, call(t, gw, http.MethodGet, "/health", nil)).Status)
	createTransaction(t, gw, nil)
}

func TestSystemLogs(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	for i := 0; i < 3; i++ {
		createTransaction(t, gw, nil)
	}

	r := call(t, gw, http.MethodGet, "/system/logs?limit=2", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "true", r.header.Get("X-Response-Truncated"))
	logs := decode[[]gateway.LogEntry](t, r)
	require.Len(t, logs, 2)
	assert.Equal(t, "transaction created", logs[0].Message, "newest first")
	assert.Equal(t, "info", logs[0].Level)
	assert.Regexp(t, timestampPattern, logs[0].Timestamp)
	assert.Contains(t, logs[0].Fields, "lockerId")

	r = call(t, gw, http.MethodGet, "/system/logs", nil)
	assert.Empty(t, r.header.Get("X-Response-Truncated"))
	assert.Len(t, decode[[]gateway.LogEntry](t, r), 4, "started + 3 creates")

	for _, q := range []string{"limit=0", "limit=abc", "limit=-3", "limit=1001", "limit=2.5"} {
		e := requireError(t, call(t, gw, http.MethodGet, "/system/logs?"+q, nil), http.StatusUnprocessableEntity, gateway.CodeValidation)
		assert.Equal(t, "limit", e.Details["field"])
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	body := map[string]any{"deviceId": "kiosk-1", "kind": "kiosk", "status": "ok", "timestamp": "2026-01-02T03:04:05+02:00"}
	r := call(t, gw, http.MethodPost, "/system/heartbeat", body)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	assert.Empty(t, r.body)
	require.Equal(t, http.StatusNoContent, call(t, gw, http.MethodPost, "/system/heartbeat", body).status)
	body["status"] = "door-sensor-stuck"
	require.Equal(t, http.StatusNoContent, call(t, gw, http.MethodPost, "/system/heartbeat", body).status)

	logs := decode[[]gateway.LogEntry](t, call(t, gw, http.MethodGet, "/system/logs?limit=2", nil))
	require.Len(t, logs, 2)
	assert.Equal(t, "device status changed", logs[0].Message, "only changes are logged")
	assert.Equal(t, "device first seen", logs[1].Message)

	bad := []struct {
		name   string
		body   []byte
		status int
		field  string
	}{
		{"no device id", []byte(`{"kind": "kiosk"}`), 422, "deviceId"},
		{"numeric device id", []byte(`{"deviceId": 7}`), 422, "deviceId"},
		{"bad timestamp", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": "yesterday"}`), 422, "timestamp"},
		{"timestamp without offset", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": "2026-01-02T03:04:05"}`), 422, "timestamp"},
		{"long status", []byte(`{"deviceId": "d", "kind": "k", "status": "` + strings.Repeat("s", 65) + `"}`), 422, "status"},
		{"kind absent", []byte(`{"deviceId": "d", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "kind"},
		{"kind null", []byte(`{"deviceId": "d", "kind": null, "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "kind"},
		{"kind empty", []byte(`{"deviceId": "d", "kind": " ", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "kind"},
		{"status absent", []byte(`{"deviceId": "d", "kind": "k", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "status"},
		{"status null", []byte(`{"deviceId": "d", "kind": "k", "status": null, "timestamp": "2026-01-02T03:04:05Z"}`), 422, "status"},
		{"status empty", []byte(`{"deviceId": "d", "kind": "k", "status": "", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "status"},
		{"timestamp absent", []byte(`{"deviceId": "d", "kind": "k", "status": "ok"}`), 422, "timestamp"},
		{"timestamp null", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": null}`), 422, "timestamp"},
		{"timestamp empty", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": ""}`), 422, "timestamp"},
		{"empty body", nil, 400, ""},
		{"NUL in kind", []byte(`{"deviceId": "d", "kind": "k\u0000", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "kind"},
		{"NUL in device id", []byte(`{"deviceId": "\u0000", "kind": "k", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "deviceId"},
		{"NUL in status", []byte(`{"deviceId": "d", "kind": "k", "status": "ok\u0000", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "status"},
		{"escape in status", []byte(`{"deviceId": "d", "kind": "k", "status": "\u001b[31mok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "status"},
		{"line break in device id", []byte(`{"deviceId": "d\nfake log line", "kind": "k", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "deviceId"},
		{"C1 control in kind", []byte(`{"deviceId": "d", "kind": "k\u0085", "status": "ok", "timestamp": "2026-01-02T03:04:05Z"}`), 422, "kind"},
		{"NUL in timestamp", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": "2026-01-02T03:04:05Z\u0000"}`), 422, "timestamp"},
		{"NUL in an unknown field", []byte(`{"deviceId": "d", "kind": "k", "status": "ok", "timestamp": "2026-01-02T03:04:05Z", "extra": {"x": ["\u0000"]}}`), 422, "extra.x[0]"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code := gateway.CodeValidation
			if tc.status == 400 {
				code = gateway.CodeInvalidJSON
			}
			e := requireError(t, call(t, gw, http.MethodPost, "/system/heartbeat", tc.body), tc.status, code)
			if tc.field != "" {
				assert.Equal(t, tc.field, e.Details["field"])
			}
		})
	}
}

// TestAuth checks every operation without and with a wrong secret.
func TestAuth(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	tx := createTransaction(t, gw, map[string]any{"transactionId": "auth-tx"})

	ops := []struct{ method, path string }{
		{http.MethodGet, "/health"},
		{http.MethodGet, "/transactions"},
		{http.MethodPost, "/transactions"},
		{http.MethodGet, "/transactions/" + tx.TransactionID},
		{http.MethodDelete, "/transactions/" + tx.TransactionID},
		{http.MethodPost, "/transactions/" + tx.TransactionID + "/open"},
		{http.MethodGet, "/lockers"},
		{http.MethodGet, "/lockers/config"},
		{http.MethodGet, "/lockers/101"},
		{http.MethodPatch, "/lockers/101"},
		{http.MethodPost, "/lockers/101/open"},
		{http.MethodPost, "/lockers/open-all"},
		{http.MethodGet, "/locker-types"},
		{http.MethodGet, "/locker-types/1"},
		{http.MethodGet, "/bank-types"},
		{http.MethodGet, "/bank-types/1"},
		{http.MethodPost, "/system/heartbeat"},
		{http.MethodGet, "/system"},
		{http.MethodGet, "/system/logs"},
		{http.MethodGet, "/metrics"},
		{http.MethodGet, "/no-such-route"},
		{http.MethodPut, "/lockers/101"},
	}
	for _, op := range ops {
		for _, secret := range []string{"", "wrong-secret", gw.Secret + "x"} {
			r := callWithSecret(t, gw, secret, op.method, op.path, map[string]any{"outOfService": true, "deviceId": "d"})
			requireError(t, r, http.StatusUnauthorized, gateway.CodeAuthFailed)
			assert.Equal(t, `Bearer realm="gateway"`, r.header.Get("WWW-Authenticate"))
		}
	}
	// The admin page answers a JSON client like the API.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	requireError(t, send(t, req), http.StatusUnauthorized, gateway.CodeAuthFailed)

	// Nothing happened.
	assert.Equal(t, 0, gw.Sim.OpenAttempts())
	assert.Len(t, decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil)), 1)

	// A lower-case scheme is still a bearer.
	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+"/health", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+gw.Secret)
	assert.Equal(t, http.StatusOK, send(t, req).status)

	// Probes need no secret.
	for _, path := range []string{"/healthz", "/readyz"} {
		r := callWithSecret(t, gw, "", http.MethodGet, path, nil)
		assert.Equal(t, http.StatusOK, r.status, path)
		assert.Equal(t, "ok", decode[map[string]string](t, r)["status"])
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	requireError(t, call(t, gw, http.MethodGet, "/nope", nil), http.StatusNotFound, gateway.CodeNotFound)

	// The request id is echoed (or made up) for correlation with the logs.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+"/healthz", nil)
	require.NoError(t, err)
	req.Header.Set("X-Request-Id", "req-42")
	assert.Equal(t, "req-42", send(t, req).header.Get("X-Request-Id"))
	assert.Len(t, callWithSecret(t, gw, "", http.MethodGet, "/readyz", nil).header.Get("X-Request-Id"), 36)
	requireError(t, call(t, gw, http.MethodPut, "/lockers/101", nil), http.StatusMethodNotAllowed, gateway.CodeMethodNotAllowed)
	requireError(t, call(t, gw, http.MethodDelete, "/lockers", nil), http.StatusMethodNotAllowed, gateway.CodeMethodNotAllowed)
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	big := []byte(`{"transactionId": "x", "pad": "` + strings.Repeat("a", 65<<10) + `"}`)

	for _, path := range []string{"/transactions", "/system/heartbeat", "/lockers/101/open"} {
		requireError(t, call(t, gw, http.MethodPost, path, big), http.StatusRequestEntityTooLarge, gateway.CodePayloadTooLarge)
	}
	requireError(t, call(t, gw, http.MethodPatch, "/lockers/101", big), http.StatusRequestEntityTooLarge, gateway.CodePayloadTooLarge)

	// Without a Content-Length (chunked), the limit holds while reading.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL+"/transactions", io.MultiReader(bytes.NewReader(big)))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+gw.Secret)
	requireError(t, send(t, req), http.StatusRequestEntityTooLarge, gateway.CodePayloadTooLarge)

	assert.Equal(t, 0, gw.Sim.OpenAttempts())
	assert.Empty(t, decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil)))

	// Just under the limit is fine.
	ok := []byte(`{"pad": "` + strings.Repeat("a", 60<<10) + `"}`)
	assert.Equal(t, http.StatusCreated, call(t, gw, http.MethodPost, "/transactions", ok).status)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	require.Equal(t, http.StatusOK, call(t, gw, http.MethodPost, "/lockers/101/open", nil).status)
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeHardwareFault})
	require.Equal(t, http.StatusInternalServerError, call(t, gw, http.MethodPost, "/lockers/102/open", nil).status)

	r := call(t, gw, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusOK, r.status)
	text := string(r.body)
	assert.Contains(t, text, `gateway_http_request_duration_seconds_count{method="POST",route="/lockers/{lockerId}/open",status="200"} 1`)
	assert.Contains(t, text, `gateway_door_opens_total{outcome="opened"} 1`)
	assert.Contains(t, text, `gateway_door_opens_total{outcome="hardware_fault"} 1`)
	assert.Contains(t, text, `gateway_door_open_attempts_total{result="ok"} 1`)
	assert.Contains(t, text, `gateway_door_open_attempts_total{result="hardware_fault"} 1`)
	assert.NotContains(t, text, gw.Secret)
}
