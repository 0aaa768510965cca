package kerong_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
)

var cu48Boards = map[int]kerong.Model{1: kerong.ModelCU48, 2: kerong.ModelCU48}

// newBus48 is newBus with CU48 boards 1 and 2. A board that owes answers is left
// alone for late (300 ms unless params say otherwise) before it is talked to again.
func newBus48(t *testing.T, params string) *bus {
	t.Helper()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1, 2}, Models: cu48Boards})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	common := "&model=cu48&timeout=100ms&opentimeout=300ms"
	if !strings.Contains(params, "late=") {
		common += "&late=300ms"
	}
	ctl1, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=1"+common+params)
	require.NoError(t, err)
	ctl2, err := bs.Controller("CTL-2", "kerong+serial://"+p.Path+"?board=2"+common+params)
	require.NoError(t, err)
	for _, ctl := range []*kerong.Controller{ctl1, ctl2} {
		_, err := ctl.Doors(ctx(t))
		require.NoError(t, err)
	}
	emu.ResetCounters()
	return &bus{emu: emu, pty: p, buses: bs, ctl1: ctl1, ctl2: ctl2}
}

func TestCU48OpenThenDoorReadsOpenOverPTY(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "")
	assert.Equal(t, kerong.KindCU48, b.ctl1.Kind())
	assert.Contains(t, b.ctl1.Describe(), "Kerong CU48 over serial")
	doors, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	require.Len(t, doors, 48)
	assert.False(t, doors[48].Open)

	for _, ch := range []int{1, 17, 48} {
		require.NoError(t, b.ctl1.Open(ctx(t), ch))
		assert.Equal(t, 1, b.emu.Pulses(1, ch), "lock %d", ch)
	}
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	assert.True(t, doors[48].Open, "the door sprang open")
	assert.True(t, doors[17].Open)
	assert.False(t, doors[47].Open)

	b.emu.CloseDoor(1, 48, true)
	doors, err = b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, lockctl.Door{Open: false, ItemInside: true}, doors[48], "closed by hand with an item inside")

	st, err := b.ctl1.Status(ctx(t))
	require.NoError(t, err)
	assert.True(t, st.Online)
	assert.Empty(t, st.FirmwareVersion, "no source gives a firmware query")

	err = b.ctl1.Open(ctx(t), 49)
	assert.ErrorIs(t, err, lockctl.ErrUnknownChannel)
}

func TestCU48TwoBoardsOnOneBus(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "")
	errc := make(chan error, 2)
	go func() { errc <- b.ctl1.Open(ctx(t), 30) }()
	go func() { errc <- b.ctl2.Open(ctx(t), 30) }()
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
	assert.Equal(t, 1, b.emu.Pulses(1, 30))
	assert.Equal(t, 1, b.emu.Pulses(2, 30))

	require.NoError(t, b.ctl2.Open(ctx(t), 41))
	d1, err := b.ctl1.Doors(ctx(t))
	require.NoError(t, err)
	d2, err := b.ctl2.Doors(ctx(t))
	require.NoError(t, err)
	assert.False(t, d1[41].Open, "board 1's lock 41 was not asked")
	assert.True(t, d2[41].Open)

	// Two boards of one bank: channels 49–96 are the second board's.
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{3, 4}, Models: map[int]kerong.Model{3: kerong.ModelCU48, 4: kerong.ModelCU48}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	ctl, err := bs.Controller("CTL-9", "kerong+serial://"+p.Path+"?board=4,3&model=cu48")
	require.NoError(t, err)
	require.NoError(t, ctl.Open(ctx(t), 50), "channel 50 is lock 2 of the second board named")
	assert.Equal(t, 1, emu.Pulses(3, 2))
	doors, err := ctl.Doors(ctx(t))
	require.NoError(t, err)
	assert.Len(t, doors, 96)
	assert.True(t, doors[50].Open)
}

