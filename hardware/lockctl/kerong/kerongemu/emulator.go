// Package kerongemu emulates, byte for byte, one bus of Kerong CU16 and CU48 lock
// control boards for development and tests: it reads the driver's command frames from a
// pseudo-terminal or a TCP link and answers as the boards would, with door mechanics
// (a pulse springs a door open, a user closes it, an item sensor) and bus faults (no
// answer, corrupt checksum, partial frame, slow answer, absent board, jammed lock,
// noise, dropped unlocks). Its Control serves the simulator's /sim/* shape.
//
// It is a dev and test component: the production gateway does not link it.
package kerongemu

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

// FaultKind is a fault a board injects on the bus.
type FaultKind string

// Bus faults.
const (
	FaultNone FaultKind = ""
	// FaultNoAnswer: the board carries out the command (an unlock pulses) and its
	// answer is lost.
	FaultNoAnswer FaultKind = "no_answer"
	// FaultCorruptChecksum: the board answers with a wrong checksum (an unlock pulses).
	FaultCorruptChecksum FaultKind = "corrupt_checksum"
	// FaultPartialFrame: the board answers only the first bytes of its frame.
	FaultPartialFrame FaultKind = "partial_frame"
	// FaultSlowAnswer: the board waits Delay before it acts and answers.
	FaultSlowAnswer FaultKind = "slow_answer"
	// FaultBoardAbsent: the board neither acts nor answers, as if unplugged.
	FaultBoardAbsent FaultKind = "board_absent"
	// FaultJammed: the board pulses and answers, and the door stays latched.
	FaultJammed FaultKind = "jammed"
	// FaultNoise: stray bytes on the bus before every answer.
	FaultNoise FaultKind = "noise"
	// FaultDropUnlock: unlock commands are garbled on the way in: no pulse, no answer.
	FaultDropUnlock FaultKind = "drop_unlock"
)

// Kinds lists the bus faults.
var Kinds = []FaultKind{FaultNoAnswer, FaultCorruptChecksum, FaultPartialFrame, FaultSlowAnswer,
	FaultBoardAbsent, FaultJammed, FaultNoise, FaultDropUnlock}

// Fault is a board's fault injection.
type Fault struct {
	Kind  FaultKind
	Delay time.Duration // FaultSlowAnswer
	// Count limits the fault to the next Count frames it applies to (unlocks only for
	// FaultDropUnlock); zero applies it until changed.
	Count int
}

// door is a lock's door and how many times the lock was pulsed.
type door struct {
	simctl.Door
	pulses int
}

type board struct {
	addr  int
	codec kerong.Codec
	doors []*door
	fault Fault
}

// Config configures an Emulator.
type Config struct {
	// Boards are the board addresses on the bus (0–15 for CU16 boards, 0–9 for CU48
	// boards), distinct whatever their model.
	Boards []int
	// Models names the model of boards that are not CU16 boards (address → model).
	Models map[int]kerong.Model
	// DoorCloseAfter closes a door that long after it sprang open; zero leaves it
	// open until CloseDoor.
	DoorCloseAfter time.Duration
	// Turnaround is how long a board takes to answer a frame.
	Turnaround time.Duration
}

// Emulator is one bus of boards.
type Emulator struct {
	cfg Config

	mu     sync.Mutex
	boards map[int]*board
	frames int
	closed bool
	links  map[io.Closer]bool
	rng    *rand.Rand
	wg     sync.WaitGroup
}

