package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
)

// TestOpenOnKerongBoard drives a gateway's bank through the Kerong driver over a
// pseudo-terminal to an emulated CU16 board, and checks that every bus fault gets
// the gateway's existing answer: a jammed lock 500 HARDWARE_FAULT after one pulse
// (never retried), a dead bus 503 CONTROLLER_UNAVAILABLE, a lost or damaged answer
// never a second pulse.
func TestOpenOnKerongBoard(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	pt, err := emu.ServePTY()
	require.NoError(t, err)

	layout, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	ctlURL := "kerong+serial://" + pt.Path + "?board=1&timeout=100ms&opentimeout=300ms&rereads=1"
	layout.Banks[0].Controller = gateway.ControllerSpec{ID: "CTL-1", Kind: kerong.Kind, Address: ctlURL}
	buses := kerong.NewBuses()
	t.Cleanup(buses.Close)
	ctl, err := buses.Controller("CTL-1", ctlURL)
	require.NoError(t, err)
	const secret = "kerong-test-secret"
	srv, err := gateway.New(t.Context(), gateway.Config{
		GatewayID: "GW-0002", Secret: secret, DBPath: filepath.Join(t.TempDir(), "gw.db"), Layout: layout,
		Open:          gateway.OpenPolicy{AttemptTimeout: 3 * time.Second, Attempts: 3, RetryDelay: 20 * time.Millisecond},
		SensorTimeout: 2 * time.Second, Version: "test", Logger: slog.New(slog.DiscardHandler),
	}, ctl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	do := func(method, path string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), method, hs.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}

	tests := []struct {
		name   string
		fault  kerongemu.Fault
		status int
		code   string // the Error body's code, for a failure
		pulses int
	}{
		{"no fault", kerongemu.Fault{}, http.StatusOK, "", 1},
		{"jammed lock", kerongemu.Fault{Kind: kerongemu.FaultJammed}, http.StatusInternalServerError, "HARDWARE_FAULT", 1},
		{"absent board", kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}, http.StatusServiceUnavailable, "CONTROLLER_UNAVAILABLE", 0},
		{"answer lost once", kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 1}, http.StatusOK, "", 1},
		// Every answer damaged: the unlock pulsed once, and the retries read the door
		// back (which fails) instead of pulsing again.
		{"every answer corrupt", kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum}, http.StatusServiceUnavailable, "CONTROLLER_UNAVAILABLE", 1},
		{"partial answers", kerongemu.Fault{Kind: kerongemu.FaultPartialFrame}, http.StatusServiceUnavailable, "CONTROLLER_UNAVAILABLE", 1},
		// The unlock was garbled on the way in: read back closed, retried, opened.
		{"unlock lost once", kerongemu.Fault{Kind: kerongemu.FaultDropUnlock, Count: 1}, http.StatusOK, "", 1},
		{"noise on the bus", kerongemu.Fault{Kind: kerongemu.FaultNoise}, http.StatusOK, "", 1},
	}
	for i, tc := range tests {
		lockerID, lock := 201+i, i+1
		require.NoError(t, emu.SetFault(1, tc.fault))
		status, body := do(http.MethodPost, "/lockers/"+strconv.Itoa(lockerID)+"/open")
		require.NoError(t, emu.SetFault(1, kerongemu.Fault{}))
		assert.Equal(t, tc.status, status, "%s: %s", tc.name, body)
		if tc.code == "" {
			assert.Contains(t, string(body), `"doorOpen":true`, tc.name)
		} else {
			var e gateway.ErrorBody
			require.NoError(t, json.Unmarshal(body, &e), tc.name)
			assert.Equal(t, tc.code, e.Error, tc.name)
			assert.EqualValues(t, lockerID, e.Details["lockerId"], tc.name)
		}
		assert.Equal(t, tc.pulses, emu.Pulses(1, lock), "%s: pulses", tc.name)
	}

	// The doors as the board reports them, and the controller as /system names it.
	status, body := do(http.MethodGet, "/lockers/201")
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Contains(t, string(body), `"doorOpen":true`)
	status, body = do(http.MethodGet, "/system")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var sys gateway.System
	require.NoError(t, json.Unmarshal(body, &sys))
	require.Len(t, sys.Controllers, 1)
	assert.Equal(t, kerong.Kind, sys.Controllers[0].Kind)
	assert.Equal(t, ctlURL, sys.Controllers[0].Address)
	assert.True(t, sys.Controllers[0].Online)
}
