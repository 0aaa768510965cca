package kerongemu

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

// Board names one board: the bus it is on and its address.
type Board struct {
	Bus     *Emulator
	Address int
}

// Place is where a locker's lock is wired: a board and a lock number (1–16, 1–48 on a
// CU48 board).
type Place struct {
	Board
	Lock int
}

// Control is the /sim/* API over emulated buses, in the simulator's shape, so the
// demo, the drills and the tests drive an emulated gateway as they drive a
// simulated one. The local-API fault modes (unreachable, hang, http_500, slow) are
// the simulator's own: Local applies them; the controller modes become bus faults.
type Control struct {
	Local       *simctl.Sim
	Controllers map[string][]Board // controller id → its boards
	Lockers     map[int]Place      // locker id → its lock

	faults simctl.Faults
}

// Extra fault modes, beyond the simulator's, that name a bus fault directly.
var busModes = func() map[simctl.Mode]FaultKind {
	m := map[simctl.Mode]FaultKind{}
	for _, k := range Kinds {
		m[simctl.Mode(k)] = k
	}
	return m
}()

// controllerModes maps the simulator's controller-level modes onto bus faults.
var controllerModes = map[simctl.Mode]FaultKind{
	simctl.ModeHardwareFault:         FaultJammed,
	simctl.ModeControllerUnreachable: FaultBoardAbsent,
	simctl.ModeControllerHang:        FaultBoardAbsent,
	simctl.ModeControllerSlow:        FaultSlowAnswer,
	simctl.ModeFlaky:                 FaultDropUnlock,
}

const maxDelay = 10 * time.Minute

// SetFaults applies a /sim/faults setting: one mode at a time, "none" clears all.
func (c *Control) SetFaults(f simctl.Faults) error {
	if f.Mode == "" {
		f.Mode = simctl.ModeNone
	}
	kind, isBus := busModes[f.Mode]
	if k, ok := controllerModes[f.Mode]; ok {
		kind, isBus = k, true
	}
	local := slices.Contains(simctl.Modes, f.Mode) && !isBus
	switch {
	case !isBus && !local:
		return fmt.Errorf("%w: unknown mode %q", simctl.ErrInvalidFaults, f.Mode)
	case f.DelayMs < 0 || time.Duration(f.DelayMs)*time.Millisecond > maxDelay:
		return fmt.Errorf("%w: delayMs must be between 0 and %d", simctl.ErrInvalidFaults, maxDelay.Milliseconds())
	case f.Failures < 0 || f.Failures > 1000:
		return fmt.Errorf("%w: failures must be between 0 and 1000", simctl.ErrInvalidFaults)
	case f.ControllerID != "" && c.Controllers[f.ControllerID] == nil:
		return fmt.Errorf("%w: unknown controllerId %q", simctl.ErrInvalidFaults, f.ControllerID)
	}
	localF := simctl.Faults{Mode: simctl.ModeNone}
	if local {
		localF = simctl.Faults{Mode: f.Mode, DelayMs: f.DelayMs}
	}
	if c.Local != nil {
		if err := c.Local.SetFaults(localF); err != nil {
			return err
		}
	}
	bf := Fault{}
	if isBus {
		bf = Fault{Kind: kind, Delay: time.Duration(f.DelayMs) * time.Millisecond, Count: f.Failures}
		if f.Mode == simctl.ModeFlaky && f.Failures == 0 {
			bf = Fault{} // the simulator's flaky with no failures is no fault
		}
	}
	for id, boards := range c.Controllers {
		for _, b := range boards {
			bff := Fault{}
			if f.ControllerID == "" || id == f.ControllerID {
				bff = bf
			}
			if err := b.Bus.SetFault(b.Address, bff); err != nil {
				return err
			}
		}
	}
	c.faults = f
	return nil
}

