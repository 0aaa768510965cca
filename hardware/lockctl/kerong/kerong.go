// Package kerong drives Kerong CU16 and CU48 lock control boards (KR-CU16, KR-CU48
// and their network variants) as lockctl controllers: several boards of one model by
// address on one RS-485 bus (a serial port, 8N1) or behind one TCP link.
// docs/hardware.md has the frames, their public sources and the wiring.
//
// One request at a time per bus, each answer awaited for a per-frame timeout. A read
// whose answer is missing, partial or corrupt is asked again a bounded number of
// times (reads do not move anything). An unlock is never sent twice by the driver:
// when its answer is lost, the door is read back first; a door that reads open is the
// pulse done (success), latched (read after the unlock) is lockctl.ErrUnreachable, and
// no read-back is lockctl.ErrOutcomeUnknown, with the lock marked so that the next
// unlock of it reads the door back before it pulses again.
// A board that answers an unlock with the lock still latched reports a jammed lock:
// lockctl.ErrHardwareFault. A link that drops (port unplugged, TCP reset) is opened
// again by the next request.
//
// CU16 answers are matched to their frames by a tag the board echoes (bus.go); CU48
// answers carry none and are matched by their order (ordered.go), so a CU48 read
// whose answer is missing is not asked again at once, and a CU48 board that owes an
// answer is sent nothing for a while.
package kerong

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// Buses hands out controllers, one per bank, sharing a bus between the banks wired
// to the same port. Close it to close every link.
type Buses struct {
	mu    sync.Mutex
	buses map[string]*bus
	specs map[string]Settings
}

// NewBuses returns an empty set of buses.
func NewBuses() *Buses { return &Buses{buses: map[string]*bus{}, specs: map[string]Settings{}} }

// Controller returns the controller id driven through the controller URL rawURL
// (see Settings). Controllers on the same port share its bus and must agree on its
// settings; no two may claim the same board.
func (bs *Buses) Controller(id, rawURL string) (*Controller, error) {
	s, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	key := s.busKey()
	b, ok := bs.buses[key]
	if ok {
		prev := bs.specs[key]
		if prev.Model != s.Model {
			return nil, fmt.Errorf("controller %s: %s already carries %s boards and this controller names %s ones: "+
				"a bus carries one model (the sources do not say how a board treats the other model's frames)",
				id, s.Port, strings.ToUpper(string(prev.Model)), strings.ToUpper(string(s.Model)))
		}
		if prev.Baud != s.Baud && s.Transport == TransportSerial {
			return nil, fmt.Errorf("controller %s: %s is already used at %d baud", id, s.Port, prev.Baud)
		}
		for _, n := range s.Boards {
			for _, m := range prev.Boards {
				if n == m {
					return nil, fmt.Errorf("controller %s: board %d on %s is already another controller's", id, n, s.Port)
				}
			}
		}
		prev.Boards = slices.Concat(prev.Boards, s.Boards)
		bs.specs[key] = prev
	} else {
		b = newBus(s)
		bs.buses[key] = b
		bs.specs[key] = s
	}
	return &Controller{id: id, s: s, bus: b}, nil
}

// Close closes every link.
func (bs *Buses) Close() {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, b := range bs.buses {
		b.close()
	}
}

// Controller is one bank's boards on a bus.
type Controller struct {
	id  string
	s   Settings
	bus *bus
}

var _ lockctl.Controller = (*Controller)(nil)

// ID implements lockctl.Controller.
func (c *Controller) ID() string { return c.id }

// Settings returns what the controller's URL said.
func (c *Controller) Settings() Settings { return c.s }

// Kind is the layout kind of the controller's model (Kind or KindCU48).
func (c *Controller) Kind() string { return KindOf(c.s.Model) }

// Describe names the controller: model, transport, port and board addresses.
func (c *Controller) Describe() string {
	boards := make([]string, len(c.s.Boards))
	for i, n := range c.s.Boards {
		boards[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("Kerong %s over %s %s, boards %s", strings.ToUpper(string(c.s.Model)), c.s.Transport, c.s.Port,
		strings.Join(boards, ","))
}

func unreachable(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, lockctl.ErrUnreachable, err)
}

// lockKey names a lock of the bus in bus.unresolved.
func lockKey(board, lock int) int { return board<<8 | lock }

// readBoard reads a board's status, asking again after a missing or damaged answer
// (the bus is held). A board that owes answers to earlier frames answers them first,
// so its answer is awaited as long as an unlock's. The answer is the read's own
// (tagged, or matched by order): the board handled every frame written to it before.
// after is the read-back of an unlock whose answer was lost: any answer the board
// sends after the unlock will do (ordered.go).
func (c *Controller) readBoard(ctx context.Context, board int, after bool) (Answer, error) {
	what := fmt.Sprintf("read board %d on %s", board, c.s.Port)
	var last error
	for try := 0; try <= c.s.Rereads; try++ {
		timeout := c.s.FrameTimeout
		if c.bus.behind(board) {
			timeout = max(timeout, c.s.OpenTimeout)
		}
		a, sent, err := c.bus.read(ctx, byte(board), timeout, after)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			return Answer{}, unreachable(what, ctx.Err())
		}
		last = err
		if !sent {
			break // the link cannot be opened, or the board's answers cannot be trusted yet
		}
	}
	return Answer{}, unreachable(fmt.Sprintf("%s (%d tries)", what, c.s.Rereads+1), last)
}

