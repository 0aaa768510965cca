package simctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

func wiring() map[string]map[int]int {
	return map[string]map[int]int{
		"CTL-1": {1: 101, 2: 102},
		"CTL-2": {1: 201},
	}
}

func TestControllerFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fault     simctl.Fault
		wantErr   error
		wantOpens int
	}{
		{name: "none", fault: simctl.Fault{}, wantOpens: 1},
		{name: "unreachable", fault: simctl.Fault{Kind: simctl.ControllerUnreachable}, wantErr: lockctl.ErrUnreachable},
		{name: "hardware fault", fault: simctl.Fault{Kind: simctl.ControllerHardwareFault}, wantErr: lockctl.ErrHardwareFault},
		{name: "hang", fault: simctl.Fault{Kind: simctl.ControllerHang}, wantErr: context.DeadlineExceeded},
		{name: "slow beyond the deadline", fault: simctl.Fault{Kind: simctl.ControllerSlow, Delay: time.Hour}, wantErr: context.DeadlineExceeded},
		{name: "slow within the deadline", fault: simctl.Fault{Kind: simctl.ControllerSlow, Delay: time.Millisecond}, wantOpens: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := simctl.NewController(simctl.ControllerConfig{ID: "CTL-1", Channels: []int{1, 2}})
			c.SetFault(tc.fault)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			err := c.Open(ctx, 1)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.wantOpens, c.Opens()[1], "real actuations")
			assert.Equal(t, 1, c.Attempts())
			assert.Equal(t, errors.Is(tc.wantErr, lockctl.ErrUnreachable), lockctl.Retryable(err), "retryable")
		})
	}
}

func TestControllerFlakyFailsThenSucceeds(t *testing.T) {
	t.Parallel()
	c := simctl.NewController(simctl.ControllerConfig{ID: "CTL-1", Channels: []int{1}})
	c.SetFault(simctl.Fault{Kind: simctl.ControllerFlaky, Failures: 2})
	for i := 0; i < 2; i++ {
		err := c.Open(t.Context(), 1)
		require.ErrorIs(t, err, lockctl.ErrUnreachable)
		assert.True(t, lockctl.Retryable(err))
	}
	require.NoError(t, c.Open(t.Context(), 1))
	assert.Equal(t, 1, c.Opens()[1])
	assert.Equal(t, 3, c.Attempts())
}

func TestControllerDoors(t *testing.T) {
	t.Parallel()
	c := simctl.NewController(simctl.ControllerConfig{ID: "CTL-1", Channels: []int{1, 2}})
	require.NoError(t, c.Open(t.Context(), 2))
	doors, err := c.Doors(t.Context())
	require.NoError(t, err)
	assert.True(t, doors[2].Open)
	assert.False(t, doors[1].Open)

	require.True(t, c.CloseDoor(2, true))
	doors, err = c.Doors(t.Context())
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{Open: false, ItemInside: true}, doors[2])
	assert.False(t, c.CloseDoor(9, false))

	require.ErrorIs(t, c.Open(t.Context(), 9), lockctl.ErrUnknownChannel)

	st, err := c.Status(t.Context())
	require.NoError(t, err)
	assert.Equal(t, lockctl.Status{Online: true, FirmwareVersion: simctl.DefaultFirmwareVersion}, st)

	c.SetFault(simctl.Fault{Kind: simctl.ControllerUnreachable})
	_, err = c.Doors(t.Context())
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	_, err = c.Status(t.Context())
	require.ErrorIs(t, err, lockctl.ErrUnreachable)

	c.SetFault(simctl.Fault{Kind: simctl.ControllerHardwareFault})
	_, err = c.Doors(t.Context())
	require.NoError(t, err, "a lock fault does not stop the sensors")
}

func TestDoorClosesByItself(t *testing.T) {
	t.Parallel()
	c := simctl.NewController(simctl.ControllerConfig{ID: "CTL-1", Channels: []int{1}, DoorCloseAfter: 20 * time.Millisecond})
	require.NoError(t, c.Open(t.Context(), 1))
	require.Eventually(t, func() bool {
		doors, err := c.Doors(t.Context())
		return err == nil && !doors[1].Open
	}, 10*time.Second, 10*time.Millisecond)
}

