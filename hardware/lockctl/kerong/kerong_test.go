package kerong_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
)

// bus is an emulated bus with boards 1 and 2 on a pseudo-terminal, and the
// controllers of two banks on it (board 1 and board 2), as a gateway would drive them.
type bus struct {
	emu        *kerongemu.Emulator
	pty        *kerongemu.PTY
	buses      *kerong.Buses
	ctl1, ctl2 *kerong.Controller
}

func newBus(t *testing.T, params string) *bus {
	t.Helper()
	return newBusOf(t, kerongemu.Config{Boards: []int{1, 2}}, "&baud=19200&timeout=100ms&opentimeout=300ms"+params)
}

// newBusOf is a bus of boards 1 and 2 emulated as cfg says, driven by the
// controllers of boards 1 and 2 with the URL parameters params.
func newBusOf(t *testing.T, cfg kerongemu.Config, params string) *bus {
	t.Helper()
	emu, p, bs := serveEmu(t, cfg)
	ctl1, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=1"+params)
	require.NoError(t, err)
	ctl2, err := bs.Controller("CTL-2", "kerong+serial://"+p.Path+"?board=2"+params)
	require.NoError(t, err)
	// A running gateway has read its doors: both boards have answered on this link.
	for _, ctl := range []*kerong.Controller{ctl1, ctl2} {
		_, err := ctl.Doors(ctx(t))
		require.NoError(t, err)
	}
	emu.ResetCounters()
	return &bus{emu: emu, pty: p, buses: bs, ctl1: ctl1, ctl2: ctl2}
}

// serveEmu is an emulator made from cfg, served on a pseudo-terminal, and the
// buses to drive it; all are closed when the test ends.
func serveEmu(t *testing.T, cfg kerongemu.Config) (*kerongemu.Emulator, *kerongemu.PTY, *kerong.Buses) {
	t.Helper()
	emu, p := emutest.ServePTY(t, cfg)
	return emu, p, emutest.Buses(t)
}

// serveOne is serveEmu with one controller on it, made from the URL query query.
func serveOne(t *testing.T, cfg kerongemu.Config, query string) (*kerongemu.Emulator, *kerong.Controller) {
	t.Helper()
	emu, p, bs := serveEmu(t, cfg)
	ctl, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+query)
	require.NoError(t, err)
	return emu, ctl
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestOpenThenDoorReadsOpenOverPTY(t *testing.T) {
	t.Parallel()
	checkOpenThenDoorReads(t, newBus(t, ""), 16, []int{3}, 4)
}

// checkOpenThenDoorReads opens the locks opened of board 1 (a board of size locks)
// one by one, and reads each door open and the door shut stays shut; the last lock
// opened is then shut by hand with an item inside, and a lock past size is unknown.
func checkOpenThenDoorReads(t *testing.T, b *bus, size int, opened []int, shut int) {
	t.Helper()
	last := opened[len(opened)-1]
	doors, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	require.Len(t, doors, size)
	assert.False(t, doors[last].Open)

	for _, ch := range opened {
		require.NoError(t, b.ctl1.Open(ctx(t), ch))
		assert.Equal(t, 1, b.emu.Pulses(1, ch), "lock %d", ch)
	}
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	for _, ch := range opened {
		assert.True(t, doors[ch].Open, "lock %d: the door sprang open", ch)
	}
	assert.False(t, doors[shut].Open)

	b.emu.CloseDoor(1, last, true)
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{Open: false, ItemInside: true}, doors[last], "closed by hand with an item inside")

	st, err := b.ctl1.Status(ctx(t))
	require.NoError(t, err)
	assert.True(t, st.Online)

	err = b.ctl1.Open(ctx(t), size+1)
	assert.ErrorIs(t, err, lockctl.ErrUnknownChannel)
}

func TestTwoBoardsOnOneBus(t *testing.T) {
	t.Parallel()
	b := newBus(t, "")
	checkTwoBoardsOnOneBus(t, b, 5, 16)
	_, err := b.buses.Controller("CTL-3", "kerong+serial://"+b.pty.Path+"?board=2")
	assert.ErrorContains(t, err, "already another controller's")
}

