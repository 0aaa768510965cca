package gateway_test

import (
	"encoding/json"
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
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
)

// kerongGateway is a gateway whose one bank is driven through the Kerong driver over
// a pseudo-terminal to an emulated bus with board 1.
type kerongGateway struct {
	emu    *kerongemu.Emulator
	ctl    *kerong.Controller
	ctlURL string
	do     func(method, path string) (int, []byte)
}

func newKerongGateway(t *testing.T, cfg kerongemu.Config) *kerongGateway {
	t.Helper()
	return newKerongGatewayOf(t, cfg, kerong.Kind, "")
}

// newKerongGatewayOf is newKerongGateway with a controller of the kind, its URL
// given the parameters params too.
func newKerongGatewayOf(t *testing.T, cfg kerongemu.Config, kind, params string) *kerongGateway {
	t.Helper()
	emu, pt := emutest.ServePTY(t, cfg)

	layout, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	ctlURL := "kerong+serial://" + pt.Path + "?board=1&timeout=100ms&opentimeout=300ms&rereads=1" + params
	layout.Banks[0].Controller = gateway.ControllerSpec{ID: "CTL-1", Kind: kind, Address: ctlURL}
	buses := emutest.Buses(t)
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
		r := send(t, req)
		return r.status, r.body
	}
	return &kerongGateway{emu: emu, ctl: ctl, ctlURL: ctlURL, do: do}
}

// openCase is one open of a locker (201 + its index, lock 1 + its index) under a
// bus fault, and what the gateway answers.
type openCase struct {
	name   string
	fault  kerongemu.Fault
	status int
	code   string // the Error body's code, for a failure
	pulses int
	// silent: the board is left as the case before left it (it did not answer);
	// otherwise it answers a read before the fault is set, as in a working bank.
	silent bool
}

func (g *kerongGateway) run(t *testing.T, tests []openCase) {
	t.Helper()
	for i, tc := range tests {
		lockerID, lock := 201+i, i+1
		if !tc.silent {
			_, err := g.ctl.Doors(t.Context())
			require.NoError(t, err, tc.name)
		}
		require.NoError(t, g.emu.SetFault(1, tc.fault))
		status, body := g.do(http.MethodPost, "/lockers/"+strconv.Itoa(lockerID)+"/open")
		require.NoError(t, g.emu.SetFault(1, kerongemu.Fault{}))
		assert.Equal(t, tc.status, status, "%s: %s", tc.name, body)
		if tc.code == "" {
			assert.Contains(t, string(body), `"doorOpen":true`, tc.name)
		} else {
			var e gateway.ErrorBody
			require.NoError(t, json.Unmarshal(body, &e), tc.name)
			assert.Equal(t, tc.code, e.Error, tc.name)
			assert.EqualValues(t, lockerID, e.Details["lockerId"], tc.name)
		}
		assert.Equal(t, tc.pulses, g.emu.Pulses(1, lock), "%s: pulses", tc.name)
	}
}

