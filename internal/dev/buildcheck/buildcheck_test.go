// Package buildcheck holds checks on how the binaries are put together.
package buildcheck

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The production binaries must not link the Temporal server (only the dev entrypoint and the
// tests embed it), nor the dev-only simulators; only the admin tool (its seed command) links
// the demo data.
func TestProductionBinariesDoNotLinkDevOnlyCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{"go.temporal.io/server", "github.com/temporalio/ui-server", "github.com/lockernet/lockernet/internal/dev/devstack",
		"github.com/lockernet/lockernet/internal/dev/devtemporal", "github.com/lockernet/lockernet/internal/dev/testenv"}
	for _, cmd := range []string{"apiserver", "worker", "gateway", "lockernet-admin"} {
		t.Run(cmd, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "github.com/lockernet/lockernet/cmd/"+cmd).CombinedOutput()
			require.NoError(t, err, string(out))
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range forbidden {
					assert.False(t, strings.HasPrefix(dep, f), "%s links %s", cmd, dep)
				}
				// The demo data belongs to the dev stack and the admin tool's seed command.
				if cmd != "lockernet-admin" {
					assert.NotEqual(t, "github.com/lockernet/lockernet/internal/seed", dep, "%s links the demo seed", cmd)
				}
			}
		})
	}
}

// The production gateway drives real lock controllers: it links the Kerong driver and
// its serial library, and neither the simulator nor the bus emulator (they are in the
// simcontrol build, which links both).
func TestProductionGatewayLinksTheRealDriverOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := func(tags ...string) map[string]bool {
		args := []string{"list", "-deps"}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		out, err := exec.Command("go", append(args, "github.com/lockernet/lockernet/cmd/gateway")...).CombinedOutput()
		require.NoError(t, err, string(out))
		m := map[string]bool{}
		for _, dep := range strings.Fields(string(out)) {
			m[dep] = true
		}
		return m
	}
	const (
		driver   = "github.com/lockernet/lockernet/hardware/lockctl/kerong"
		serial   = "go.bug.st/serial"
		simctl   = "github.com/lockernet/lockernet/hardware/lockctl/simctl"
		emulator = "github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
		pty      = "github.com/creack/pty"
	)
	prod := deps()
	assert.True(t, prod[driver], "the production gateway links the Kerong driver")
	assert.True(t, prod[serial], "and the serial library")
	for _, dev := range []string{simctl, emulator, pty} {
		assert.False(t, prod[dev], "the production gateway links %s", dev)
	}
	dev := deps("simcontrol")
	for _, p := range []string{driver, serial, simctl, emulator} {
		assert.True(t, dev[p], "the simcontrol gateway links %s", p)
	}
}
