package kerongemu_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/term"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
)

// readFrame reads n bytes from f within a second.
func readFrame(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	require.NoError(t, f.SetReadDeadline(time.Now().Add(time.Second)))
	out := make([]byte, 0, n)
	p := make([]byte, n)
	for len(out) < n {
		k, err := f.Read(p[:n-len(out)])
		require.NoError(t, err)
		out = append(out, p[:k]...)
	}
	return out
}

// One bus, a CU16 board (3) and a CU48 board (4), over a pty, raw bytes: each board
// answers its own model's frames and ignores the other's.
func TestMixedModelsOnOnePTY(t *testing.T) {
	t.Parallel()
	emu, p := emutest.ServePTY(t, kerongemu.Config{Boards: []int{3, 4}, Models: map[int]kerong.Model{4: kerong.ModelCU48}})
	f, err := os.OpenFile(p.Path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	_, err = term.MakeRaw(int(f.Fd()))
	require.NoError(t, err)

	// CU48 unlock of board 4, lock 40: eighteen bytes back, the lock open.
	_, err = f.Write(kerong.CU48.EncodeCommand(kerong.Command{Board: 4, Lock: 39, Cmd: kerong.CU48CmdUnlock}))
	require.NoError(t, err)
	a, _, ok, _ := kerong.CU48.DecodeAnswer(readFrame(t, f, kerong.CU48AnswerLen))
	require.True(t, ok)
	assert.Equal(t, byte(4), a.Board)
	assert.Equal(t, byte(39), a.Lock, "the lock byte as sent")
	assert.False(t, a.Latched(40))
	assert.True(t, a.Latched(39))
	assert.Equal(t, 1, emu.Pulses(4, 40))

	// CU16 unlock of board 3, lock 2: nine bytes back.
	_, err = f.Write(kerong.CU16.EncodeCommand(kerong.Command{Board: 3, Lock: 1, Cmd: kerong.CU16CmdUnlock}))
	require.NoError(t, err)
	a16, _, ok, _ := kerong.CU16.DecodeAnswer(readFrame(t, f, kerong.CU16AnswerLen))
	require.True(t, ok)
	assert.Equal(t, byte(3), a16.Board)
	assert.False(t, a16.Latched(2))
	assert.Equal(t, 1, emu.Pulses(3, 2))

	// Frames of the wrong model are ignored by the board: a CU48 read of board 3 and
	// a CU16 read whose address byte names board 4 get no answer; the next good
	// read does.
	_, err = f.Write(kerong.CU48.EncodeCommand(kerong.Command{Board: 3, Cmd: kerong.CU48CmdStatus}))
	require.NoError(t, err)
	_, err = f.Write(kerong.CU16.EncodeCommand(kerong.Command{Board: 0, Lock: 4, Cmd: kerong.CU16CmdStatus}))
	require.NoError(t, err)
	_, err = f.Write(kerong.CU48.EncodeCommand(kerong.Command{Board: 4, Cmd: kerong.CU48CmdStatus}))
	require.NoError(t, err)
	got := readFrame(t, f, kerong.CU48AnswerLen)
	a, _, ok, _ = kerong.CU48.DecodeAnswer(got)
	require.True(t, ok, "%x", got)
	assert.Equal(t, byte(4), a.Board)
	assert.Equal(t, 0, emu.Pulses(3, 5))

	_, err = kerongemu.New(kerongemu.Config{Boards: []int{10}, Models: map[int]kerong.Model{10: kerong.ModelCU48}})
	assert.Error(t, err, "CU48 addresses are 0 to 9")
	_, err = kerongemu.New(kerongemu.Config{Boards: []int{1}, Models: map[int]kerong.Model{2: kerong.ModelCU48}})
	assert.Error(t, err, "a model for a board not on the bus")
}

// The same mixed bus over TCP, driven by the real driver: each link carries one
// model, as the driver wants, and both reach their boards.
func TestMixedModelsOverTCP(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1, 2}, Models: map[int]kerong.Model{2: kerong.ModelCU48}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	emu.ListenTCP(ln)
	bs16, bs48 := kerong.NewBuses(), kerong.NewBuses()
	t.Cleanup(bs16.Close)
	t.Cleanup(bs48.Close)
	ctl16, err := bs16.Controller("CTL-1", "kerong+tcp://"+ln.Addr().String()+"?board=1")
	require.NoError(t, err)
	ctl48, err := bs48.Controller("CTL-2", "kerong+tcp://"+ln.Addr().String()+"?board=2&model=cu48")
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, ctl16.Open(ctx, 16))
	require.NoError(t, ctl48.Open(ctx, 48))
	assert.Equal(t, 1, emu.Pulses(1, 16))
	assert.Equal(t, 1, emu.Pulses(2, 48))
	d48, err := ctl48.Doors(ctx)
	require.NoError(t, err)
	assert.True(t, d48[48].Open)
	assert.False(t, d48[16].Open)

	// Faults apply per board, whatever its model.
	require.NoError(t, emu.SetFault(2, kerongemu.Fault{Kind: kerongemu.FaultJammed}))
	require.ErrorIs(t, ctl48.Open(ctx, 1), lockctl.ErrHardwareFault)
	require.NoError(t, ctl16.Open(ctx, 1))
	assert.Equal(t, 1, emu.Pulses(2, 1), "the coil fired once")
}

// The /sim/* control works the same over CU48 boards: lockers on locks up to 48,
// the simulator's modes as bus faults.
func TestControlOverCU48(t *testing.T) {
	t.Parallel()
	emu, pt := emutest.ServePTY(t, kerongemu.Config{Boards: []int{5}, Models: map[int]kerong.Model{5: kerong.ModelCU48}})
	bs := emutest.Buses(t)
	ctl, err := bs.Controller("CTL-1", "kerong+serial://"+pt.Path+"?board=5&model=cu48")
	require.NoError(t, err)
	board := kerongemu.Board{Bus: emu, Address: 5}
	c := &kerongemu.Control{Controllers: map[string][]kerongemu.Board{"CTL-1": {board}},
		Lockers: map[int]kerongemu.Place{148: {Board: board, Lock: 48}}}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)

	require.NoError(t, ctl.Open(t.Context(), 48))
	assert.Equal(t, 1, c.Stats().Opens["148"])
	res, err := http.Get(srv.URL + "/sim/doors")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	assert.JSONEq(t, `{"148": {"open": true, "itemInside": false}}`, string(body))

	res, err = http.Post(srv.URL+"/sim/lockers/148/close", "application/json", strings.NewReader(`{"itemInside": true}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	doors, err := ctl.Doors(t.Context())
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{ItemInside: true}, doors[48])

	res, err = http.Post(srv.URL+"/sim/faults", "application/json", strings.NewReader(`{"mode": "hardware_fault"}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.ErrorIs(t, ctl.Open(t.Context(), 48), lockctl.ErrHardwareFault)
}
