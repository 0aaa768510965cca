// Package simctl simulates the lock controllers of a gateway, and the faults a
// dev or test environment needs to inject into a gateway: per-controller faults
// (unreachable, hang, reported hardware fault, slow, flaky) and, for the
// gateway's local API, connection-level and HTTP-level faults (§9 of the design).
//
// A Sim is a set of simulated controllers wired to locker ids. It counts real
// door actuations per locker, so a test can prove that a retry never opened a
// door twice. Its ControlHandler serves the dev-only /sim/* API; Middleware and
// Listener apply the local-API fault modes to the gateway's HTTP server.
package simctl

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// DefaultFirmwareVersion is what simulated controllers report.
const DefaultFirmwareVersion = "sim-2.4.1"

// ControllerFault is the kind of fault a simulated controller injects.
type ControllerFault string

// Controller-level faults.
const (
	// ControllerOK is normal behaviour.
	ControllerOK ControllerFault = ""
	// ControllerUnreachable fails every call with lockctl.ErrUnreachable.
	ControllerUnreachable ControllerFault = "unreachable"
	// ControllerHang blocks every call until its ctx is done.
	ControllerHang ControllerFault = "hang"
	// ControllerHardwareFault fails door opens with lockctl.ErrHardwareFault;
	// sensor and status reads still work.
	ControllerHardwareFault ControllerFault = "hardware_fault"
	// ControllerSlow delays door opens by Fault.Delay (on top of the latency).
	ControllerSlow ControllerFault = "slow"
	// ControllerFlaky fails the next Fault.Failures door opens with
	// lockctl.ErrUnreachable, then behaves normally.
	ControllerFlaky ControllerFault = "flaky"
)

// Fault configures a simulated controller's fault injection.
type Fault struct {
	Kind     ControllerFault
	Delay    time.Duration
	Failures int
}

// ControllerConfig describes one simulated controller.
type ControllerConfig struct {
	ID              string
	FirmwareVersion string
	// Channels are the lock channels the controller drives.
	Channels []int
	// Latency is how long every command takes.
	Latency time.Duration
	// DoorCloseAfter closes a door that way after it opened; zero leaves doors
	// open until closed by hand (CloseDoor).
	DoorCloseAfter time.Duration
}

// door is a channel's door and how many times its lock was pulsed.
type door struct {
	Door
	opens int
}

// Controller is a simulated lock controller.
type Controller struct {
	cfg ControllerConfig

	mu       sync.Mutex
	doors    map[int]*door
	fault    Fault
	attempts int
	closed   bool
}

var _ lockctl.Controller = (*Controller)(nil)

// NewController returns a simulated controller with every door closed and no fault.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.FirmwareVersion == "" {
		cfg.FirmwareVersion = DefaultFirmwareVersion
	}
	c := &Controller{cfg: cfg, doors: make(map[int]*door, len(cfg.Channels))}
	for _, ch := range cfg.Channels {
		c.doors[ch] = &door{}
	}
	return c
}

// ID implements lockctl.Controller.
func (c *Controller) ID() string { return c.cfg.ID }

// SetFault replaces the controller's fault injection.
func (c *Controller) SetFault(f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = f
}

// Fault returns the controller's current fault injection (Failures counts down).
func (c *Controller) Fault() Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fault
}

// Open implements lockctl.Controller. Only a successful open actuates the lock and
// is counted.
func (c *Controller) Open(ctx context.Context, channel int) error {
	c.mu.Lock()
	c.attempts++
	f := c.fault
	if f.Kind == ControllerFlaky && c.fault.Failures > 0 {
		c.fault.Failures--
	}
	_, known := c.doors[channel]
	c.mu.Unlock()

	if !known {
		return fmt.Errorf("open channel %d: %w", channel, lockctl.ErrUnknownChannel)
	}
	if err := busFault(ctx, f, fmt.Sprintf("open channel %d", channel)); err != nil {
		return err
	}
	switch f.Kind {
	case ControllerHardwareFault:
		return fmt.Errorf("open channel %d: lock coil open circuit: %w", channel, lockctl.ErrHardwareFault)
	case ControllerFlaky:
		if f.Failures > 0 {
			return fmt.Errorf("open channel %d: checksum error on the bus: %w", channel, lockctl.ErrUnreachable)
		}
	}
	wait := c.cfg.Latency
	if f.Kind == ControllerSlow {
		wait += f.Delay
	}
	if err := lockctl.Sleep(ctx, wait); err != nil {
		return fmt.Errorf("open channel %d: %w", channel, err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	// The command may have been cancelled while we held no lock: never actuate
	// for a caller that has already given up.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("open channel %d: %w", channel, err)
	}
	d := c.doors[channel]
	d.opens++
	d.Pulse(&c.mu, c.cfg.DoorCloseAfter, c.closed)
	return nil
}

// Doors implements lockctl.Controller.
func (c *Controller) Doors(ctx context.Context) (map[int]lockctl.Door, error) {
	if err := c.commFault(ctx, "read door sensors"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]lockctl.Door, len(c.doors))
	for ch, d := range c.doors {
		out[ch] = d.Door.Door
	}
	return out, nil
}

// Status implements lockctl.Controller.
func (c *Controller) Status(ctx context.Context) (lockctl.Status, error) {
	if err := c.commFault(ctx, "read status"); err != nil {
		return lockctl.Status{}, err
	}
	return lockctl.Status{Online: true, FirmwareVersion: c.cfg.FirmwareVersion}, nil
}

// busFault is the error of the command what under the fault f when f takes the bus
// down (no answer, or a hang until ctx ends), and nil under any other fault.
func busFault(ctx context.Context, f Fault, what string) error {
	switch f.Kind {
	case ControllerUnreachable:
		return fmt.Errorf("%s: no answer on the bus: %w", what, lockctl.ErrUnreachable)
	case ControllerHang:
		<-ctx.Done()
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	return nil
}

// commFault applies the faults that affect every command (not only opens).
func (c *Controller) commFault(ctx context.Context, what string) error {
	c.mu.Lock()
	f := c.fault
	c.mu.Unlock()
	if err := busFault(ctx, f, what); err != nil {
		return err
	}
	if err := lockctl.Sleep(ctx, c.cfg.Latency); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// CloseDoor closes a door by hand, as a customer would, with or without an item
// inside. It reports false for an unknown channel.
func (c *Controller) CloseDoor(channel int, itemInside bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.doors[channel]
	if !ok {
		return false
	}
	d.Shut(itemInside)
	return true
}

// ForceOpen opens a door without a pulse of its lock (not counted as an actuation), as a
// door pried open would be; it stays open until CloseDoor. It reports false for an unknown
// channel.
func (c *Controller) ForceOpen(channel int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.doors[channel]
	if !ok {
		return false
	}
	d.ForceOpen()
	return true
}

// Opens returns the number of real actuations per channel.
func (c *Controller) Opens() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]int, len(c.doors))
	for ch, d := range c.doors {
		out[ch] = d.opens
	}
	return out
}

// Attempts returns how many open commands the controller received, successful
// or not.
func (c *Controller) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// ResetCounters zeroes the actuation and attempt counters.
func (c *Controller) ResetCounters() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts = 0
	for _, d := range c.doors {
		d.opens = 0
	}
}

// Channels returns the controller's channels in ascending order.
func (c *Controller) Channels() []int {
	out := append([]int(nil), c.cfg.Channels...)
	sort.Ints(out)
	return out
}

// stop cancels pending automatic door closes.
func (c *Controller) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, d := range c.doors {
		d.StopClose()
	}
}
