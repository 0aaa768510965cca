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
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1, 2}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl1, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?baud=19200&board=1&timeout=100ms&opentimeout=300ms"+params)
	require.NoError(t, err)
	ctl2, err := bs.Controller("CTL-2", "kerong+serial://"+p.Path+"?baud=19200&board=2&timeout=100ms&opentimeout=300ms"+params)
	require.NoError(t, err)
	// A running gateway has read its doors: both boards have answered on this link.
	for _, ctl := range []*kerong.Controller{ctl1, ctl2} {
		_, err := ctl.Doors(ctx(t))
		require.NoError(t, err)
	}
	emu.ResetCounters()
	return &bus{emu: emu, pty: p, buses: bs, ctl1: ctl1, ctl2: ctl2}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestOpenThenDoorReadsOpenOverPTY(t *testing.T) {
	t.Parallel()
	b := newBus(t, "")
	doors, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	require.Len(t, doors, 16)
	assert.False(t, doors[3].Open)

	require.NoError(t, b.ctl1.Open(ctx(t), 3))
	assert.Equal(t, 1, b.emu.Pulses(1, 3))
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	assert.True(t, doors[3].Open, "the door sprang open")
	assert.False(t, doors[4].Open)

	b.emu.CloseDoor(1, 3, true)
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{Open: false, ItemInside: true}, doors[3], "closed by hand with an item inside")

	st, err := b.ctl1.Status(ctx(t))
	require.NoError(t, err)
	assert.True(t, st.Online)

	err = b.ctl1.Open(ctx(t), 17)
	assert.ErrorIs(t, err, lockctl.ErrUnknownChannel)
}

func TestTwoBoardsOnOneBus(t *testing.T) {
	t.Parallel()
	b := newBus(t, "")
	// Both banks at once: the bus takes one request at a time.
	errc := make(chan error, 2)
	go func() { errc <- b.ctl1.Open(ctx(t), 5) }()
	go func() { errc <- b.ctl2.Open(ctx(t), 5) }()
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
	assert.Equal(t, 1, b.emu.Pulses(1, 5))
	assert.Equal(t, 1, b.emu.Pulses(2, 5))

	require.NoError(t, b.ctl2.Open(ctx(t), 16))
	d1, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	d2, err := b.ctl2.Doors(ctx(t))
	require.NoError(t, err)
	assert.False(t, d1[16].Open, "board 1's lock 16 was not asked")
	assert.True(t, d2[16].Open)

	_, err = b.buses.Controller("CTL-3", "kerong+serial://"+b.pty.Path+"?board=2")
	assert.ErrorContains(t, err, "already another controller's")
}

func TestBoardsOfOneBank(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{3, 4}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=4,3")
	require.NoError(t, err)
	require.NoError(t, ctl.Open(ctx(t), 18), "channel 18 is lock 2 of the second board named")
	assert.Equal(t, 1, emu.Pulses(3, 2))
	doors, err := ctl.Doors(ctx(t))
	require.NoError(t, err)
	assert.Len(t, doors, 32)
	assert.True(t, doors[18].Open)
}

func TestFaults(t *testing.T) {
	t.Parallel()
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
		// Slower than the unlock's answer timeout: the door reads back open.
		{kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 500 * time.Millisecond, Count: 1}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.fault.Kind, tc.fault.Count), func(t *testing.T) {
			t.Parallel()
			b := newBus(t, "")
			require.NoError(t, b.emu.SetFault(1, tc.fault))
			err := b.ctl1.Open(ctx(t), 7)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
				assert.Equal(t, errors.Is(tc.want, lockctl.ErrUnreachable), lockctl.Retryable(err))
			}
			assert.Equal(t, tc.pulses, b.emu.Pulses(1, 7), "pulses")
			// Board 2 on the same bus is unaffected.
			require.NoError(t, b.ctl2.Open(ctx(t), 7))
			assert.Equal(t, 1, b.emu.Pulses(2, 7))
		})
	}
}

