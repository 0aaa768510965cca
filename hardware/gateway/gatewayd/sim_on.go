//go:build simcontrol

package gatewayd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

// simOptions wires the simulated hardware of dev builds (-tags simcontrol): simulated
// controllers, or the Kerong bus emulator behind the real driver, and the /sim/*
// control API.
type simOptions struct {
	addr    string
	emulate bool

	sim         *simctl.Sim           // simulated controllers, or only the local-API faults when emulating
	control     http.Handler          // /sim/*
	buses       []*kerongemu.Emulator // emulated buses
	stopControl context.CancelFunc    // ends the /sim/* server (close)
}

func (o *simOptions) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.addr, "sim-addr", getenv("LOCKERNET_GATEWAY_SIM_ADDR"),
		"simulator control address, e.g. 127.0.0.1:9101 (empty = off) (env LOCKERNET_GATEWAY_SIM_ADDR)")
	emu, _ := strconv.ParseBool(getenv("LOCKERNET_GATEWAY_KERONG_EMULATOR"))
	fs.BoolVar(&o.emulate, "kerong-emulator", emu,
		"drive the simulated banks through the Kerong driver, each over a pseudo-terminal to an emulated bus of CU16 boards (env LOCKERNET_GATEWAY_KERONG_EMULATOR)")
}

// controllers builds the simulated banks' controllers: simulated ones, or (with
// -kerong-emulator) it rewrites each simulated bank into a Kerong bank on a
// pseudo-terminal of its own, boards 1, 2, … (16 channels each), for the caller to
// drive with the real driver.
func (o *simOptions) controllers(c Config, layout gateway.Layout) (gateway.Layout, []lockctl.Controller, error) {
	var simulated []int
	for i, b := range layout.Banks {
		if b.Controller.Kind == simulatedKind {
			simulated = append(simulated, i)
		}
	}
	if len(simulated) == 0 {
		return layout, nil, nil
	}
	if !c.Simulated {
		return layout, nil, nil // the caller refuses them
	}
	cfg := simctl.Config{Latency: c.ControllerLatency, DoorCloseAfter: c.DoorCloseAfter}
	if !o.emulate {
		wiring := map[string]map[int]int{}
		for _, i := range simulated {
			id := layout.Banks[i].Controller.ID
			wiring[id] = layout.Wiring()[id]
		}
		o.sim = simctl.New(cfg, wiring)
		o.control = o.sim.ControlHandler()
		return layout, o.sim.Controllers(), nil
	}

	o.sim = simctl.New(cfg, nil) // local-API faults and request counts only
	ctl := &kerongemu.Control{Local: o.sim, Controllers: map[string][]kerongemu.Board{}, Lockers: map[int]kerongemu.Place{}}
	banks := slices.Clone(layout.Banks)
	for _, i := range simulated {
		b := banks[i]
		maxCh := 1
		for _, lk := range b.Lockers {
			maxCh = max(maxCh, lk.Channel)
		}
		nBoards := (maxCh + kerong.CU16MaxLocks - 1) / kerong.CU16MaxLocks
		if nBoards > kerong.CU16MaxBoard {
			return layout, nil, fmt.Errorf("bank %d: channel %d needs more than %d emulated boards", b.ID, maxCh, kerong.CU16MaxBoard)
		}
		addrs := make([]int, nBoards)
		names := make([]string, nBoards)
		for j := range addrs {
			addrs[j] = j + 1
			names[j] = strconv.Itoa(j + 1)
		}
		emu, err := kerongemu.New(kerongemu.Config{Boards: addrs, DoorCloseAfter: c.DoorCloseAfter, Turnaround: c.ControllerLatency})
		if err != nil {
			return layout, nil, err
		}
		o.buses = append(o.buses, emu)
		p, err := emu.ServePTY()
		if err != nil {
			return layout, nil, err
		}
		for _, a := range addrs {
			ctl.Controllers[b.Controller.ID] = append(ctl.Controllers[b.Controller.ID], kerongemu.Board{Bus: emu, Address: a})
		}
		for _, lk := range b.Lockers {
			ctl.Lockers[lk.LockerID] = kerongemu.Place{Board: kerongemu.Board{Bus: emu, Address: addrs[(lk.Channel-1)/kerong.CU16MaxLocks]},
				Lock: (lk.Channel-1)%kerong.CU16MaxLocks + 1}
		}
		// The unlock's answer is awaited longer than an open attempt lasts, so the
		// gateway's attempt timeout bounds a slow board, as with the simulator.
		b.Controller.Kind = kerong.Kind
		b.Controller.Address = fmt.Sprintf("kerong+serial://%s?baud=%d&board=%s&opentimeout=%s",
			p.Path, kerong.DefaultBaud, strings.Join(names, ","), c.OpenAttemptTimeout+5*time.Second)
		banks[i] = b
	}
	layout.Banks = banks
	o.control = ctl.Handler()
	return layout, nil, nil
}

// start serves /sim/* on its own address and puts the fault listener and
// middleware in front of the local API. The control API outlives ctx, until close:
// the doors it counts are there while a stopping gateway finishes the opens in
// flight, and a fault drill reads their counters until the process ends.
func (o *simOptions) start(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) (net.Listener, http.Handler, <-chan struct{}, error) {
	if o.addr == "" {
		return ln, h, nil, nil
	}
	if o.sim == nil {
		return ln, h, nil, errors.New("-sim-addr: the layout has no simulated controllers (and -simulated is required for them)")
	}
	simLn, err := net.Listen("tcp", o.addr)
	if err != nil {
		return ln, h, nil, fmt.Errorf("listen on %s for the simulator control: %w", o.addr, err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	o.stopControl = stop
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gateway.Serve(sctx, simLn, o.control, logger); err != nil {
			logger.Error("simulator control stopped", "err", err)
		}
	}()
	logger.Info("simulator control listening", "addr", simLn.Addr().String(), "kerongEmulator", o.emulate)
	return o.sim.Listener(ln), o.sim.Middleware(h), done, nil
}

// close ends the control API, releases hanging requests, stops pending door closes and
// the emulated buses.
func (o *simOptions) close() {
	if o.stopControl != nil {
		o.stopControl()
	}
	if o.sim != nil {
		o.sim.Close()
	}
	for _, e := range o.buses {
		e.Close()
	}
}
