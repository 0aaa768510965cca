// Package lockctl is the lock-controller driver contract of a gateway: a lock
// controller drives the door locks (channels) of one bank of lockers, reads their
// door sensors and reports its own health.
//
// A driver reports a failure to talk to the controller (cable, bus, timeout) as an
// error wrapping ErrUnreachable, which a caller may retry, and a fault the
// controller itself reports (jammed bolt, blown coil) as an error wrapping
// ErrHardwareFault, which a caller must not retry: trying again could actuate a
// damaged lock twice.
package lockctl

import (
	"context"
	"errors"
)

var (
	// ErrUnreachable means the controller could not be talked to; the command
	// was not carried out and may be retried.
	ErrUnreachable = errors.New("lock controller unreachable")
	// ErrHardwareFault means the controller answered and reported a fault; the
	// command must not be retried.
	ErrHardwareFault = errors.New("lock controller reported a hardware fault")
	// ErrUnknownChannel means the controller has no such channel.
	ErrUnknownChannel = errors.New("unknown lock channel")
)

// Controller is one lock controller. Implementations are safe for concurrent use
// and honour ctx: a call whose ctx ends returns ctx.Err() (wrapped) and, for Open,
// does not actuate the lock afterwards.
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

// Retryable reports whether err is a communication failure, the only kind of
// failure a door open may be retried on.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrHardwareFault)
}
