package kerongemu_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

func TestControl(t *testing.T) {
	t.Parallel()
	emu, pt := emutest.ServePTY(t, kerongemu.Config{Boards: []int{1, 2}})
	bs := emutest.Buses(t)
	ctl1, err := bs.Controller("CTL-1", "kerong+serial://"+pt.Path+"?board=1&timeout=100ms&opentimeout=300ms")
	require.NoError(t, err)
	ctl2, err := bs.Controller("CTL-2", "kerong+serial://"+pt.Path+"?board=2&timeout=100ms&opentimeout=300ms")
	require.NoError(t, err)

	local := simctl.New(simctl.Config{}, nil)
	t.Cleanup(local.Close)
	c := &kerongemu.Control{Local: local,
		Controllers: map[string][]kerongemu.Board{"CTL-1": {{Bus: emu, Address: 1}}, "CTL-2": {{Bus: emu, Address: 2}}},
		Lockers: map[int]kerongemu.Place{
			101: {Board: kerongemu.Board{Bus: emu, Address: 1}, Lock: 1},
			201: {Board: kerongemu.Board{Bus: emu, Address: 2}, Lock: 1},
		}}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// hardware_fault on one controller: its locks jam, the other bank opens.
	status, body := do(http.MethodPost, "/sim/faults", `{"mode":"hardware_fault","controllerId":"CTL-1"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.ErrorIs(t, ctl1.Open(ctx, 1), lockctl.ErrHardwareFault)
	require.NoError(t, ctl2.Open(ctx, 1))

	status, body = do(http.MethodGet, "/sim/stats", "")
	require.Equal(t, http.StatusOK, status, body)
	var st kerongemu.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, map[string]int{"101": 1, "201": 1}, st.Opens, "the jammed coil fired once too")
	assert.Positive(t, st.Frames)

	status, body = do(http.MethodGet, "/sim/doors", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"101":{"open":false,"itemInside":false},"201":{"open":true,"itemInside":false}}`, body)
	status, body = do(http.MethodPost, "/sim/lockers/201/close", `{"itemInside":true}`)
	require.Equal(t, http.StatusOK, status, body)
	doors, err := ctl2.Doors(ctx)
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{ItemInside: true}, doors[1])

	// A door opened by hand: it reads open through the driver, and no lock pulsed.
	status, body = do(http.MethodPost, "/sim/lockers/101/force-open", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"lockerId":101,"doorOpen":true}`, body)
	doors, err = ctl1.Doors(ctx)
	require.NoError(t, err)
	assert.True(t, doors[1].Open)
	assert.Equal(t, 1, emu.Pulses(1, 1), "only the jammed pulse of before")
	status, body = do(http.MethodPost, "/sim/lockers/101/close", `{}`)
	require.Equal(t, http.StatusOK, status, body)

	// A bus fault by name, limited to one frame; then none.
	status, body = do(http.MethodPost, "/sim/faults", `{"mode":"no_answer","failures":1}`)
	require.Equal(t, http.StatusOK, status, body)
	require.NoError(t, ctl1.Open(ctx, 2), "the answer is lost, the door reads back open")
	assert.Equal(t, 1, emu.Pulses(1, 2))
	status, _ = do(http.MethodPost, "/sim/faults", `{"mode":"none"}`)
	require.Equal(t, http.StatusOK, status)
	status, body = do(http.MethodGet, "/sim/faults", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"mode":"none"`)

	status, _ = do(http.MethodDelete, "/sim/stats", "")
	assert.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, 0, emu.Pulses(1, 2))

	// Bad input: every answer is the simulator's error body, never a 5xx.
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{http.MethodPost, "/sim/faults", `{"mode":"melted"}`, 400, "INVALID_FAULTS"},
		{http.MethodPost, "/sim/faults", `{"mode":"slow","delayMs":99999999999}`, 400, "INVALID_FAULTS"},
		{http.MethodPost, "/sim/faults", `{"mode":"flaky","failures":-1}`, 400, "INVALID_FAULTS"},
		{http.MethodPost, "/sim/faults", `{"mode":"jammed","controllerId":"CTL-9"}`, 400, "INVALID_FAULTS"},
		{http.MethodPost, "/sim/faults", `{"mode":"none\u0000"}`, 400, "INVALID_FAULTS"},
		{http.MethodPost, "/sim/faults", `{"mode":7}`, 400, "INVALID_JSON"},
		{http.MethodPost, "/sim/faults", `{"mode":"none","x":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "PAYLOAD_TOO_LARGE"},
		{http.MethodPost, "/sim/lockers/999/close", `{}`, 404, "LOCKER_NOT_FOUND"},
		{http.MethodPost, "/sim/lockers/abc/close", `{}`, 404, "LOCKER_NOT_FOUND"},
		{http.MethodPost, "/sim/lockers/999/force-open", "", 404, "LOCKER_NOT_FOUND"},
		{http.MethodGet, "/sim/nothing", "", 404, "NOT_FOUND"},
	} {
		status, body := do(tc.method, tc.path, tc.body)
		assert.Equal(t, tc.status, status, "%s %s: %s", tc.method, tc.path, body)
		assert.Contains(t, body, `"error":"`+tc.code+`"`, "%s %s", tc.method, tc.path)
	}

	// The local-API modes are the simulator's.
	status, body = do(http.MethodPost, "/sim/faults", `{"mode":"http_500"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, simctl.ModeHTTP500, local.Faults().Mode)
	status, _ = do(http.MethodPost, "/sim/faults", `{"mode":"jammed"}`)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, simctl.ModeNone, local.Faults().Mode, "one mode at a time")
}
