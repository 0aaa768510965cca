// Package kerong drives Kerong CU16 lock control boards (KR-CU16 and its network
// variants) as lockctl controllers: several boards by address on one RS-485 bus (a
// serial port, 8N1) or behind one TCP link. docs/hardware.md has the frames, their
// public sources and the wiring.
//
// One request at a time per bus, each answer awaited for a per-frame timeout. A read
// whose answer is missing, partial or corrupt is asked again a bounded number of
// times (reads do not move anything). An unlock is never sent twice by the driver:
// when its answer is lost, the door is read back first; a door that reads open is the
// pulse done (success), anything else is lockctl.ErrUnreachable, and the lock stays
// marked so that the next unlock of it reads the door back before it pulses again.
// A board that answers an unlock with the lock still latched reports a jammed lock:
// lockctl.ErrHardwareFault. A link that drops (port unplugged, TCP reset) is opened
// again by the next request.
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

// Describe names the controller: model, transport, port and board addresses.
func (c *Controller) Describe() string {
	boards := make([]string, len(c.s.Boards))
	for i, n := range c.s.Boards {
		boards[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("Kerong CU16 over %s %s, boards %s", c.s.Transport, c.s.Port, strings.Join(boards, ","))
}

func unreachable(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, lockctl.ErrUnreachable, err)
}

// readBoard reads a board's status, asking again after a missing or damaged answer
// (the bus is held).
func (c *Controller) readBoard(ctx context.Context, board int) (Answer, error) {
	cmd := Command{Board: byte(board), Cmd: CmdStatus}
	var last error
	for try := 0; try <= c.s.Rereads; try++ {
		a, err := c.bus.exchange(ctx, cmd, c.s.FrameTimeout)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		last = err
	}
	return Answer{}, unreachable(fmt.Sprintf("read board %d on %s (%d tries)", board, c.s.Port, c.s.Rereads+1), last)
}

// Open implements lockctl.Controller.
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

	key := byte(board<<4 | (lock - 1))
	if c.bus.unresolved[key] {
		// The last unlock of this lock got no answer: it may have pulsed. Read the
		// door before anything else; an open door is what was asked for.
		a, err := c.readBoard(ctx, board)
		if err != nil {
			return fmt.Errorf("%s: reading back after an unanswered unlock: %w", what, err)
		}
		delete(c.bus.unresolved, key)
		if !a.Latched(lock) {
			return nil
		}
	}
	// Never actuate for a caller that has already given up.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	cmd := Command{Board: byte(board), Lock: byte(lock - 1), Cmd: CmdUnlock}
	a, err := c.bus.exchange(ctx, cmd, c.s.OpenTimeout)
	if err == nil {
		if a.Latched(lock) {
			return fmt.Errorf("%s: the board pulsed the lock and it still reads latched (jammed bolt or broken coil): %w",
				what, lockctl.ErrHardwareFault)
		}
		return nil
	}
	// The unlock went out and its answer did not come back: the lock may have
	// pulsed. Never send it again blind.
	c.bus.unresolved[key] = true
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	back, rerr := c.readBoard(ctx, board)
	switch {
	case rerr != nil:
		return fmt.Errorf("%s: %w: %w; door not read back: %w", what, lockctl.ErrUnreachable, err, rerr)
	case !back.Latched(lock):
		delete(c.bus.unresolved, key)
		return nil // the pulse went through; only its answer was lost
	}
	delete(c.bus.unresolved, key)
	return fmt.Errorf("%s: %w: %w; the door reads back closed", what, lockctl.ErrUnreachable, err)
}

// Doors implements lockctl.Controller.
func (c *Controller) Doors(ctx context.Context) (map[int]lockctl.Door, error) {
	if err := c.bus.acquire(ctx); err != nil {
		return nil, fmt.Errorf("read door sensors: %w", err)
	}
	defer c.bus.release()
	out := make(map[int]lockctl.Door, c.s.Channels())
	for i, board := range c.s.Boards {
		a, err := c.readBoard(ctx, board)
		if err != nil {
			return nil, fmt.Errorf("read door sensors: %w", err)
		}
		for lock := 1; lock <= MaxLocks; lock++ {
			out[i*MaxLocks+lock] = lockctl.Door{Open: !a.Latched(lock), ItemInside: a.ItemInside(lock)}
		}
	}
	return out, nil
}

// Status implements lockctl.Controller: online when every board of the bank
// answers. The CU16 protocol has no firmware query; the version is left empty.
func (c *Controller) Status(ctx context.Context) (lockctl.Status, error) {
	if err := c.bus.acquire(ctx); err != nil {
		return lockctl.Status{}, fmt.Errorf("read status: %w", err)
	}
	defer c.bus.release()
	var errs []error
	for _, board := range c.s.Boards {
		if _, err := c.readBoard(ctx, board); err != nil {
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