// A bus carries one model: the driver refuses a CU16 controller on a CU48 bus and
// the other way round.
func TestCU48AndCU16DoNotShareABus(t *testing.T) {
	t.Parallel()
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	_, err := bs.Controller("CTL-1", "kerong+serial:///dev/ttyUSB0?board=1&model=cu48")
	require.NoError(t, err)
	_, err = bs.Controller("CTL-2", "kerong+serial:///dev/ttyUSB0?board=2")
	require.ErrorContains(t, err, "a bus carries one model")
	_, err = bs.Controller("CTL-3", "kerong+serial:///dev/ttyUSB0?board=2&model=CU48")
	require.NoError(t, err)
	_, err = bs.Controller("CTL-4", "kerong+serial:///dev/ttyUSB1?board=2&model=cu16")
	require.NoError(t, err, "another port is another bus")
	_, err = bs.Controller("CTL-5", "kerong+serial:///dev/ttyUSB1?board=3&model=cu48")
	require.ErrorContains(t, err, "already carries CU16 boards")

	s, err := kerong.ParseURL("kerong+tcp://10.0.0.7:5000?board=0,9&model=cu48")
	require.NoError(t, err)
	assert.Equal(t, kerong.ModelCU48, s.Model)
	assert.Equal(t, 96, s.Channels())
}

func TestCU48Faults(t *testing.T) {
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
		// Every answer damaged or lost: the door cannot be read back either.
		{kerongemu.Fault{Kind: kerongemu.FaultCorruptChecksum}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultPartialFrame}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultNoAnswer}, lockctl.ErrOutcomeUnknown, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}, lockctl.ErrOutcomeUnknown, 0},
		// The unlock never arrived: read back closed, unreachable (the caller may retry).
		{kerongemu.Fault{Kind: kerongemu.FaultDropUnlock, Count: 1}, lockctl.ErrUnreachable, 0},
		{kerongemu.Fault{Kind: kerongemu.FaultJammed}, lockctl.ErrHardwareFault, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultNoise}, nil, 1},
		{kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 100 * time.Millisecond}, nil, 1},
		// Slower than the unlock's answer timeout: the late answer of the unlock is the
		// read-back's (it was sent after the pulse).
		{kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 500 * time.Millisecond, Count: 1}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.fault.Kind, tc.fault.Count), func(t *testing.T) {
			t.Parallel()
			b := newBus48(t, "")
			require.NoError(t, b.emu.SetFault(1, tc.fault))
			err := b.ctl1.Open(ctx(t), 40)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
				assert.Equal(t, errors.Is(tc.want, lockctl.ErrUnreachable), lockctl.Retryable(err))
			}
			assert.Equal(t, tc.pulses, b.emu.Pulses(1, 40), "pulses")
			// Board 2 on the same bus is unaffected.
			require.NoError(t, b.ctl2.Open(ctx(t), 40))
			assert.Equal(t, 1, b.emu.Pulses(2, 40))
			// Once the fault is gone, board 1 is driven again (after late, if it owed answers).
			require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{}))
			require.Eventually(t, func() bool { return b.ctl1.Open(ctx(t), 41) == nil }, 3*time.Second, 50*time.Millisecond)
			assert.Equal(t, 1, b.emu.Pulses(1, 41))
			assert.Equal(t, tc.pulses, b.emu.Pulses(1, 40), "no later pulse of lock 40")
		})
	}
}

// A lost answer is never followed by a second pulse: the unlock and its read-back
// are both lost, the board owes answers and is sent nothing until late has passed,
// and then the next open reads the door first.
func TestCU48LostAnswerNeverPulsesTwice(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "&rereads=0&late=1s")
	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultNoAnswer, Count: 2}))
	err := b.ctl1.Open(ctx(t), 2)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	assert.False(t, lockctl.Retryable(err), "not to be retried as a fresh open")
	assert.Equal(t, 1, b.emu.Pulses(1, 2))

	// At once: the board owes two answers, and its next one could be either's.
	frames := b.emu.Frames()
	err = b.ctl1.Open(ctx(t), 2)
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	assert.True(t, lockctl.Retryable(err))
	assert.Equal(t, frames, b.emu.Frames(), "nothing sent")
	_, err = b.ctl1.Doors(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)

	// After late: the door is read first and found open; no pulse.
	time.Sleep(time.Second)
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 1, b.emu.Pulses(1, 2), "never pulsed twice")

	b.emu.CloseDoor(1, 2, false)
	require.NoError(t, b.ctl1.Open(ctx(t), 2))
	assert.Equal(t, 2, b.emu.Pulses(1, 2))
}