// New returns a bus with every door closed and no fault.
func New(cfg Config) (*Emulator, error) {
	e := &Emulator{cfg: cfg, boards: map[int]*board{}, links: map[io.Closer]bool{}, rng: rand.New(rand.NewPCG(1, 2))}
	for a, m := range cfg.Models {
		if !slices.Contains(cfg.Boards, a) {
			return nil, fmt.Errorf("model %s of board %d: no such board on the bus", m, a)
		}
	}
	for _, a := range cfg.Boards {
		m := cfg.Models[a]
		if m == "" {
			m = kerong.ModelCU16
		}
		codec, err := kerong.CodecOf(m)
		if err != nil {
			return nil, fmt.Errorf("board %d: %w", a, err)
		}
		if a < 0 || a > codec.MaxBoard() || e.boards[a] != nil {
			return nil, fmt.Errorf("board address %d: want distinct addresses 0 to %d (%s)", a, codec.MaxBoard(), m)
		}
		b := &board{addr: a, codec: codec, doors: make([]*door, codec.Locks())}
		for i := range b.doors {
			b.doors[i] = &door{}
		}
		e.boards[a] = b
	}
	return e, nil
}

// SetFault sets the fault of one board; board −1 sets every board's.
func (e *Emulator) SetFault(boardAddr int, f Fault) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if boardAddr >= 0 && e.boards[boardAddr] == nil {
		return fmt.Errorf("no board %d on the bus", boardAddr)
	}
	for a, b := range e.boards {
		if boardAddr < 0 || a == boardAddr {
			b.fault = f
		}
	}
	return nil
}

// Pulses returns how many times a lock (1–16, 1–48 on a CU48 board) was pulsed.
func (e *Emulator) Pulses(boardAddr, lock int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.door(boardAddr, lock)
	if d == nil {
		return 0
	}
	return d.pulses
}

// Frames returns how many command frames the boards received.
func (e *Emulator) Frames() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.frames
}

// ResetCounters zeroes the pulse and frame counters.
func (e *Emulator) ResetCounters() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.frames = 0
	for _, b := range e.boards {
		for _, d := range b.doors {
			d.pulses = 0
		}
	}
}

// Door reports a door's sensors; ok is false for an unknown board or lock.
func (e *Emulator) Door(boardAddr, lock int) (open, itemInside, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.door(boardAddr, lock)
	if d == nil {
		return false, false, false
	}
	return d.Open, d.ItemInside, true
}

// CloseDoor shuts a door by hand, with or without an item inside.
func (e *Emulator) CloseDoor(boardAddr, lock int, itemInside bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.door(boardAddr, lock)
	if d == nil {
		return false
	}
	d.Shut(itemInside)
	return true
}

// ForceOpen opens a door by hand with no pulse of its lock (not counted), as a door pried
// open would be; it stays open until CloseDoor. It reports false for an unknown board or lock.
func (e *Emulator) ForceOpen(boardAddr, lock int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.door(boardAddr, lock)
	if d == nil {
		return false
	}
	d.ForceOpen()
	return true
}

func (e *Emulator) door(boardAddr, lock int) *door {
	b := e.boards[boardAddr]
	if b == nil || lock < 1 || lock > len(b.doors) {
		return nil
	}
	return b.doors[lock-1]
}

// pulse springs a door open (e.mu held).
func (e *Emulator) pulse(d *door) {
	d.pulses++
	d.Pulse(&e.mu, e.cfg.DoorCloseAfter, e.closed)
}

// status is the board's answer to cmd: its hooks and sensors, ADDR and the lock
// byte as sent (a CU48 answer's status byte is always 75).
func (b *board) status(cmd kerong.Command) []byte {
	a := kerong.Answer{Board: cmd.Board, Lock: cmd.Lock, Cmd: cmd.Cmd}
	for i, d := range b.doors {
		if !d.Open {
			a.Hooks |= 1 << i
		}
		if d.ItemInside {
			a.Sensors |= 1 << i
		}
	}
	return b.codec.EncodeAnswer(a)
}