// Handler serves the /sim/* API:
//
//	POST   /sim/faults                   {"mode", "delayMs", "failures", "controllerId"} → 200 the setting; bad input → 400
//	GET    /sim/faults                   → the current setting
//	GET    /sim/stats                    → {"opens": {"<lockerId>": pulses}, "requests": n, "frames": n}
//	DELETE /sim/stats                    → 204, counters zeroed
//	GET    /sim/doors                    → {"<lockerId>": {"open": bool, "itemInside": bool}}
//	POST   /sim/lockers/{lockerId}/close {"itemInside": bool} → 200 {"lockerId", "doorOpen": false, "itemInside"}
//	POST   /sim/lockers/{lockerId}/force-open → 200 {"lockerId", "doorOpen": true}: the door opened by hand, no pulse
//
// Modes: the simulator's (simctl.Modes; hardware_fault is a jammed lock, controller_unreachable
// and controller_hang an absent board, controller_slow a slow answer, flaky dropped unlocks)
// and the bus faults by name (no_answer, corrupt_checksum, partial_frame, slow_answer,
// board_absent, jammed, noise, drop_unlock; failures limits them to that many frames).
func (c *Control) Handler() http.Handler {
	if c.faults.Mode == "" {
		c.faults.Mode = simctl.ModeNone
	}
	var mu chanMutex = make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sim/faults", func(w http.ResponseWriter, r *http.Request) {
		var f simctl.Faults
		if !simctl.DecodeBody(w, r, &f) {
			return
		}
		mu.lock()
		defer mu.unlock()
		if err := c.SetFaults(f); err != nil {
			simctl.WriteError(w, http.StatusBadRequest, "INVALID_FAULTS", err.Error())
			return
		}
		simctl.WriteJSON(w, http.StatusOK, c.faults)
	})
	mux.HandleFunc("GET /sim/faults", func(w http.ResponseWriter, _ *http.Request) {
		mu.lock()
		defer mu.unlock()
		simctl.WriteJSON(w, http.StatusOK, c.faults)
	})
	mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		simctl.WriteJSON(w, http.StatusOK, c.Stats())
	})
	mux.HandleFunc("DELETE /sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		c.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /sim/doors", func(w http.ResponseWriter, _ *http.Request) {
		type doorJSON struct {
			Open       bool `json:"open"`
			ItemInside bool `json:"itemInside"`
		}
		out := make(map[string]doorJSON, len(c.Lockers))
		for id, p := range c.Lockers {
			open, item, _ := p.Bus.Door(p.Address, p.Lock)
			out[strconv.Itoa(id)] = doorJSON{Open: open, ItemInside: item}
		}
		simctl.WriteJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /sim/lockers/{lockerId}/close", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("lockerId"))
		p, ok := c.Lockers[id]
		if err != nil || !ok {
			simctl.WriteError(w, http.StatusNotFound, "LOCKER_NOT_FOUND", "no such locker")
			return
		}
		var body struct {
			ItemInside bool `json:"itemInside"`
		}
		if !simctl.DecodeBody(w, r, &body) {
			return
		}
		p.Bus.CloseDoor(p.Address, p.Lock, body.ItemInside)
		simctl.WriteJSON(w, http.StatusOK, map[string]any{"lockerId": id, "doorOpen": false, "itemInside": body.ItemInside})
	})
	mux.HandleFunc("POST /sim/lockers/{lockerId}/force-open", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("lockerId"))
		p, ok := c.Lockers[id]
		if err != nil || !ok || !p.Bus.ForceOpen(p.Address, p.Lock) {
			simctl.WriteError(w, http.StatusNotFound, "LOCKER_NOT_FOUND", "no such locker")
			return
		}
		simctl.WriteJSON(w, http.StatusOK, map[string]any{"lockerId": id, "doorOpen": true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		simctl.WriteError(w, http.StatusNotFound, "NOT_FOUND", "no such simulator operation")
	})
	return mux
}

// Stats is the body of GET /sim/stats.
type Stats struct {
	// Opens counts lock pulses per locker id (every locker listed).
	Opens map[string]int `json:"opens"`
	// Requests counts local-API requests received (health probes excluded).
	Requests int64 `json:"requests"`
	// Frames counts the command frames the boards received.
	Frames int `json:"frames"`
}

// Stats returns the counters.
func (c *Control) Stats() Stats {
	st := Stats{Opens: make(map[string]int, len(c.Lockers))}
	if c.Local != nil {
		st.Requests = c.Local.Stats().Requests
	}
	buses := map[*Emulator]bool{}
	for id, p := range c.Lockers {
		st.Opens[strconv.Itoa(id)] = p.Bus.Pulses(p.Address, p.Lock)
		if !buses[p.Bus] {
			buses[p.Bus] = true
			st.Frames += p.Bus.Frames()
		}
	}
	return st
}

// ResetStats zeroes every counter.
func (c *Control) ResetStats() {
	if c.Local != nil {
		c.Local.ResetStats()
	}
	done := map[*Emulator]bool{}
	for _, p := range c.Lockers {
		if !done[p.Bus] {
			done[p.Bus] = true
			p.Bus.ResetCounters()
		}
	}
}

type chanMutex chan struct{}

func (m chanMutex) lock()   { m <- struct{}{} }
func (m chanMutex) unlock() { <-m }
