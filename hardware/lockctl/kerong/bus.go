package kerong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.bug.st/serial"
)

// bus is one RS-485 line (a serial port) or one TCP link to a network board: the
// boards on it answer one request at a time, so every exchange holds the bus.
type bus struct {
	key  string
	open func(ctx context.Context) (io.ReadWriteCloser, error)

	sem  chan struct{} // held for a whole exchange (half-duplex)
	conn *conn         // nil until opened, and again after the link dropped
	// unresolved holds the locks (board<<4|lock-1) whose last unlock got no answer:
	// before anything pulses them again, their door is read back.
	unresolved map[byte]bool
	closed     bool
}

// conn is an open link and the bytes read from it.
type conn struct {
	rwc  io.ReadWriteCloser
	in   chan []byte
	dead chan struct{} // closed when the reader stops (link dropped or closed)
	err  error         // why the reader stopped; read after dead is closed
	buf  []byte
}

func newBus(s Settings) *bus {
	b := &bus{key: s.busKey(), sem: make(chan struct{}, 1), unresolved: map[byte]bool{}}
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

// acquire takes the bus, or gives up when ctx ends.
func (b *bus) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		if b.closed {
			<-b.sem
			return fmt.Errorf("bus %s: %w", b.key, errClosed)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
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
)

// exchange sends cmd and waits up to timeout for its answer (the bus is held). Bytes
// that arrived before the command are stale and dropped; answers to other commands
// (a late answer to an earlier one) are skipped.
func (b *bus) exchange(ctx context.Context, cmd Command, timeout time.Duration) (Answer, error) {
	c, err := b.connect(ctx)
	if err != nil {
		return Answer{}, err
	}
	c.buf = c.buf[:0]
	for drained := false; !drained; {
		select {
		case <-c.in:
		default:
			drained = true
		}
	}
	if _, err := c.rwc.Write(cmd.Encode()); err != nil {
		b.drop()
		return Answer{}, fmt.Errorf("write to %s: %w: %w", b.key, errLinkDown, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		for {
			a, used, ok, skip := DecodeAnswer(c.buf)
			if !ok {
				if corrupt := corruptAnswer(c.buf, cmd); corrupt {
					c.buf = c.buf[:0]
					return Answer{}, errCorruptAnswer
				}
				c.buf = c.buf[skip:]
				break
			}
			c.buf = c.buf[used:]
			if a.Board == cmd.Board && a.Cmd == cmd.Cmd && (cmd.Cmd != CmdUnlock || a.Lock == cmd.Lock) {
				return a, nil
			}
		}
		select {
		case p := <-c.in:
			c.buf = append(c.buf, p...)
		case <-c.dead:
			b.drop()
			return Answer{}, fmt.Errorf("read from %s: %w: %w", b.key, errLinkDown, c.err)
		case <-t.C:
			if len(c.buf) > 0 {
				c.buf = c.buf[:0]
				return Answer{}, errPartialAnswer
			}
			return Answer{}, errNoAnswer
		case <-ctx.Done():
			return Answer{}, ctx.Err()
		}
	}
}

// corruptAnswer reports whether buf starts (after noise) with a whole frame that
// carries the awaited address and command but fails its end byte or checksum: the
// board answered and the bytes were damaged, so there is no use waiting longer.
func corruptAnswer(buf []byte, cmd Command) bool {
	for i := 0; i+AnswerLen <= len(buf); i++ {
		if buf[i] == stx && buf[i+1] == cmd.Board<<4|cmd.Lock&0x0F && buf[i+2] == cmd.Cmd {
			return true
		}
	}
	return false
}
