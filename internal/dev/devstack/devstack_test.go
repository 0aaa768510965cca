package devstack

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEmbeddedTemporalPort(t *testing.T) {
	tests := []struct {
		name         string
		address      string // TEMPORAL_ADDRESS
		port         string // LOCKERNET_TEMPORAL_PORT
		wantAddr     string
		wantEmbedded bool
	}{
		{name: "default", wantAddr: "127.0.0.1:7233", wantEmbedded: true},
		{name: "moved", port: "9233", wantAddr: "127.0.0.1:9233", wantEmbedded: true},
		{name: "external cluster wins", address: "temporal.internal:7233", port: "9233", wantAddr: "temporal.internal:7233"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TEMPORAL_ADDRESS", tt.address)
			t.Setenv("LOCKERNET_TEMPORAL_PORT", tt.port)
			s, err := LoadSettings()
			require.NoError(t, err)
			assert.Equal(t, tt.wantAddr, s.TemporalAddress)
			assert.Equal(t, tt.wantEmbedded, !s.TemporalIsSet)
		})
	}
}

func TestBusyEmbeddedTemporalPortNamesItsSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port

	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("LOCKERNET_TEMPORAL_PORT", strconv.Itoa(busy))
	for _, name := range []string{"LOCKERNET_API_ADDR", "LOCKERNET_WORKER_ADDR", "LOCKERNET_TOWERSIM_ADDR",
		"LOCKERNET_GW1_ADDR", "LOCKERNET_GW1_SIM_ADDR", "LOCKERNET_GW2_ADDR", "LOCKERNET_GW2_SIM_ADDR"} {
		t.Setenv(name, "127.0.0.1:0") // any free port, so only the busy one can fail
	}
	t.Setenv("LOCKERNET_TEMPORAL_UI_PORT", "0")
	s, err := LoadSettings()
	require.NoError(t, err)
	err = checkPorts(s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LOCKERNET_TEMPORAL_PORT")
}

// GW-0002 drives its bank through the Kerong driver over a pty to the bus emulator;
// GW-0001 stays on the simulated controllers.
func TestGW0002RunsOnTheKerongEmulator(t *testing.T) {
	s, err := LoadSettings()
	require.NoError(t, err)
	children := simChildren(s)
	args := map[string][]string{}
	for _, c := range children {
		args[c.name] = c.args
	}
	assert.Contains(t, args["gw-0002"], "-kerong-emulator")
	assert.Contains(t, args["gw-0002"], "-simulated")
	assert.NotContains(t, args["gw-0001"], "-kerong-emulator")
}
