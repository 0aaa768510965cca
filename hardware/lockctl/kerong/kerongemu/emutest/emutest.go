// Package emutest serves the Kerong bus emulator, and the buses that drive it, to
// tests.
package emutest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
)

// ServePTY makes an emulator from cfg and serves it on a pseudo-terminal; the
// emulator is closed when the test ends.
func ServePTY(t testing.TB, cfg kerongemu.Config) (*kerongemu.Emulator, *kerongemu.PTY) {
	t.Helper()
	emu, err := kerongemu.New(cfg)
	require.NoError(t, err)
	t.Cleanup(emu.Close)
	p, err := emu.ServePTY()
	require.NoError(t, err)
	return emu, p
}

// Buses is a set of buses closed when the test ends.
func Buses(t testing.TB) *kerong.Buses {
	t.Helper()
	bs := kerong.NewBuses()
	t.Cleanup(bs.Close)
	return bs
}