// Open implements lockctl.Controller.
//
// The unlock is written only to a board in step (it answered the last frame written
// to it), so that whatever it answers next comes after the unlock. A board not in
// step, and a lock whose last unlock went unconfirmed, are read first; an
// unconfirmed lock whose door reads open is the open done, without a pulse. When
// the unlock's answer is lost, the door is read back: open is the pulse done; the
// lock read latched (by the read's own answer, so after the unlock) is
// lockctl.ErrUnreachable, which may be retried; no read-back is
// lockctl.ErrOutcomeUnknown, and the lock stays unconfirmed.
func (c *Controller) Open(ctx context.Context, channel int) error {
	board, lock, ok := c.s.locate(channel)
	if !ok {
		return fmt.Errorf("open channel %d: %w", channel, lockctl.ErrUnknownChannel)
	}
	what := fmt.Sprintf("open channel %d (board %d lock %d)", channel, board, lock)
	if err := c.bus.acquire(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer c.bus.release()

	key := lockKey(board, lock)
	if unconfirmed := c.bus.unresolved[key]; unconfirmed || !c.bus.inStep(board) {
		a, err := c.readBoard(ctx, board, false)
		switch {
		case err != nil && unconfirmed:
			return fmt.Errorf("%s: reading the door back after an unconfirmed unlock (nothing sent): %w", what, err)
		case err != nil:
			return fmt.Errorf("%s: reading the board before the unlock (nothing sent): %w", what, err)
		}
		delete(c.bus.unresolved, key)
		if unconfirmed && !a.Latched(lock) {
			return nil // the earlier unlock went through; only its answer was lost
		}
	}
	// Never actuate for a caller that has already given up.
	if err := ctx.Err(); err != nil {
		return unreachable(what+" (nothing sent)", err)
	}
	cmd := Command{Board: byte(board), Lock: byte(lock - 1), Cmd: c.bus.codec.UnlockCmd()}
	a, sent, err := c.bus.exchange(ctx, cmd, c.s.OpenTimeout, false)
	switch {
	case err == nil && a.Latched(lock):
		return fmt.Errorf("%s: the board pulsed the lock and it still reads latched (jammed bolt or broken coil): %w",
			what, lockctl.ErrHardwareFault)
	case err == nil:
		return nil
	case !sent:
		return unreachable(what+" (nothing sent)", err)
	}
	// The unlock went out and its answer did not come back: the lock may have
	// pulsed. Never send it again blind.
	c.bus.unresolved[key] = true
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w: the unlock went out and the call ended before its answer: %w",
			what, lockctl.ErrOutcomeUnknown, ctx.Err())
	}
	back, rerr := c.readBoard(ctx, board, true)
	switch {
	case rerr != nil:
		return fmt.Errorf("%s: %w: the unlock went out and its answer was lost (%v); the door could not be read back: %v",
			what, lockctl.ErrOutcomeUnknown, err, rerr)
	case !back.Latched(lock):
		delete(c.bus.unresolved, key)
		return nil // the pulse went through; only its answer was lost
	}
	// The board read the lock latched after it handled the unlock: it did not move.
	delete(c.bus.unresolved, key)
	return fmt.Errorf("%s: %w: %w; the board reads the lock latched after it", what, lockctl.ErrUnreachable, err)
}

// Doors implements lockctl.Controller.
func (c *Controller) Doors(ctx context.Context) (map[int]lockctl.Door, error) {
	if err := c.bus.acquire(ctx); err != nil {
		return nil, fmt.Errorf("read door sensors: %w", err)
	}
	defer c.bus.release()
	out := make(map[int]lockctl.Door, c.s.Channels())
	n := c.bus.codec.Locks()
	for i, board := range c.s.Boards {
		a, err := c.readBoard(ctx, board, false)
		if err != nil {
			return nil, fmt.Errorf("read door sensors: %w", err)
		}
		for lock := 1; lock <= n; lock++ {
			out[i*n+lock] = lockctl.Door{Open: !a.Latched(lock), ItemInside: a.ItemInside(lock)}
		}
	}
	return out, nil
}

// Status implements lockctl.Controller: online when every board of the bank
// answers. None of the public sources of the CU16 and CU48 protocols gives a
// firmware query; the version is left empty.
func (c *Controller) Status(ctx context.Context) (lockctl.Status, error) {
	if err := c.bus.acquire(ctx); err != nil {
		return lockctl.Status{}, fmt.Errorf("read status: %w", err)
	}
	defer c.bus.release()
	var errs []error
	for _, board := range c.s.Boards {
		if _, err := c.readBoard(ctx, board, false); err != nil {
			if ctx.Err() != nil {
				return lockctl.Status{}, fmt.Errorf("read status: %w", ctx.Err())
			}
			errs = append(errs, err)
		}
	}
	if len(errs) == len(c.s.Boards) {
		return lockctl.Status{}, fmt.Errorf("read status: %w", errors.Join(errs...))
	}
	return lockctl.Status{Online: len(errs) == 0}, nil
}
