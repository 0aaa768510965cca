package simctl

import (
	"sync"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// Door is a simulated locker door: its sensors as a controller reports them, and the timer
// that shuts it again after a pulse. The simulated controllers and the Kerong bus emulator
// both keep their doors so, each under its own mutex.
type Door struct {
	lockctl.Door
	timer *time.Timer
}

// Pulse springs the door open. With closeAfter above zero, and its owner not stopped, it
// shuts itself that long later unless it was pulsed, shut or forced open in between. mu is
// the owner's mutex: the caller holds it, the close takes it.
func (d *Door) Pulse(mu *sync.Mutex, closeAfter time.Duration, stopped bool) {
	d.Open = true
	d.StopClose()
	if closeAfter <= 0 || stopped {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(closeAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if d.timer == t {
			d.Open = false
			d.timer = nil
		}
	})
	d.timer = t
}

// Shut closes the door by hand, as a customer would, with or without an item inside.
func (d *Door) Shut(itemInside bool) {
	d.Open, d.ItemInside = false, itemInside
	d.StopClose()
}

// ForceOpen opens the door with no pulse of its lock, as a door pried open would be; it
// stays open until shut.
func (d *Door) ForceOpen() {
	d.Open = true
	d.StopClose()
}

// StopClose cancels the door's pending close, if any.
func (d *Door) StopClose() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