// handle carries out one command of a board of the model codec speaks and returns
// the bytes the board puts on the bus (nil: silence) and how long it waits first.
func (e *Emulator) handle(codec kerong.Codec, cmd kerong.Command) (out []byte, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.frames++
	b := e.boards[int(cmd.Board)]
	if b == nil || b.codec != codec || (cmd.Cmd != codec.StatusCmd() && cmd.Cmd != codec.UnlockCmd()) ||
		(cmd.Cmd == codec.UnlockCmd() && int(cmd.Lock) >= len(b.doors)) {
		return nil, 0
	}
	unlock := cmd.Cmd == codec.UnlockCmd()
	f := b.fault
	applies := f.Kind != FaultNone && (f.Kind != FaultDropUnlock || unlock)
	if applies && f.Count > 0 {
		b.fault.Count--
		if b.fault.Count == 0 {
			b.fault = Fault{}
		}
	}
	if !applies {
		f = Fault{}
	}
	switch f.Kind {
	case FaultBoardAbsent, FaultDropUnlock:
		return nil, 0
	}
	wait = e.cfg.Turnaround
	if f.Kind == FaultSlowAnswer {
		wait += f.Delay
	}
	if unlock && f.Kind != FaultSlowAnswer {
		e.unlock(b, cmd, f)
	}
	out = b.status(cmd)
	switch f.Kind {
	case FaultNoAnswer:
		return nil, 0
	case FaultCorruptChecksum:
		out[len(out)-1] ^= 0x5A
	case FaultPartialFrame:
		out = out[:4]
	case FaultNoise:
		noise := []byte{0x00, 0xFF, 0x02, byte(e.rng.IntN(256)), 0x55}
		out = append(noise, out...)
	}
	return out, wait
}

func (e *Emulator) unlock(b *board, cmd kerong.Command, f Fault) {
	d := b.doors[cmd.Lock]
	if f.Kind == FaultJammed {
		d.pulses++ // the coil fires; the bolt does not move
		return
	}
	e.pulse(d)
}

// slowUnlock is an unlock the board carries out after its delay (FaultSlowAnswer).
func (e *Emulator) slowUnlock(cmd kerong.Command) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.boards[int(cmd.Board)]
	e.pulse(b.doors[cmd.Lock])
	return b.status(cmd)
}

// decodeCommand finds the first command in buf of either model that is not
// addressed to a board of the other model (the frames differ: five bytes with ETX at 3 for a
// CU16, six with ETX at 4 for a CU48). ok false: skip leading bytes can never start
// one.
func (e *Emulator) decodeCommand(buf []byte) (codec kerong.Codec, cmd kerong.Command, used int, ok bool, skip int) {
	e.mu.Lock()
	var codecs []kerong.Codec
	for _, c := range []kerong.Codec{kerong.CU16, kerong.CU48} {
		for _, b := range e.boards {
			if b.codec == c {
				codecs = append(codecs, c)
				break
			}
		}
	}
	e.mu.Unlock()
	// The earliest frame of either model wins.
	skip, start := len(buf), len(buf)
	for _, c := range codecs {
		got, n, found, s := c.DecodeCommand(buf)
		if !found {
			skip = min(skip, s)
			continue
		}
		if at := n - len(c.EncodeCommand(got)); at < start {
			codec, cmd, used, start = c, got, n, at
		}
	}
	if codec == nil {
		return nil, kerong.Command{}, 0, false, skip
	}
	e.mu.Lock()
	b := e.boards[int(cmd.Board)]
	e.mu.Unlock()
	if b != nil && b.codec != codec {
		// To a board of the other model, which ignores it: look past it.
		return nil, kerong.Command{}, 0, false, used
	}
	return codec, cmd, used, true, 0 // to an absent board: counted, not answered
}

