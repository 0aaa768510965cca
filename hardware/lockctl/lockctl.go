// Package lockctl is the lock-controller driver contract of a gateway: a lock
// controller drives the door locks (channels) of one bank of lockers, reads their
// door sensors and reports its own health.
//
// A driver reports a failure to talk to the controller (cable, bus, timeout) as an
// error wrapping ErrUnreachable, which a caller may retry, and a fault the
// controller itself reports (jammed bolt, blown coil) as an error wrapping
// ErrHardwareFault, which a caller must not retry: trying again could actuate a
// damaged lock twice.
//
// An open has a third way to fail: the command went out to the controller (so the
// lock may have pulsed) and neither its answer nor a read-back of the door confirms
// what happened. The driver reports it as an error wrapping ErrOutcomeUnknown, and a
// caller must not open that lock again blind for the same request: it reads the door
// first, and a door that reads open is the open done. A driver reports
// ErrUnreachable only when it knows the lock did not move (nothing was sent, or the
// board read the lock back latched after the command), which is why a retry on it is
// safe.
package lockctl

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrUnreachable means the controller could not be talked to; the command
	// was not carried out and may be retried.
	ErrUnreachable = errors.New("lock controller unreachable")
	// ErrHardwareFault means the controller answered and reported a fault; the
	// command must not be retried.
	ErrHardwareFault = errors.New("lock controller reported a hardware fault")
	// ErrOutcomeUnknown means an open was sent and its outcome is not known: the
	// lock may have pulsed. It is not retried as a fresh open; the door is read
	// first.
	ErrOutcomeUnknown = errors.New("lock controller did not confirm the open")
	// ErrUnknownChannel means the controller has no such channel.
	ErrUnknownChannel = errors.New("unknown lock channel")
)

// Controller is one lock controller. Implementations are safe for concurrent use
// and honour ctx: a call whose ctx ends returns ctx.Err() (wrapped) and, for Open,
// does not actuate the lock afterwards. A call whose ctx ends before it sent
// anything wraps ErrUnreachable as well (a retry is safe); an Open whose ctx ends
// after its command went out wraps ErrOutcomeUnknown.
type Controller interface {
	// ID is the controller's identifier within its gateway (as in the layout).
	ID() string
	// Open pulses the lock of channel so that its door springs open.
	Open(ctx context.Context, channel int) error
	// Doors reads the door sensors of every channel.
	Doors(ctx context.Context) (map[int]Door, error)
	// Status reads the controller's health.
	Status(ctx context.Context) (Status, error)
}

// Door is what the sensors of one channel report.
type Door struct {
	Open bool
	// ItemInside is the presence sensor; false where the bank has none.
	ItemInside bool
}

// Status is a controller's self-report.
type Status struct {
	Online          bool
	FirmwareVersion string
}

// Retryable reports whether err is a communication failure that left the lock
// unmoved, the only kind of failure a door open may be retried on.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrHardwareFault) && !errors.Is(err, ErrOutcomeUnknown)
}

// Sleep waits d, or less when ctx ends first: then it returns ctx's error. It is the pause
// between a driver's or the gateway's attempts, and a simulated command's latency.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
