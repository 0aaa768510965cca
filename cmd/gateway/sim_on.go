//go:build simcontrol

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

// simOptions wires the simulator control API (dev builds: -tags simcontrol).
type simOptions struct {
	addr string
}

func (o *simOptions) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.addr, "sim-addr", getenv("LOCKERNET_GATEWAY_SIM_ADDR"),
		"simulator control address, e.g. 127.0.0.1:9101 (empty = off) (env LOCKERNET_GATEWAY_SIM_ADDR)")
}

// start serves /sim/* on its own address and puts the fault listener and
// middleware in front of the local API.
func (o *simOptions) start(ctx context.Context, sim *simctl.Sim, ln net.Listener, h http.Handler, logger *slog.Logger) (net.Listener, http.Handler, <-chan struct{}, error) {
	if o.addr == "" {
		return ln, h, nil, nil
	}
	simLn, err := net.Listen("tcp", o.addr)
	if err != nil {
		return ln, h, nil, fmt.Errorf("listen on %s for the simulator control: %w", o.addr, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gateway.Serve(ctx, simLn, sim.ControlHandler(), logger); err != nil {
			logger.Error("simulator control stopped", "err", err)
		}
	}()
	logger.Info("simulator control listening", "addr", simLn.Addr().String())
	return sim.Listener(ln), sim.Middleware(h), done, nil
}
