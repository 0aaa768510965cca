package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// hardware is the gateway's view of its lock controllers: the last known door
// states and online flags, refreshed by every command and sensor read.
type hardware struct {
	timeout time.Duration
	banks   []*bank
	byCtl   map[string]*bank
}

type bank struct {
	spec BankSpec
	ctl  lockctl.Controller

	mu       sync.Mutex
	online   bool
	firmware string
	doors    map[int]lockctl.Door // by channel
}

func newHardware(l Layout, controllers []lockctl.Controller, timeout time.Duration) (*hardware, error) {
	byID := map[string]lockctl.Controller{}
	for _, c := range controllers {
		if _, dup := byID[c.ID()]; dup {
			return nil, fmt.Errorf("controller %q given twice", c.ID())
		}
		byID[c.ID()] = c
	}
	h := &hardware{timeout: timeout, byCtl: map[string]*bank{}}
	for _, b := range l.Banks {
		c, ok := byID[b.Controller.ID]
		if !ok {
			return nil, fmt.Errorf("no controller %q for bank %d", b.Controller.ID, b.ID)
		}
		delete(byID, b.Controller.ID)
		bk := &bank{spec: b, ctl: c, online: true, doors: map[int]lockctl.Door{}}
		h.banks = append(h.banks, bk)
		h.byCtl[b.Controller.ID] = bk
	}
	for id := range byID {
		return nil, fmt.Errorf("controller %q drives no bank of the layout", id)
	}
	return h, nil
}

// noteResult updates the online flag from a command's outcome: a
// communication failure or timeout means offline; any answer, a reported
// hardware fault included, means online.
func (b *bank) noteResult(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, lockctl.ErrHardwareFault):
		b.online = true
	case lockctl.Retryable(err), errors.Is(err, context.DeadlineExceeded):
		b.online = false
	}
}

func (b *bank) isOnline() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.online
}

func (b *bank) setDoor(channel int, open bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.doors[channel]
	d.Open = open
	b.doors[channel] = d
}

func (b *bank) door(channel int) lockctl.Door {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.doors[channel]
}

// refreshDoors reads every bank's door sensors concurrently, each within the
// sensor timeout; a bank that does not answer keeps its last known doors.
func (h *hardware) refreshDoors(ctx context.Context) {
	h.eachBank(ctx, func(rctx context.Context, _ int, b *bank) {
		doors, err := b.ctl.Doors(rctx)
		if ctx.Err() != nil {
			return // the caller left; this says nothing about the controller
		}
		b.noteResult(err)
		if err == nil {
			b.mu.Lock()
			b.doors = doors
			b.mu.Unlock()
		}
	})
}

// eachBank calls read for every bank concurrently, with a context ending after the
// sensor timeout, and waits until every call has returned.
func (h *hardware) eachBank(ctx context.Context, read func(rctx context.Context, i int, b *bank)) {
	var wg sync.WaitGroup
	for i, b := range h.banks {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, h.timeout)
			defer cancel()
			read(rctx, i, b)
		})
	}
	wg.Wait()
}

// controllerStatus is what /health and /system report of one controller.
type controllerStatus struct {
	bank     *bank
	online   bool
	firmware string
}

// status reads every controller's status concurrently within the sensor
// timeout.
func (h *hardware) status(ctx context.Context) []controllerStatus {
	out := make([]controllerStatus, len(h.banks))
	h.eachBank(ctx, func(rctx context.Context, i int, b *bank) {
		st, err := b.ctl.Status(rctx)
		if ctx.Err() == nil {
			b.noteResult(err)
		}
		b.mu.Lock()
		if err == nil {
			b.firmware = st.FirmwareVersion
			if !st.Online {
				b.online = false
			}
		}
		out[i] = controllerStatus{bank: b, online: b.online, firmware: b.firmware}
		b.mu.Unlock()
	})
	return out
}
