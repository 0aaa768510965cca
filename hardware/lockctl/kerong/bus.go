package kerong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"go.bug.st/serial"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// bus is one RS-485 line (a serial port) or one TCP link to a network board: the
// boards on it answer one request at a time, so every exchange holds the bus.
//
// A board handles its frames in the order it receives them, and the driver keeps,
// per board, the frames it wrote whose answer it has not seen (pending). A status
// read carries a tag in its lock nibble, which the board echoes (ADDR as sent), and
// the tag is one no pending frame of that board carries: an answer with the tag is
// that read's own, not a late answer to an earlier frame, and it means the board has
// handled every frame written to it before (an unlock whose answer was lost
// included). Late answers met on the way take their frames off the pending list.
//
// A CU48 status read has no field to carry a tag (codec.go), so on a CU48 bus the
// answers are matched by their order instead (ordered.go); exchange runs either matcher.
type bus struct {
	key   string
	codec Codec
	open  func(ctx context.Context) (io.ReadWriteCloser, error)
	// lateAnswer is how long an unanswered frame may still be answered.
	lateAnswer time.Duration

	sem  chan struct{} // held for a whole exchange (half-duplex)
	conn *conn         // nil until opened, and again after the link dropped
	// boards is what the driver knows of each board on the current link.
	boards map[byte]*boardState
	// unresolved holds the locks (lockKey) whose last unlock got no answer: before
	// anything pulses them again, their door is read back.
	unresolved map[int]bool
	closed     bool
}

// boardState is one board's frames on the current link.
type boardState struct {
	pending []pendingFrame // written, answer not seen; oldest first
	// inStep: the board answered the last frame written to it, so nothing written
	// before can still be answered.
	inStep bool
	// unsureUntil: a frame was given up on before its answer could come; until
	// then a tag may be shared with it and no answer is trusted.
	unsureUntil time.Time
	nextTag     byte
	// lastWrite is when the last frame was written to the board (ordered matching).
	lastWrite time.Time
}

type pendingFrame struct {
	cmd Command
}

// maxPending bounds the frames a board may owe: one tag in sixteen always stays free.
const maxPending = CU16MaxLocks - 1

// conn is an open link and the bytes read from it.
type conn struct {
	rwc  io.ReadWriteCloser
	in   chan []byte
	dead chan struct{} // closed when the reader stops (link dropped or closed)
	err  error         // why the reader stopped; read after dead is closed
	buf  []byte
}

func newBus(s Settings) *bus {
	b := &bus{key: s.busKey(), codec: s.codec(), lateAnswer: s.LateAnswer, sem: make(chan struct{}, 1),
		boards: map[byte]*boardState{}, unresolved: map[int]bool{}}
	switch s.Transport {
	case TransportSerial:
		port, baud := s.Port, s.Baud
		b.open = func(context.Context) (io.ReadWriteCloser, error) {
			return serial.Open(port, &serial.Mode{BaudRate: baud, DataBits: 8, Parity: serial.NoParity, StopBits: serial.OneStopBit})
		}
	case TransportTCP:
		addr := s.Port
		b.open = func(ctx context.Context) (io.ReadWriteCloser, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	return b
}

// acquire takes the bus, or gives up when ctx ends. A caller still queued for the
// bus when its ctx ends has written nothing: that is lockctl.ErrUnreachable (and
// the context's error), which a caller may retry.
func (b *bus) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		if b.closed {
			<-b.sem
			return fmt.Errorf("bus %s: %w: %w", b.key, lockctl.ErrUnreachable, errClosed)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for bus %s: %w: nothing was sent: %w", b.key, lockctl.ErrUnreachable, ctx.Err())
	}
}

func (b *bus) release() { <-b.sem }

var errClosed = errors.New("controller closed")

// connect opens the link if it is not open (the bus is held).
func (b *bus) connect(ctx context.Context) (*conn, error) {
	if b.conn != nil {
		select {
		case <-b.conn.dead:
			_ = b.conn.rwc.Close()
			b.conn = nil
		default:
			return b.conn, nil
		}
	}
	rwc, err := b.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", b.key, err)
	}
	c := &conn{rwc: rwc, in: make(chan []byte, 64), dead: make(chan struct{})}
	go c.readLoop()
	b.conn = c
	// Nothing written on an earlier link can be answered on this one.
	clear(b.boards)
	return c, nil
}

