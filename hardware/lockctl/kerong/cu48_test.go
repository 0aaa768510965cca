package kerong_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
)

var cu48Boards = map[int]kerong.Model{1: kerong.ModelCU48, 2: kerong.ModelCU48}

// newBus48 is newBus with CU48 boards 1 and 2. A board that owes answers is left
// alone for late (300 ms unless params say otherwise) before it is talked to again.
func newBus48(t *testing.T, params string) *bus {
	t.Helper()
	common := "&model=cu48&timeout=100ms&opentimeout=300ms"
	if !strings.Contains(params, "late=") {
		common += "&late=300ms"
	}
	return newBusOf(t, kerongemu.Config{Boards: []int{1, 2}, Models: cu48Boards}, common+params)
}

func TestCU48OpenThenDoorReadsOpenOverPTY(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "")
	assert.Equal(t, kerong.KindCU48, b.ctl1.Kind())
	assert.Contains(t, b.ctl1.Describe(), "Kerong CU48 over serial")
	checkOpenThenDoorReads(t, b, 48, []int{1, 17, 48}, 47)

	st, err := b.ctl1.Status(ctx(t))
	require.NoError(t, err)
	assert.Empty(t, st.FirmwareVersion, "no source gives a firmware query")
}

func TestCU48TwoBoardsOnOneBus(t *testing.T) {
	t.Parallel()
	checkTwoBoardsOnOneBus(t, newBus48(t, ""), 30, 41)

	// Two boards of one bank: channels 49–96 are the second board's.
	checkBoardsOfOneBank(t, kerongemu.Config{Boards: []int{3, 4}, Models: map[int]kerong.Model{3: kerong.ModelCU48, 4: kerong.ModelCU48}},
		"&model=cu48", 48)
}

// A bus carries one model: the driver refuses a CU16 controller on a CU48 bus and
// the other way round.
func TestCU48AndCU16DoNotShareABus(t *testing.T) {
	t.Parallel()
	bs := emutest.Buses(t)
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
	checkFaults(t, func(t *testing.T) *bus { return newBus48(t, "") }, 40, true)
}

// A lost answer is never followed by a second pulse: the unlock and its read-back
// are both lost, the board owes answers and is sent nothing until late has passed,
// and then the next open reads the door first.
func TestCU48LostAnswerNeverPulsesTwice(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "&rereads=0&late=1s")
	loseUnlockAndReadBack(t, b)

	// At once: the board owes two answers, and its next one could be either's.
	frames := b.emu.Frames()
	err := b.ctl1.Open(ctx(t), 2)
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	assert.True(t, lockctl.Retryable(err))
	assert.Equal(t, frames, b.emu.Frames(), "nothing sent")
	_, err = b.ctl1.Doors(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)

	// After late: the door is read first and found open; no pulse.
	time.Sleep(time.Second)
	checkNoSecondPulse(t, b)
}

// The drill's shape on a CU48 bus: a slow board pulses after the unlock's answer was
// given up on, read-backs time out, late answers follow, the door closes by itself
// soon after it opened. One pulse per request; a late answer is never taken for a
// read made before the unlock.
func TestCU48LateAnswersNeverPulseTwice(t *testing.T) {
	t.Parallel()
	emu, ctl := slowBoard(t, kerongemu.Config{Boards: []int{1}, Models: map[int]kerong.Model{1: kerong.ModelCU48},
		DoorCloseAfter: 100 * time.Millisecond}, "&model=cu48&late=2s")

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
	checkSlowBusManyOpens(t, cu48Boards, "&model=cu48&late=3s", 3, 48)
}

func TestCU48OverTCPAndReconnect(t *testing.T) {
	t.Parallel()
	checkTCPAndReconnect(t, kerongemu.Config{Boards: []int{0}, Models: map[int]kerong.Model{0: kerong.ModelCU48}},
		"&model=cu48&timeout=200ms", 33)
}

// Damaged and cut-short answers are asked again, a bounded number of times; a missing
// one is not (the board owes it, and its next answer could be that one's).
func TestCU48ReadsAreRetriedBounded(t *testing.T) {
	t.Parallel()
	b := newBus48(t, "&rereads=2")
	checkReadsAreRetriedBounded(t, b)
	b.emu.ResetCounters()
	_, err := b.ctl1.Status(ctx(t))
	require.ErrorIs(t, err, lockctl.ErrUnreachable)
	assert.Equal(t, 1, b.emu.Frames(), "a missing answer is not asked again at once")
	st, err := b.ctl2.Status(ctx(t))
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
	checkQueuedPastItsDeadline(t, b)
	// Until the unlock's late answer comes, the board owes it: nothing is sent. Then
	// the open reads the door, finds it open, and does not pulse.
	require.Eventually(t, func() bool { return b.ctl1.Open(ctx(t), 2) == nil }, 2*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, b.emu.Pulses(1, 2))
}