// checkTwoBoardsOnOneBus opens lock both of both banks at once (the bus takes one
// request at a time), then lock one of board 2 alone.
func checkTwoBoardsOnOneBus(t *testing.T, b *bus, both, one int) {
	t.Helper()
	errc := make(chan error, 2)
	go func() { errc <- b.ctl1.Open(ctx(t), both) }()
	go func() { errc <- b.ctl2.Open(ctx(t), both) }()
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
	assert.Equal(t, 1, b.emu.Pulses(1, both))
	assert.Equal(t, 1, b.emu.Pulses(2, both))

	require.NoError(t, b.ctl2.Open(ctx(t), one))
	d1, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	d2, err := b.ctl2.Doors(ctx(t))
	require.NoError(t, err)
	assert.False(t, d1[one].Open, "board 1's lock %d was not asked", one)
	assert.True(t, d2[one].Open)
}

func TestBoardsOfOneBank(t *testing.T) {
	t.Parallel()
	checkBoardsOfOneBank(t, kerongemu.Config{Boards: []int{3, 4}}, "", 16)
}

// checkBoardsOfOneBank drives boards 4 and 3 (of size locks each, as cfg and params
// say) as one bank: lock 2 of board 3 is the bank's channel size+2.
func checkBoardsOfOneBank(t *testing.T, cfg kerongemu.Config, params string, size int) {
	t.Helper()
	emu, ctl := serveOne(t, cfg, "?board=4,3"+params)
	require.NoError(t, ctl.Open(ctx(t), size+2), "channel %d is lock 2 of the second board named", size+2)
	assert.Equal(t, 1, emu.Pulses(3, 2))
	doors, err := ctl.Doors(ctx(t))
	require.NoError(t, err)
	assert.Len(t, doors, 2*size)
	assert.True(t, doors[size+2].Open)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	checkFaults(t, func(t *testing.T) *bus { return newBus(t, "") }, 7, false)
}

// checkFaults opens lock of board 1 under each fault of the emulator and checks the
// outcome and the pulses; board 2 on the same bus is unaffected. With recovers, board
// 1 is then driven again once the fault is gone (after late, if it owed answers).
func checkFaults(t *testing.T, newBus func(t *testing.T) *bus, lock int, recovers bool) {
	t.Helper()
	tests := []struct {
		fault  kerongemu.Fault
		want   error // nil: the open succeeds
		pulses int
	}{
		// The answer is lost after the pulse: the door is read back open, no second pulse.
		{kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 1}, nil, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum, Count: 1}, nil, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultPartialFrame, Count: 1}, nil, 1},
		// Every answer damaged or lost: the door cannot be read back either, and the
		// driver cannot tell a pulse whose answers were lost from a silent board.
		{kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultPartialFrame}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultNoAnswer}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}, lockctl.ErrOutcomeUnknown, 0},
		// The unlock never arrived: read back closed, unreachable (the caller may retry).
		{kerongemu.Fault{Kind: kerongemu.FaultDropUnlock, Count: 1}, lockctl.ErrUnreachable, 0},
		{kerongemu.Fault{Kind: kerongemu.FaultJammed}, lockctl.ErrHardwareFault, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultNoise}, nil, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 100 * time.Millisecond}, nil, 1},
		// Slower than the unlock's answer timeout: the door reads back open (the late
		// answer of the unlock is the read-back's: it was sent after the pulse).
		{kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 500 * time.Millisecond, Count: 1}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.fault.Kind, tc.fault.Count), func(t *testing.T) {
			t.Parallel()
			b := newBus(t)
			require.NoError(t, b.emu.SetFault(1, tc.fault))
			err := b.ctl1.Open(ctx(t), lock)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
				assert.Equal(t, errors.Is(tc.want, lockctl.ErrUnreachable), lockctl.Retryable(err))
			}
			assert.Equal(t, tc.pulses, b.emu.Pulses(1, lock), "pulses")
			// Board 2 on the same bus is unaffected.
			require.NoError(t, b.ctl2.Open(ctx(t), lock))
			assert.Equal(t, 1, b.emu.Pulses(2, lock))
			if !recovers {
				return
			}
			require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{}))
			require.Eventually(t, func() bool { return b.ctl1.Open(ctx(t), lock+1) == nil }, 3*time.Second, 50*time.Millisecond)
			assert.Equal(t, 1, b.emu.Pulses(1, lock+1))
			assert.Equal(t, tc.pulses, b.emu.Pulses(1, lock), "no later pulse of lock %d", lock)
		})
	}
}