// A lost answer is never followed by a second pulse, even when the door cannot be
// read back at once: the next open reads the door before it pulses.
func TestLostAnswerNeverPulsesTwice(t *testing.T) {
	t.Parallel()
	b := newBus(t, "&rereads=0")
	// The unlock pulses and its answer is lost; the read back is lost too.
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 2}))
	err := b.ctl1.Open(ctx(t), 2)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	assert.False(t, lockctl.Retryable(err), "not to be retried as a fresh open")
	assert.Equal(t, 1, b.emu.Pulses(1, 2))

	// A later open of the lock finds the door open: no pulse.
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 1, b.emu.Pulses(1, 2), "never pulsed twice")

	// Once the door was shut again, an open pulses as usual.
	b.emu.CloseDoor(1, 2, false)
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 2, b.emu.Pulses(1, 2))
}

func TestReadsAreRetriedBounded(t *testing.T) {
	t.Parallel()
	b := newBus(t, "&rereads=2")
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
	_, err = b.ctl1.Status(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
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
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{0}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	emu.ListenTCP(ln)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl, err := bs.Controller("CTL-1", "kerong+tcp://"+ln.Addr().String()+"?board=0&timeout=200ms")
	require.NoError(t, err)
	require.NoError(t, ctl.Open(ctx(t), 1))

	emu.DropLinks() // the cable is pulled and plugged back
	time.Sleep(50 * time.Millisecond)
	doors, err := ctl.Doors(ctx(t))
	if err != nil {
		// The drop was noticed by this read: the next one reconnects.
		require.ErrorIs(t, err, lockctl.ErrUnreachable)
		doors, err = ctl.Doors(ctx(t))
	}
	require.NoError(t, err)
	assert.True(t, doors[1].Open)
	require.NoError(t, ctl.Open(ctx(t), 2))
	assert.Equal(t, 1, emu.Pulses(0, 2))

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

func TestSerialPortMissing(t *testing.T) {
	t.Parallel()
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
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
	// The next open of the lock reads its door first (after the late answer) and
	// finds it open: no second pulse.
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 1, b.emu.Pulses(1, 2))
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
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1}, DoorCloseAfter: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=1&timeout=150ms&opentimeout=100ms&rereads=2")
	require.NoError(t, err)
	_, err = ctl.Doors(ctx(t))
	require.NoError(t, err)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 300 * time.Millisecond}))

	err = openRequest(t, ctl, 1, 2*time.Second)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{}))
	require.Eventually(t, func() bool { return emu.Pulses(1, 1) == 1 }, 2*time.Second, 10*time.Millisecond, "the board pulses late")
	time.Sleep(time.Second) // every frame still queued at the board is handled
	assert.Equal(t, 1, emu.Pulses(1, 1), "one request, one pulse")

	// A new request for the lock reads its door first: shut again, so it pulses.
	require.NoError(t, openRequest(t, ctl, 1, 2*time.Second))
	assert.Equal(t, 2, emu.Pulses(1, 1))
}

// A slow bus with many opens at once, as in a cluster drill: every board takes longer
// to act and answer than an unlock's answer is awaited, doors close by themselves
// soon after they open, and each open request retries as the gateway's policy does.
// No door is pulsed twice for one request.
func TestSlowBusManyOpensPulseOncePerRequest(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1, 2}, DoorCloseAfter: 400 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	// The drill's figures, twenty times faster: a board takes 500 ms per frame, a
	// door closes 500 ms after it opened, an attempt lasts 1 s and an unlock's answer
	// is awaited longer than that.
	const params = "&timeout=200ms&opentimeout=1250ms&rereads=2"
	ctl1, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=1"+params)
	require.NoError(t, err)
	ctl2, err := bs.Controller("CTL-2", "kerong+serial://"+p.Path+"?board=2"+params)
	require.NoError(t, err)
	for _, ctl := range []*kerong.Controller{ctl1, ctl2} {
		_, err := ctl.Doors(ctx(t))
		require.NoError(t, err)
	}
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
				err := openRequest(t, ctl, lock, time.Second)
				results <- result{board, lock, err}
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
		for lock := 1; lock <= locks; lock++ {
			assert.LessOrEqual(t, emu.Pulses(board, lock), 1, "board %d lock %d: pulses", board, lock)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
