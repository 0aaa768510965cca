package simctl

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// Mode is a simulator fault mode as set through POST /sim/faults.
type Mode string

// Fault modes. The first six are the contract of the design (§9); the cloud maps
// them to its terminal states. The controller_* and flaky modes exist for the
// gateway's own retry-policy tests.
const (
	// ModeNone is normal behaviour.
	ModeNone Mode = "none"
	// ModeUnreachable refuses connections to the local API (the listener is
	// closed and open connections are reset) until the mode changes.
	ModeUnreachable Mode = "unreachable"
	// ModeHang accepts local-API requests and never answers until the client
	// gives up or the mode changes.
	ModeHang Mode = "hang"
	// ModeHTTP500 answers every local-API request 500 INTERNAL_ERROR.
	ModeHTTP500 Mode = "http_500"
	// ModeHardwareFault makes every door open report a hardware fault.
	ModeHardwareFault Mode = "hardware_fault"
	// ModeSlow delays every local-API request by DelayMs, then handles it.
	ModeSlow Mode = "slow"
	// ModeControllerUnreachable makes the lock controllers unreachable (every
	// command fails with a communication error; the gateway retries opens).
	ModeControllerUnreachable Mode = "controller_unreachable"
	// ModeControllerHang makes the lock controllers hang on every command.
	ModeControllerHang Mode = "controller_hang"
	// ModeControllerSlow delays door opens at the controllers by DelayMs.
	ModeControllerSlow Mode = "controller_slow"
	// ModeFlaky makes each controller fail its next Failures door opens with a
	// communication error, then succeed.
	ModeFlaky Mode = "flaky"
)

// Modes lists every mode the simulator accepts.
var Modes = []Mode{
	ModeNone, ModeUnreachable, ModeHang, ModeHTTP500, ModeHardwareFault, ModeSlow,
	ModeControllerUnreachable, ModeControllerHang, ModeControllerSlow, ModeFlaky,
}

// maxDelay bounds delayMs so a typo cannot wedge a dev stack for days.
const maxDelay = 10 * time.Minute

// ErrInvalidFaults is returned by SetFaults for settings it cannot apply.
var ErrInvalidFaults = errors.New("invalid fault settings")

// Faults is the simulator's fault setting (the body of POST /sim/faults).
type Faults struct {
	Mode Mode `json:"mode"`
	// DelayMs is the delay of the slow modes.
	DelayMs int `json:"delayMs"`
	// Failures is how many opens fail per controller in flaky mode.
	Failures int `json:"failures"`
	// ControllerID restricts the controller-level modes (hardware_fault,
	// controller_*, flaky) to one controller; empty means all.
	ControllerID string `json:"controllerId,omitempty"`
}

// Config configures a Sim.
type Config struct {
	// Latency is how long every controller command takes.
	Latency time.Duration
	// DoorCloseAfter closes a door that long after it opened; zero keeps doors
	// open until closed by hand.
	DoorCloseAfter time.Duration
	// FirmwareVersion reported by the controllers (DefaultFirmwareVersion if empty).
	FirmwareVersion string
}

type lockerRef struct {
	ctl     *Controller
	channel int
}

// Stats is the body of GET /sim/stats.
type Stats struct {
	// Opens counts real door actuations per locker id (every locker listed).
	Opens map[string]int `json:"opens"`
	// Requests counts local-API requests received (health probes excluded).
	Requests int64 `json:"requests"`
}

// Sim is the simulated hardware of one gateway plus its fault switches.
type Sim struct {
	controllers []*Controller
	byID        map[string]*Controller
	lockers     map[int]lockerRef

	requests atomic.Int64

	mu        sync.Mutex
	faults    Faults
	changed   chan struct{} // closed and replaced on every change of faults
	listeners []*faultListener
	closed    chan struct{}
	closeOnce sync.Once
}