// A lost answer is never followed by a second pulse, even when the door cannot be
// read back at once: the next open reads the door before it pulses.
func TestLostAnswerNeverPulsesTwice(t *testing.T) {
	t.Parallel()
	b := newBus(t, "&rereads=0")
	loseUnlockAndReadBack(t, b)

	// A later open of the lock finds the door open: no pulse.
	checkNoSecondPulse(t, b)
}

// loseUnlockAndReadBack opens lock 2 of board 1, which pulses; the unlock's answer is
// lost and the read-back's too.
func loseUnlockAndReadBack(t *testing.T, b *bus) {
	t.Helper()
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 2}))
	err := b.ctl1.Open(ctx(t), 2)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	assert.False(t, lockctl.Retryable(err), "not to be retried as a fresh open")
	assert.Equal(t, 1, b.emu.Pulses(1, 2))
}

// checkNoSecondPulse opens lock 2 of board 1, whose door is open: no pulse. Once the
// door was shut again, an open pulses as usual.
func checkNoSecondPulse(t *testing.T, b *bus) {
	t.Helper()
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 1, b.emu.Pulses(1, 2), "never pulsed twice")

	b.emu.CloseDoor(1, 2, false)
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 2, b.emu.Pulses(1, 2))
}

func TestReadsAreRetriedBounded(t *testing.T) {
	t.Parallel()
	b := newBus(t, "&rereads=2")
	checkReadsAreRetriedBounded(t, b)
	_, err := b.ctl1.Status(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
}

// checkReadsAreRetriedBounded drives b, whose controllers were made with rereads=2,
// and leaves board 1 absent.
func checkReadsAreRetriedBounded(t *testing.T, b *bus) {
	t.Helper()
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum, Count: 2}))
	_, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err, "the third try gets a good answer")
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultPartialFrame, Count: 3}))
	b.emu.ResetCounters()
	_, err = b.ctl1.Doors(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	assert.Equal(t, 3, b.emu.Frames(), "asked three times, no more")
	st, err := b.ctl1.Status(ctx(t))
	require.NoError(t, err, "the fault is spent")
	assert.True(t, st.Online)

	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}))
}

func TestContextEndsBeforeThePulse(t *testing.T) {
	t.Parallel()
	b := newBus(t, "")
	c, cancel := context.WithCancel(t.Context())
	cancel()
	err := b.ctl1.Open(c, 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, b.emu.Pulses(1, 1))

	// The bus is held by a slow answer: a caller whose time runs out while waiting
	// for the bus gives up without pulsing.
	require.NoError(t, b.emu.SetFault(2, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 250 * time.Millisecond}))
	done := make(chan error, 1)
	go func() { done <- b.ctl2.Open(ctx(t), 1) }()
	time.Sleep(50 * time.Millisecond)
	short, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	err = b.ctl1.Open(short, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, <-done)
	assert.Equal(t, 0, b.emu.Pulses(1, 1))
}

func TestTCPAndReconnect(t *testing.T) {
	t.Parallel()
	bs := checkTCPAndReconnect(t, kerongemu.Config{Boards: []int{0}}, "&timeout=200ms", 1)

	// A port nobody listens on: unreachable, not a fault.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := dead.Addr().String()
	require.NoError(t, dead.Close())
	ctl2, err := bs.Controller("CTL-2", "kerong+tcp://"+addr+"?board=1")
	require.NoError(t, err)
	err = ctl2.Open(ctx(t), 1)
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
}

// checkTCPAndReconnect drives board 0 of an emulator made from cfg over TCP: lock
// is opened, the link dropped, and the door read back open over a new link; then
// lock+1 opens. It returns the buses, still open.
func checkTCPAndReconnect(t *testing.T, cfg kerongemu.Config, params string, lock int) *kerong.Buses {
	t.Helper()
	emu, err := kerongemu.New(cfg)
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	emu.ListenTCP(ln)
	bs := emutest.Buses(t)
	ctl, err := bs.Controller("CTL-1", "kerong+tcp://"+ln.Addr().String()+"?board=0"+params)
	require.NoError(t, err)
	require.NoError(t, ctl.Open(ctx(t), lock))

	emu.DropLinks() // the cable is pulled and plugged back
	time.Sleep(50 * time.Millisecond)
	doors, err := ctl.Doors(ctx(t))
	if err != nil {
		// The drop was noticed by this read: the next one reconnects.
		require.ErrorIs(t, err, lockctl.ErrUnreachable)
		doors, err = ctl.Doors(ctx(t))
	}
	require.NoError(t, err)
	assert.True(t, doors[lock].Open)
	require.NoError(t, ctl.Open(ctx(t), lock+1))
	assert.Equal(t, 1, emu.Pulses(0, lock+1))
	return bs
}