// The drill's shape on a CU48 bus: a slow board pulses after the unlock's answer was
// given up on, read-backs time out, late answers follow, the door closes by itself
// soon after it opened. One pulse per request; a late answer is never taken for a
// read made before the unlock.
func TestCU48LateAnswersNeverPulseTwice(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1}, Models: map[int]kerong.Model{1: kerong.ModelCU48},
		DoorCloseAfter: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl, err := bs.Controller("CTL-1", "kerong+serial://"+p.Path+"?board=1&model=cu48&timeout=150ms&opentimeout=100ms&rereads=2&late=2s")
	require.NoError(t, err)
	_, err = ctl.Doors(ctx(t))
	require.NoError(t, err)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 300 * time.Millisecond}))

	// The unlock's own answer comes during the read-back: it says open.
	require.NoError(t, openRequest(t, ctl, 1, 2*time.Second))
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{}))
	time.Sleep(time.Second) // every frame still queued at the board is handled
	assert.Equal(t, 1, emu.Pulses(1, 1), "one request, one pulse")

	// The read-backs' late answers settle what the board owed: the next request
	// pulses once more (the door closed by itself).
	require.NoError(t, openRequest(t, ctl, 1, 2*time.Second))
	assert.Equal(t, 2, emu.Pulses(1, 1))
}

// Many opens at once on a slow CU48 bus, each retried as the gateway does: no door
// is pulsed twice for one request.
func TestCU48SlowBusManyOpensPulseOncePerRequest(t *testing.T) {
	t.Parallel()
	models := map[int]kerong.Model{1: kerong.ModelCU48, 2: kerong.ModelCU48}
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{1, 2}, Models: models, DoorCloseAfter: 400 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	const params = "&model=cu48&timeout=200ms&opentimeout=1250ms&rereads=2&late=3s"
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
				results <- result{board, lock * 3, openRequest(t, ctl, lock*3, time.Second)}
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
	require.NoError(t, emu.SetFault(-1, kerongemu.Fault{}))
	time.Sleep(time.Second)
	for board := 1; board <= 2; board++ {
		for lock := 1; lock <= 48; lock++ {
			assert.LessOrEqual(t, emu.Pulses(board, lock), 1, "board %d lock %d: pulses", board, lock)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

func TestCU48OverTCPAndReconnect(t *testing.T) {
	t.Parallel()
	emu, err := kerongemu.New(kerongemu.Config{Boards: []int{0}, Models: map[int]kerong.Model{0: kerong.ModelCU48}})
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	emu.ListenTCP(ln)
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	ctl, err := bs.Controller("CTL-1", "kerong+tcp://"+ln.Addr().String()+"?board=0&model=cu48&timeout=200ms")
	require.NoError(t, err)
	require.NoError(t, ctl.Open(ctx(t), 33))

	emu.DropLinks()
	time.Sleep(50 * time.Millisecond)
	doors, err := ctl.Doors(ctx(t))
	if err != nil {
		require.ErrorIs(t, err, lockctl.ErrUnreachable)
		doors, err = ctl.Doors(ctx(t))
	}
	require.NoError(t, err)
	assert.True(t, doors[33].Open)
	require.NoError(t, ctl.Open(ctx(t), 34))
	assert.Equal(t, 1, emu.Pulses(0, 34))
}

// Damaged and cut-short answers are asked again, a bounded number of times; a missing
// one is not (the board owes it, and its next answer could be that one's).
func TestCU48ReadsAreRetriedBounded(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "&rereads=2")
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
	b.emu.ResetCounters()
	_, err = b.ctl1.Status(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	assert.Equal(t, 1, b.emu.Frames(), "a missing answer is not asked again at once")
	st, err = b.ctl2.Status(ctx(t))
	require.NoError(t, err, "board 2 answers")
	assert.True(t, st.Online)
}

// A command still queued for the bus when its context ends has written nothing; an
// unlock that went out and whose answer had not come when the context ended is an
// unknown outcome, and the next open of the lock reads its door (after the late
// answer settles what the board owed) instead of pulsing again.
func TestCU48QueuedPastItsDeadlineSendsNothing(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "&late=5s")
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
	require.NoError(t, b.ctl1.Open(ctx(t), 1), "the retry")
	assert.Equal(t, 1, b.emu.Pulses(1, 1))

	require.NoError(t, b.emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: 200 * time.Millisecond, Count: 1}))
	short2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	err = b.ctl1.Open(short2, 2)
	require.ErrorIs(t, err, lockctl.ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, lockctl.Retryable(err))
	// Until the unlock's late answer comes, the board owes it: nothing is sent. Then
	// the open reads the door, finds it open, and does not pulse.
	require.Eventually(t, func() bool { return b.ctl1.Open(ctx(t), 2) == nil }, 2*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, b.emu.Pulses(1, 2))
}
