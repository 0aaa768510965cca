//go:build !simcontrol

package gatewayd

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
)

// simOptions is empty in production builds: no simulated controllers, no -sim-addr,
// no /sim/*, no fault injection on the local API, no bus emulator. The binary links
// the real drivers only.
type simOptions struct{}

func (*simOptions) register(*flag.FlagSet, func(string) string) {}

// controllers drives no bank: a simulated one is refused by the caller.
func (*simOptions) controllers(c Config, layout gateway.Layout) (gateway.Layout, []lockctl.Controller, error) {
	if c.Simulated {
		return layout, nil, errors.New("-simulated: this build has no simulated controllers (they are in builds made with -tags simcontrol); " +
			"a production gateway drives the real controllers its layout names")
	}
	return layout, nil, nil
}

func (*simOptions) start(_ context.Context, ln net.Listener, h http.Handler, _ *slog.Logger) (net.Listener, http.Handler, <-chan struct{}, error) {
	return ln, h, nil, nil
}

func (*simOptions) close() {}