func TestSerialPortMissing(t *testing.T) {
	t.Parallel()
	bs := emutest.Buses(t)
	ctl, err := bs.Controller("CTL-1", "kerong+serial:///dev/nonexistent-tty?board=1")
	require.NoError(t, err)
	_, err = ctl.Doors(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	s, err := kerong.ParseURL("kerong+serial:///dev/ttyUSB0?baud=9600&board=1,2&timeout=250ms")
	require.NoError(t, err)
	assert.Equal(t, kerong.Settings{Transport: "serial", Port: "/dev/ttyUSB0", Baud: 9600, Model: "cu16", Boards: []int{1, 2},
		FrameTimeout: 250 * time.Millisecond, OpenTimeout: kerong.DefaultOpenTimeout, Rereads: kerong.DefaultRereads,
		LateAnswer: kerong.DefaultLateAnswer}, s)
	s, err = kerong.ParseURL("kerong+tcp://10.0.0.7:5000?board=0")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7:5000", s.Port)

	for _, bad := range []string{
		"kerong+serial:///dev/ttyUSB0", "kerong+serial:///dev/ttyUSB0?board=16", "kerong+serial:///dev/ttyUSB0?board=1,1",
		"kerong+serial:///dev/ttyUSB0?board=1&baud=fast", "kerong+serial:///dev/ttyUSB0?board=1&colour=red",
		"kerong+serial:///dev/ttyUSB0?board=1&model=cu64", "kerong+serial:///dev/ttyUSB0?board=10&model=cu48",
		"kerong+serial:///dev/ttyUSB0?board=1&timeout=-1s",
		"kerong+tcp://host?board=1", "kerong+udp://host:1?board=1", "kerong+serial://host/dev/tty?board=1", "%zz",
		"kerong+serial:///dev/ttyUSB0?board=\x00",
	} {
		_, err := kerong.ParseURL(bad)
		assert.Error(t, err, bad)
	}
}

// A command still queued for the bus when its context ends has written nothing: it
// is unreachable, which may be retried. An unlock that went out and whose answer
// had not come when the context ended is an unknown outcome, which may not.
func TestQueuedPastItsDeadlineSendsNothing(t *testing.T) {
	t.Parallel()
	b := newBus(t, "")
	checkQueuedPastItsDeadline(t, b)
	// The next open of the lock reads its door first (after the late answer) and
	// finds it open: no second pulse.
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 1, b.emu.Pulses(1, 2))
}

// checkQueuedPastItsDeadline opens lock 1 of board 1 while board 2's slow unlock
// holds the bus, with less time than that takes: nothing is sent, and the retry
// pulses once. Then lock 2 of board 1 is opened with a shorter time than its slow
// answer takes: the outcome is unknown, and lock 2 has pulsed once when the caller
// is done.
func checkQueuedPastItsDeadline(t *testing.T, b *bus) {
	t.Helper()
	require.NoError(t, b.emu.SetFault(2, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 250 * time.Millisecond, Count: 1}))
	done := make(chan error, 1)
	go func() { done <- b.ctl2.Open(ctx(t), 1) }()
	time.Sleep(50 * time.Millisecond) // board 2's unlock holds the bus
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := b.ctl1.Open(short, 1)
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, lockctl.Retryable(err), "nothing was sent: a retry is safe")
	require.NoError(t, <-done)
	assert.Equal(t, 1, b.emu.Frames(), "only board 2's unlock reached the bus")
	assert.Equal(t, 0, b.emu.Pulses(1, 1))
	require.NoError(t, b.ctl1.Open(ctx(t), 1), "the retry")
	assert.Equal(t, 1, b.emu.Pulses(1, 1))

	// Sent, and the caller's time ran out before the answer: the board pulses later.
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 200 * time.Millisecond, Count: 1}))
	short2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	err = b.ctl1.Open(short2, 2)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, lockctl.Retryable(err))
}