// New builds a Sim from the wiring of a gateway: controller id → channel →
// locker id.
func New(cfg Config, wiring map[string]map[int]int) *Sim {
	s := &Sim{
		byID:    make(map[string]*Controller, len(wiring)),
		lockers: make(map[int]lockerRef),
		faults:  Faults{Mode: ModeNone},
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	ids := make([]string, 0, len(wiring))
	for id := range wiring {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		channels := make([]int, 0, len(wiring[id]))
		for ch := range wiring[id] {
			channels = append(channels, ch)
		}
		sort.Ints(channels)
		c := NewController(ControllerConfig{
			ID:              id,
			FirmwareVersion: cfg.FirmwareVersion,
			Channels:        channels,
			Latency:         cfg.Latency,
			DoorCloseAfter:  cfg.DoorCloseAfter,
		})
		s.controllers = append(s.controllers, c)
		s.byID[id] = c
		for ch, lockerID := range wiring[id] {
			s.lockers[lockerID] = lockerRef{ctl: c, channel: ch}
		}
	}
	return s
}

// Controllers returns the simulated controllers, ordered by id.
func (s *Sim) Controllers() []lockctl.Controller {
	out := make([]lockctl.Controller, len(s.controllers))
	for i, c := range s.controllers {
		out[i] = c
	}
	return out
}

// Controller returns the simulated controller with that id, or nil.
func (s *Sim) Controller(id string) *Controller { return s.byID[id] }

// SetFaults switches the fault mode. Every call replaces the previous setting
// entirely (one mode at a time); "none" clears everything.
func (s *Sim) SetFaults(f Faults) error {
	if f.Mode == "" {
		f.Mode = ModeNone
	}
	known := false
	for _, m := range Modes {
		known = known || m == f.Mode
	}
	switch {
	case !known:
		return fmt.Errorf("%w: unknown mode %q", ErrInvalidFaults, f.Mode)
	case f.DelayMs < 0 || time.Duration(f.DelayMs)*time.Millisecond > maxDelay:
		return fmt.Errorf("%w: delayMs must be between 0 and %d", ErrInvalidFaults, maxDelay.Milliseconds())
	case f.Failures < 0 || f.Failures > 1000:
		return fmt.Errorf("%w: failures must be between 0 and 1000", ErrInvalidFaults)
	case f.ControllerID != "" && s.byID[f.ControllerID] == nil:
		return fmt.Errorf("%w: unknown controllerId %q", ErrInvalidFaults, f.ControllerID)
	}

	delay := time.Duration(f.DelayMs) * time.Millisecond
	ctlFault := Fault{}
	switch f.Mode {
	case ModeHardwareFault:
		ctlFault = Fault{Kind: ControllerHardwareFault}
	case ModeControllerUnreachable:
		ctlFault = Fault{Kind: ControllerUnreachable}
	case ModeControllerHang:
		ctlFault = Fault{Kind: ControllerHang}
	case ModeControllerSlow:
		ctlFault = Fault{Kind: ControllerSlow, Delay: delay}
	case ModeFlaky:
		ctlFault = Fault{Kind: ControllerFlaky, Failures: f.Failures}
	}
	for _, c := range s.controllers {
		if f.ControllerID == "" || c.ID() == f.ControllerID {
			c.SetFault(ctlFault)
		} else {
			c.SetFault(Fault{})
		}
	}

	s.mu.Lock()
	s.faults = f
	close(s.changed)
	s.changed = make(chan struct{})
	listeners := append([]*faultListener(nil), s.listeners...)
	s.mu.Unlock()

	for _, l := range listeners {
		l.setReachable(f.Mode != ModeUnreachable)
	}
	return nil
}

// Faults returns the current fault setting.
func (s *Sim) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

func (s *Sim) state() (Faults, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults, s.changed
}

// Stats returns the actuation and request counters.
func (s *Sim) Stats() Stats {
	st := Stats{Opens: make(map[string]int, len(s.lockers)), Requests: s.requests.Load()}
	for lockerID, ref := range s.lockers {
		st.Opens[strconv.Itoa(lockerID)] = ref.ctl.Opens()[ref.channel]
	}
	return st
}

// Opens returns the real actuations of one locker.
func (s *Sim) Opens(lockerID int) int {
	ref, ok := s.lockers[lockerID]
	if !ok {
		return 0
	}
	return ref.ctl.Opens()[ref.channel]
}

// OpenAttempts returns the open commands all controllers received, successful
// or not.
func (s *Sim) OpenAttempts() int {
	n := 0
	for _, c := range s.controllers {
		n += c.Attempts()
	}
	return n
}

// ResetStats zeroes every counter.
func (s *Sim) ResetStats() {
	s.requests.Store(0)
	for _, c := range s.controllers {
		c.ResetCounters()
	}
}

// Door reports the sensors of a locker's door; ok is false for an unknown locker.
func (s *Sim) Door(lockerID int) (d lockctl.Door, ok bool) {
	ref, ok := s.lockers[lockerID]
	if !ok {
		return lockctl.Door{}, false
	}
	ref.ctl.mu.Lock()
	defer ref.ctl.mu.Unlock()
	dd := ref.ctl.doors[ref.channel]
	return dd.Door.Door, true
}

// CloseDoor closes a locker's door by hand; it reports false for an unknown locker.
func (s *Sim) CloseDoor(lockerID int, itemInside bool) bool {
	ref, ok := s.lockers[lockerID]
	if !ok {
		return false
	}
	return ref.ctl.CloseDoor(ref.channel, itemInside)
}

// ForceOpen opens a locker's door by hand with no open command, as a door pried open would
// be; it reports false for an unknown locker.
func (s *Sim) ForceOpen(lockerID int) bool {
	ref, ok := s.lockers[lockerID]
	if !ok {
		return false
	}
	return ref.ctl.ForceOpen(ref.channel)
}

// Close releases hanging requests and stops pending automatic door closes. The
// listeners handed out by Listener stay the caller's to close.
func (s *Sim) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		for _, c := range s.controllers {
			c.stop()
		}
	})
}
