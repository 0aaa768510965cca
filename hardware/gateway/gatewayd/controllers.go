package gatewayd

import (
	"fmt"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
)

// simulatedKind is the controller kind of a simulated bank.
const simulatedKind = "simulated"

// controllers builds the controller of every bank: the simulated ones as the build
// allows (simOptions), the others from their kind and address. It returns the layout
// as the gateway reports it (an emulated bank names its driver and pseudo-terminal).
func controllers(c *Config, layout gateway.Layout, buses *kerong.Buses) (gateway.Layout, []lockctl.Controller, error) {
	layout, ctls, err := c.sim.controllers(*c, layout)
	if err != nil {
		return layout, nil, err
	}
	done := map[string]bool{}
	for _, ctl := range ctls {
		done[ctl.ID()] = true
	}
	for _, b := range layout.Banks {
		if done[b.Controller.ID] {
			continue
		}
		ctl, err := kerongController(b, buses)
		if err != nil {
			return layout, nil, err
		}
		ctls = append(ctls, ctl)
	}
	return layout, ctls, nil
}

// kerongController drives a bank that is not simulated: its controller must be a Kerong
// board (or boards) of the kind its address names, with a channel for every locker.
func kerongController(b gateway.BankSpec, buses *kerong.Buses) (*kerong.Controller, error) {
	spec := b.Controller
	if spec.Kind == simulatedKind {
		return nil, fmt.Errorf("bank %d: controller %s is simulated: this gateway needs -simulated (LOCKERNET_GATEWAY_SIMULATED=true) "+
			"and a simcontrol build to run it, or a real controller in the layout (kind %q, address kerong+serial://... or kerong+tcp://...)",
			b.ID, spec.ID, kerong.Kind)
	}
	if !kerong.IsKind(spec.Kind) || !kerong.IsControllerURL(spec.Address) {
		return nil, fmt.Errorf("bank %d: controller %s: kind %q at %q has no driver (want kind %q or %q with a kerong+serial:// or kerong+tcp:// address)",
			b.ID, spec.ID, spec.Kind, spec.Address, kerong.Kind, kerong.KindCU48)
	}
	ctl, err := buses.Controller(spec.ID, spec.Address)
	if err != nil {
		return nil, fmt.Errorf("bank %d: %w", b.ID, err)
	}
	if ctl.Kind() != spec.Kind {
		return nil, fmt.Errorf("bank %d: controller %s: kind %q and address %q name different models (model=%s; kind %q goes with it)",
			b.ID, spec.ID, spec.Kind, spec.Address, ctl.Settings().Model, ctl.Kind())
	}
	for _, lk := range b.Lockers {
		if lk.Channel > ctl.Settings().Channels() {
			return nil, fmt.Errorf("bank %d: locker %d is on channel %d, and boards %v drive channels 1-%d",
				b.ID, lk.LockerID, lk.Channel, ctl.Settings().Boards, ctl.Settings().Channels())
		}
	}
	return ctl, nil
}
