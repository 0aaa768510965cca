//go:build !simcontrol

package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/http"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

// simOptions is empty in production builds: no -sim-addr, no /sim/*, no fault
// injection on the local API.
type simOptions struct{}

func (*simOptions) register(*flag.FlagSet, func(string) string) {}

func (*simOptions) start(_ context.Context, _ *simctl.Sim, ln net.Listener, h http.Handler, _ *slog.Logger) (net.Listener, http.Handler, <-chan struct{}, error) {
	return ln, h, nil, nil
}