func TestSimStatsAndModes(t *testing.T) {
	t.Parallel()
	s := simctl.New(simctl.Config{}, wiring())
	t.Cleanup(s.Close)
	require.Len(t, s.Controllers(), 2)

	require.NoError(t, s.Controller("CTL-1").Open(t.Context(), 2))
	st := s.Stats()
	assert.Equal(t, map[string]int{"101": 0, "102": 1, "201": 0}, st.Opens)
	assert.Equal(t, 1, s.Opens(102))

	require.NoError(t, s.SetFaults(simctl.Faults{Mode: simctl.ModeHardwareFault, ControllerID: "CTL-2"}))
	assert.Equal(t, simctl.ControllerHardwareFault, s.Controller("CTL-2").Fault().Kind)
	assert.Equal(t, simctl.ControllerOK, s.Controller("CTL-1").Fault().Kind)

	require.NoError(t, s.SetFaults(simctl.Faults{Mode: simctl.ModeNone}))
	assert.Equal(t, simctl.ControllerOK, s.Controller("CTL-2").Fault().Kind)

	for _, bad := range []simctl.Faults{
		{Mode: "bogus"},
		{Mode: simctl.ModeSlow, DelayMs: -1},
		{Mode: simctl.ModeFlaky, Failures: -1},
		{Mode: simctl.ModeHardwareFault, ControllerID: "nope"},
	} {
		assert.ErrorIs(t, s.SetFaults(bad), simctl.ErrInvalidFaults, "%+v", bad)
	}

	s.ResetStats()
	assert.Equal(t, 0, s.Opens(102))
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(data) > 0 {
		require.NoError(t, json.Unmarshal(data, &out), string(data))
	}
	return resp.StatusCode, out
}

func TestControlHandler(t *testing.T) {
	t.Parallel()
	s := simctl.New(simctl.Config{}, wiring())
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s.ControlHandler())
	t.Cleanup(srv.Close)

	tests := []struct {
		name, path, body string
		wantStatus       int
		wantError        string
	}{
		{name: "set hang", path: "/sim/faults", body: `{"mode":"hang"}`, wantStatus: 200},
		{name: "set slow", path: "/sim/faults", body: `{"mode":"slow","delayMs":250}`, wantStatus: 200},
		{name: "set flaky", path: "/sim/faults", body: `{"mode":"flaky","failures":2}`, wantStatus: 200},
		{name: "unknown mode", path: "/sim/faults", body: `{"mode":"explode"}`, wantStatus: 400, wantError: "INVALID_FAULTS"},
		{name: "wrong type", path: "/sim/faults", body: `{"mode":3}`, wantStatus: 400, wantError: "INVALID_JSON"},
		{name: "malformed", path: "/sim/faults", body: `{`, wantStatus: 400, wantError: "INVALID_JSON"},
		{name: "too large", path: "/sim/faults", body: `{"mode":"` + strings.Repeat("x", 70<<10) + `"}`, wantStatus: 413, wantError: "PAYLOAD_TOO_LARGE"},
		{name: "close door", path: "/sim/lockers/101/close", body: `{"itemInside":true}`, wantStatus: 200},
		{name: "close unknown door", path: "/sim/lockers/999/close", body: `{}`, wantStatus: 404, wantError: "LOCKER_NOT_FOUND"},
		{name: "force a door open", path: "/sim/lockers/102/force-open", wantStatus: 200},
		{name: "force an unknown door open", path: "/sim/lockers/999/force-open", wantStatus: 404, wantError: "LOCKER_NOT_FOUND"},
		{name: "back to none", path: "/sim/faults", body: `{"mode":"none"}`, wantStatus: 200},
	}
	for _, tc := range tests {
		status, body := postJSON(t, srv.URL+tc.path, tc.body)
		assert.Equal(t, tc.wantStatus, status, tc.name)
		if tc.wantError != "" {
			assert.Equal(t, tc.wantError, body["error"], tc.name)
		}
	}
	d, ok := s.Door(101)
	require.True(t, ok)
	assert.True(t, d.ItemInside)
	d, ok = s.Door(102)
	require.True(t, ok)
	assert.True(t, d.Open, "forced open")

	resp, err := http.Get(srv.URL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st simctl.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	assert.Len(t, st.Opens, 3)
	assert.Zero(t, st.Opens["102"], "a door forced open is no actuation")
}

// TestListenerUnreachable checks that mode "unreachable" refuses connections
// and resets open ones, and that the port serves again afterwards.
func TestListenerUnreachable(t *testing.T) {
	t.Parallel()
	s := simctl.New(simctl.Config{}, wiring())
	t.Cleanup(s.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))}
	go func() { _ = srv.Serve(s.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + "/x"

	get := func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	require.NoError(t, get())
	require.NoError(t, s.SetFaults(simctl.Faults{Mode: simctl.ModeUnreachable}))
	err = get()
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "want connection refused, got %v", err)
	// The port stays taken while unreachable: another listener cannot bind it (and a free-port
	// request is never given it), so the refused gateway is not replaced by some other server.
	if other, err := net.Listen("tcp", ln.Addr().String()); err == nil {
		other.Close()
		t.Error("the unreachable gateway's port could be bound by another listener")
	}

	require.NoError(t, s.SetFaults(simctl.Faults{Mode: simctl.ModeNone}))
	require.Eventually(t, func() bool { return get() == nil }, 10*time.Second, 20*time.Millisecond)
	assert.EqualValues(t, 2, s.Stats().Requests)
}