// TestOpenOnKerongBoard drives a gateway's bank through the Kerong driver over a
// pseudo-terminal to an emulated CU16 board, and checks that every bus fault gets
// the gateway's existing answer: a jammed lock 500 HARDWARE_FAULT after one pulse
// (never retried), an unlock sent and never confirmed 500 REQUEST_OUTCOME_UNKNOWN,
// a lost or damaged answer never a second pulse.
func TestOpenOnKerongBoard(t *testing.T) {
	t.Parallel()
	g := newKerongGateway(t, kerongemu.Config{Boards: []int{1}})
	g.run(t, []openCase{
		{"no fault", kerongemu.Fault{}, http.StatusOK, "", 1, false},
		{"jammed lock", kerongemu.Fault{Kind: kerongemu.FaultJammed}, http.StatusInternalServerError, "HARDWARE_FAULT", 1, false},
		{"answer lost once", kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 1}, http.StatusOK, "", 1, false},
		// Every answer damaged: the unlock pulsed once, and the attempts left read the
		// door (which fails) instead of pulsing again.
		{"every answer corrupt", kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN", 1, false},
		{"partial answers", kerongemu.Fault{Kind: kerongemu.FaultPartialFrame}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN", 1, false},
		// The unlock was garbled on the way in: read back latched, retried, opened.
		{"unlock lost once", kerongemu.Fault{Kind: kerongemu.FaultDropUnlock, Count: 1}, http.StatusOK, "", 1, false},
		{"noise on the bus", kerongemu.Fault{Kind: kerongemu.FaultNoise}, http.StatusOK, "", 1, false},
	})

	// The doors as the board reports them, and the controller as /system names it.
	status, body := g.do(http.MethodGet, "/lockers/201")
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Contains(t, string(body), `"doorOpen":true`)
	status, body = g.do(http.MethodGet, "/system")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var sys gateway.System
	require.NoError(t, json.Unmarshal(body, &sys))
	require.Len(t, sys.Controllers, 1)
	assert.Equal(t, kerong.Kind, sys.Controllers[0].Kind)
	assert.Equal(t, g.ctlURL, sys.Controllers[0].Address)
	assert.True(t, sys.Controllers[0].Online)
}

// TestUnconfirmedOpenOnKerongBoard: an unlock that went out and whose answer and
// read-back were lost is never pulsed again by the open policy; its attempts left
// read the door, and an open door is the open done.
func TestUnconfirmedOpenOnKerongBoard(t *testing.T) {
	t.Parallel()
	g := newKerongGateway(t, kerongemu.Config{Boards: []int{1}})
	g.run(t, []openCase{
		// The unlock's answer and both tries of its read-back lost: the next attempt
		// reads the door, finds it open, and does not pulse.
		{"answer and read-back lost", kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 3}, http.StatusOK, "", 1, false},
		// Every answer lost: one pulse, and the outcome stays unknown.
		{"every answer lost", kerongemu.Fault{Kind: kerongemu.FaultNoAnswer}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN", 1, false},
		// The board falls silent as the unlock goes out: the driver cannot tell it from
		// a pulse whose answers were lost. Once it is known silent, nothing is sent.
		{"absent board", kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN", 0, false},
		{"absent board, known silent", kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}, http.StatusServiceUnavailable, "CONTROLLER_UNAVAILABLE", 0, true},
	})
	// A later open of the lock whose answers were all lost reads its door first: open,
	// so no pulse.
	status, body := g.do(http.MethodPost, "/lockers/202/open")
	assert.Equal(t, http.StatusOK, status, "%s", body)
	assert.Equal(t, 1, g.emu.Pulses(1, 2))
}

// TestOpenOnKerongCU48Board is TestOpenOnKerongBoard and TestUnconfirmedOpenOnKerongBoard
// on a CU48 board (kind kerong-cu48, model=cu48): the same answers for the same
// faults. A CU48 board that owes answers (one was lost) is sent nothing for late
// (200 ms here), so the cases after a lost answer wait that long first.
func TestOpenOnKerongCU48Board(t *testing.T) {
	t.Parallel()
	g := newKerongGatewayOf(t, kerongemu.Config{Boards: []int{1}, Models: map[int]kerong.Model{1: kerong.ModelCU48}},
		kerong.KindCU48, "&model=cu48&late=200ms")
	open := func(name string, lockerID int, fault kerongemu.Fault, status int, code string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, g.emu.SetFault(1, fault))
		got, body := g.do(http.MethodPost, "/lockers/"+strconv.Itoa(lockerID)+"/open")
		require.NoError(t, g.emu.SetFault(1, kerongemu.Fault{}))
		require.Equal(t, status, got, "%s: %s", name, body)
		if code != "" {
			var e gateway.ErrorBody
			require.NoError(t, json.Unmarshal(body, &e), name)
			assert.Equal(t, code, e.Error, name)
		}
	}
	open("no fault", 201, kerongemu.Fault{}, http.StatusOK, "")
	open("jammed lock", 202, kerongemu.Fault{Kind: kerongemu.FaultJammed}, http.StatusInternalServerError, "HARDWARE_FAULT")
	open("answer lost once", 203, kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 1}, http.StatusOK, "")
	open("every answer corrupt", 204, kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN")
	open("every answer lost", 205, kerongemu.Fault{Kind: kerongemu.FaultNoAnswer}, http.StatusInternalServerError, "REQUEST_OUTCOME_UNKNOWN")
	open("unlock lost once", 206, kerongemu.Fault{Kind: kerongemu.FaultDropUnlock, Count: 1}, http.StatusOK, "")
	open("noise on the bus", 207, kerongemu.Fault{Kind: kerongemu.FaultNoise}, http.StatusOK, "")
	for lock, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1} {
		assert.Equal(t, want, g.emu.Pulses(1, lock), "lock %d: pulses", lock)
	}
	// A later open of a lock whose answers were all lost reads its door first: open,
	// so no pulse.
	open("again after every answer lost", 205, kerongemu.Fault{}, http.StatusOK, "")
	assert.Equal(t, 1, g.emu.Pulses(1, 5))

	status, body := g.do(http.MethodGet, "/system")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var sys gateway.System
	require.NoError(t, json.Unmarshal(body, &sys))
	require.Len(t, sys.Controllers, 1)
	assert.Equal(t, kerong.KindCU48, sys.Controllers[0].Kind, "/system names the model")
	assert.Equal(t, g.ctlURL, sys.Controllers[0].Address)
	assert.True(t, sys.Controllers[0].Online)
	assert.Empty(t, sys.Controllers[0].FirmwareVersion)
}