// Serve answers the commands read from rw until reading fails; it is one link.
func (e *Emulator) Serve(rw io.ReadWriter) error {
	var buf []byte
	p := make([]byte, 256)
	for {
		n, err := rw.Read(p)
		buf = append(buf, p[:n]...)
		for {
			codec, cmd, used, ok, skip := e.decodeCommand(buf)
			if !ok {
				buf = buf[skip:]
				if skip == 0 {
					break
				}
				continue
			}
			buf = buf[used:]
			slow := false
			e.mu.Lock()
			if b := e.boards[int(cmd.Board)]; b != nil && b.fault.Kind == FaultSlowAnswer && cmd.Cmd == codec.UnlockCmd() &&
				int(cmd.Lock) < len(b.doors) {
				slow = true
			}
			e.mu.Unlock()
			out, wait := e.handle(codec, cmd)
			if wait > 0 {
				time.Sleep(wait)
			}
			if slow && out != nil {
				out = e.slowUnlock(cmd)
			}
			if out != nil {
				if _, werr := rw.Write(out); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

func (e *Emulator) track(c io.Closer) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.links[c] = true
	return true
}

func (e *Emulator) untrack(c io.Closer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.links, c)
}

// PTY is the emulator's end of a pseudo-terminal pair; the driver opens Path.
type PTY struct {
	Path          string
	master, slave *os.File
}

// ServePTY makes a pseudo-terminal pair in raw mode and serves the bus on its master
// side; the driver opens the returned Path as its serial port.
func (e *Emulator) ServePTY() (*PTY, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	// Raw: no echo, no line editing, no signals on 0x03 (the frames' end byte).
	if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
		_ = master.Close()
		_ = slave.Close()
		return nil, fmt.Errorf("raw mode on %s: %w", slave.Name(), err)
	}
	// A non-blocking copy of the master, so that Close interrupts a pending Read
	// (pty.Open hands out a blocking one, which Close cannot wake).
	fd, err := syscall.Dup(int(master.Fd()))
	_ = master.Close()
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		_ = slave.Close()
		return nil, fmt.Errorf("pseudo-terminal master: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	p := &PTY{Path: slave.Name(), master: master, slave: slave}
	if !e.track(p) {
		_ = p.Close()
		return nil, errors.New("emulator closed")
	}
	e.wg.Go(func() {
		defer e.untrack(p)
		_ = e.Serve(master)
	})
	return p, nil
}

// Close closes both ends of the pair.
func (p *PTY) Close() error {
	return errors.Join(p.master.Close(), p.slave.Close())
}

// ListenTCP serves the bus to every connection accepted on ln (a network board's
// TCP port); the answers of two links never interleave on the wire.
func (e *Emulator) ListenTCP(ln net.Listener) {
	if !e.track(ln) {
		_ = ln.Close()
		return
	}
	var busMu sync.Mutex
	e.wg.Go(func() {
		defer e.untrack(ln)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !e.track(c) {
				_ = c.Close()
				return
			}
			e.wg.Go(func() {
				defer e.untrack(c)
				defer c.Close()
				_ = e.Serve(lockedRW{c: c, mu: &busMu})
			})
		}
	})
}

// lockedRW holds the bus while it writes an answer, so two TCP links do not interleave.
type lockedRW struct {
	c  net.Conn
	mu *sync.Mutex
}

func (l lockedRW) Read(p []byte) (int, error) { return l.c.Read(p) }
func (l lockedRW) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.Write(p)
}

// DropLinks closes every accepted TCP connection (a cable pulled); the listeners stay.
func (e *Emulator) DropLinks() {
	e.mu.Lock()
	var conns []io.Closer
	for c := range e.links {
		if _, ok := c.(net.Conn); ok {
			conns = append(conns, c)
		}
	}
	e.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops serving: links, listeners and pseudo-terminals are closed and pending
// automatic door closes cancelled.
func (e *Emulator) Close() {
	e.mu.Lock()
	e.closed = true
	links := make([]io.Closer, 0, len(e.links))
	for c := range e.links {
		links = append(links, c)
	}
	for _, b := range e.boards {
		for _, d := range b.doors {
			d.StopClose()
		}
	}
	e.mu.Unlock()
	for _, c := range links {
		_ = c.Close()
	}
	e.wg.Wait()
}