// openRequest opens a lock as the gateway's open policy does: up to three attempts,
// an attempt that timed out or could not talk to the board tried again, an unknown
// outcome never.
func openRequest(t *testing.T, ctl *kerong.Controller, channel int, attempt time.Duration) error {
	var err error
	for range 3 {
		actx, cancel := context.WithTimeout(t.Context(), attempt)
		err = ctl.Open(actx, channel)
		cancel()
		if errors.Is(err, lockctl.ErrOutcomeUnknown) || !lockctl.Retryable(err) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// The drill's defect, step by step: a slow board pulses after the unlock's answer was
// given up on, the read-back times out too, late answers follow, and the door closes
// by itself soon after it opened. The request ends with an unknown outcome after one
// pulse, whatever the late answers say; the next request reads the door first.
func TestLateReadBackNeverPulsesTwice(t *testing.T) {
	t.Parallel()
	emu, ctl := slowBoard(t, kerongemu.Config{Boards: []int{1}, DoorCloseAfter: 100 * time.Millisecond}, "")

	err := openRequest(t, ctl, 1, 2*time.Second)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{}))
	require.Eventually(t, func() bool { return emu.Pulses(1, 1) == 1 }, 2*time.Second, 10*time.Millisecond, "the board pulses late")
	time.Sleep(time.Second) // every frame still queued at the board is handled
	assert.Equal(t, 1, emu.Pulses(1, 1), "one request, one pulse")

	// A new request for the lock reads its door first: shut again, so it pulses.
	require.NoError(t, openRequest(t, ctl, 1, 2*time.Second))
	assert.Equal(t, 2, emu.Pulses(1, 1))
}

// slowBoard is board 1 of an emulator made from cfg, driven with a frame timeout of
// 150 ms, an unlock's answer awaited 100 ms and two rereads (and params), which has
// read its doors once; the board then answers each frame 300 ms late.
func slowBoard(t *testing.T, cfg kerongemu.Config, params string) (*kerongemu.Emulator, *kerong.Controller) {
	t.Helper()
	emu, ctl := serveOne(t, cfg, "?board=1&timeout=150ms&opentimeout=100ms&rereads=2"+params)
	_, err := ctl.Doors(ctx(t))
	require.NoError(t, err)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 300 * time.Millisecond}))
	return emu, ctl
}

// A slow bus with many opens at once, as in a cluster drill: every board takes longer
// to act and answer than an unlock's answer is awaited, doors close by themselves
// soon after they open, and each open request retries as the gateway's policy does.
// No door is pulsed twice for one request.
func TestSlowBusManyOpensPulseOncePerRequest(t *testing.T) {
	t.Parallel()
	checkSlowBusManyOpens(t, nil, "", 1, 16)
}

// checkSlowBusManyOpens drives boards 1 and 2 (of the models given, of size locks
// each) with params: locks step, 2·step, … 16·step of both are opened at once.
func checkSlowBusManyOpens(t *testing.T, models map[int]kerong.Model, params string, step, size int) {
	t.Helper()
	// The drill's figures, twenty times faster: a board takes 500 ms per frame, a
	// door closes 500 ms after it opened, an attempt lasts 1 s and an unlock's answer
	// is awaited longer than that.
	b := newBusOf(t, kerongemu.Config{Boards: []int{1, 2}, Models: models, DoorCloseAfter: 400 * time.Millisecond},
		params+"&timeout=200ms&opentimeout=1250ms&rereads=2")
	emu, ctl1, ctl2 := b.emu, b.ctl1, b.ctl2
	require.NoError(t, emu.SetFault(-1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 500 * time.Millisecond}))

	const locks = 16
	type result struct {
		board, lock int
		err         error
	}
	results := make(chan result, 2*locks)
	for lock := 1; lock <= locks; lock++ {
		for board, ctl := range map[int]*kerong.Controller{1: ctl1, 2: ctl2} {
			go func() {
				err := openRequest(t, ctl, lock*step, time.Second)
				results <- result{board, lock * step, err}
			}()
		}
	}
	outcomes := map[string]int{}
	for range 2 * locks {
		r := <-results
		switch {
		case r.err == nil:
			outcomes["opened"]++
		case errors.Is(r.err, lockctl.ErrOutcomeUnknown):
			outcomes["unknown"]++
		default:
			require.ErrorIs(t, r.err, lockctl.ErrUnreachable, "board %d lock %d", r.board, r.lock)
			outcomes["unreachable"]++
		}
	}
	// Unlocks still queued at the board are carried out after their callers left.
	require.NoError(t, emu.SetFault(-1, kerongemu.Fault{}))
	time.Sleep(time.Second)
	for board := 1; board <= 2; board++ {
		for lock := 1; lock <= size; lock++ {
			assert.LessOrEqual(t, emu.Pulses(board, lock), 1, "board %d lock %d: pulses", board, lock)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