// drop closes the link; the next exchange opens it again.
func (b *bus) drop() {
	if b.conn != nil {
		_ = b.conn.rwc.Close()
		b.conn = nil
	}
}

func (b *bus) close() {
	b.sem <- struct{}{}
	defer func() { <-b.sem }()
	b.closed = true
	b.drop()
}

func (c *conn) readLoop() {
	defer close(c.dead)
	idle := 0
	for {
		p := make([]byte, 256)
		n, err := c.rwc.Read(p)
		if n > 0 {
			idle = 0
			select {
			case c.in <- p[:n]:
			case <-time.After(time.Second):
				// Nobody has read for a second: the bytes are stale anyway.
			}
		}
		if err != nil {
			c.err = err
			return
		}
		if n == 0 {
			if idle++; idle > 1000 {
				c.err = io.ErrUnexpectedEOF
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Errors of one exchange (all of them communication failures).
var (
	errNoAnswer      = errors.New("no answer")
	errCorruptAnswer = errors.New("corrupt answer (checksum or end byte)")
	errPartialAnswer = errors.New("partial answer")
	errLinkDown      = errors.New("link dropped")
	errUnsure        = errors.New("the board owes answers to frames given up on; its answers cannot be told apart yet")
)

func (b *bus) board(addr byte) *boardState {
	st, ok := b.boards[addr]
	if !ok {
		st = &boardState{}
		b.boards[addr] = st
	}
	return st
}

// inStep reports whether board answered the last frame written to it on this link.
func (b *bus) inStep(board int) bool {
	st, ok := b.boards[byte(board)]
	return ok && st.inStep
}

// behind reports whether board owes answers: its next answer comes after theirs.
func (b *bus) behind(board int) bool {
	st, ok := b.boards[byte(board)]
	return ok && len(st.pending) > 0
}

// giveUp drops a board's oldest pending frame without its answer (to free its tag):
// that answer may still come, so for late the board's answers are not trusted.
func (st *boardState) giveUp(now time.Time, late time.Duration) {
	st.pending = st.pending[1:]
	st.unsureUntil = now.Add(late)
}

// tag picks a status read's tag that no pending frame of the board carries.
func (st *boardState) tag() byte {
	for range CU16MaxLocks {
		t := st.nextTag
		st.nextTag = (st.nextTag + 1) % CU16MaxLocks
		if !slices.ContainsFunc(st.pending, func(p pendingFrame) bool { return p.cmd.Lock == t }) {
			return t
		}
	}
	return st.nextTag // unreachable: at most maxPending frames are pending
}

// late takes a late answer's frame, and the frames written before it (handled by
// the board in order, their answers lost), off the board's pending list.
func (b *bus) late(a Answer) {
	st, ok := b.boards[a.Board]
	if !ok {
		return
	}
	for i, p := range st.pending {
		if p.cmd.Cmd == a.Cmd && p.cmd.Lock == a.Lock {
			st.pending = st.pending[i+1:]
			return
		}
	}
}

// takeLate takes the whole answers in buf as late ones.
func (b *bus) takeLate(buf []byte) {
	for {
		a, used, ok, _ := b.codec.DecodeAnswer(buf)
		if !ok {
			return
		}
		b.late(a)
		buf = buf[used:]
	}
}

// matcher is how an exchange tells its command's answer from the answers to other
// frames: by the status read's tag (tagged, CU16) or by the boards' order of
// answering (ordered.go, CU48). exchange is the one loop both run in.
type matcher interface {
	// before takes the answers that arrived before the command, and says whether the
	// command may be sent: done with an answer when it need not be (nothing sent), an
	// error when it may not be.
	before(buf []byte, cmd Command, now time.Time) (a Answer, done bool, err error)
	// register records the command as written to its board (giving a status read its tag).
	register(cmd *Command, now time.Time)
	// take takes one whole answer met while waiting; true when it is the command's.
	take(a Answer, cmd Command) bool
	// damaged takes a damaged frame of the command's board; true when it was the
	// command's answer (the exchange fails with errCorruptAnswer).
	damaged(cmd Command) bool
	// timedOut takes what was left in the buffer when the wait ran out.
	timedOut(buf []byte, cmd Command)
}

// tagged matches by tag: an answer with the command's board, command and lock nibble
// is its own, and every other answer is a late one.
type tagged struct{ b *bus }

func (m tagged) before(buf []byte, cmd Command, now time.Time) (Answer, bool, error) {
	// Whatever arrived before the command is late; a frame cut short here stays
	// pending until a later answer of its board settles it.
	m.b.takeLate(buf)
	if now.Before(m.b.board(cmd.Board).unsureUntil) {
		return Answer{}, false, errUnsure
	}
	return Answer{}, false, nil
}

func (m tagged) register(cmd *Command, now time.Time) {
	st := m.b.board(cmd.Board)
	if cmd.Cmd == m.b.codec.StatusCmd() {
		cmd.Lock = st.tag()
	}
	if len(st.pending) >= maxPending {
		st.giveUp(now, m.b.lateAnswer)
	}
	st.pending = append(st.pending, pendingFrame{cmd: *cmd})
	st.inStep = false
}

func (m tagged) take(a Answer, cmd Command) bool {
	if a.Board == cmd.Board && a.Cmd == cmd.Cmd && a.Lock == cmd.Lock {
		st := m.b.board(cmd.Board)
		st.pending, st.inStep = nil, true
		return true
	}
	m.b.late(a)
	return false
}

func (m tagged) damaged(cmd Command) bool {
	// The board answered this frame (after every earlier one); the bytes were damaged.
	st := m.b.board(cmd.Board)
	st.pending, st.inStep = nil, true
	return true
}

func (tagged) timedOut([]byte, Command) {}

// exchange sends cmd and waits up to timeout for its answer (the bus is held). On a
// tagged bus a status read is given its tag here; answers already waiting, and answers
// to other frames met while waiting, are late ones (b.late). On an ordered bus, after
// asks for the state after an unlock whose answer was lost (ordered.go). sent reports
// whether any of cmd may have reached the wire: an error with sent false left the
// boards untouched.
func (b *bus) exchange(ctx context.Context, cmd Command, timeout time.Duration, after bool) (a Answer, sent bool, err error) {
	var m matcher = tagged{b}
	if !b.codec.Tagged() {
		m = ordered{b, after}
	}
	c, err := b.connect(ctx)
	if err != nil {
		return Answer{}, false, err
	}
	for drained := false; !drained; {
		select {
		case p := <-c.in:
			c.buf = append(c.buf, p...)
		default:
			drained = true
		}
	}
	now := time.Now()
	a, done, err := m.before(c.buf, cmd, now)
	c.buf = c.buf[:0]
	if done || err != nil {
		return a, false, err
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, false, err
	}
	m.register(&cmd, now)
	if _, err := c.rwc.Write(b.codec.EncodeCommand(cmd)); err != nil {
		b.drop()
		return Answer{}, true, fmt.Errorf("write to %s: %w: %w", b.key, errLinkDown, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		for {
			a, used, ok, skip := b.codec.DecodeAnswer(c.buf)
			if !ok {
				if b.codec.Answered(c.buf, cmd, false) {
					c.buf = c.buf[:0]
					if m.damaged(cmd) {
						return Answer{}, true, errCorruptAnswer
					}
					continue
				}
				c.buf = c.buf[skip:]
				break
			}
			c.buf = c.buf[used:]
			if m.take(a, cmd) {
				return a, true, nil
			}
		}
		select {
		case p := <-c.in:
			c.buf = append(c.buf, p...)
		case <-c.dead:
			b.drop()
			return Answer{}, true, fmt.Errorf("read from %s: %w: %w", b.key, errLinkDown, c.err)
		case <-t.C:
			partial := len(c.buf) > 0
			m.timedOut(c.buf, cmd)
			c.buf = c.buf[:0]
			if partial {
				return Answer{}, true, errPartialAnswer
			}
			return Answer{}, true, errNoAnswer
		case <-ctx.Done():
			return Answer{}, true, ctx.Err()
		}
	}
}

// corruptAnswer reports whether buf starts (after noise) with a whole frame that
// carries the awaited address and command but fails its end byte or checksum: the
// board answered and the bytes were damaged, so there is no use waiting longer.
func corruptAnswer(buf []byte, cmd Command) bool {
	for i := 0; i+CU16AnswerLen <= len(buf); i++ {
		if buf[i] == stx && buf[i+1] == cmd.Board<<4|cmd.Lock&0x0F && buf[i+2] == cmd.Cmd {
			return true
		}
	}
	return false
}
