// Package buildcheck holds checks on how the binaries are put together.
package buildcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shipped is what cmd/ holds: the production binaries, each a thin main. The dev tools
// (devstack, lockernet-drill, lockernet-bench) are under internal/dev/cmd.
var shipped = []string{"apiserver", "gateway", "lockernet-admin", "towersim", "worker"}

// cmd/ holds the shipped binaries and nothing else, and make build builds each of them.
func TestCmdHoldsTheShippedBinariesOnly(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	assert.Equal(t, shipped, dirs, "cmd/ is what ships; dev tools belong in internal/dev/cmd")

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^PROD_CMDS := (.*)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile names the production binaries in PROD_CMDS")
	prod := strings.Fields(string(m[1]))
	slices.Sort(prod)
	assert.Equal(t, shipped, prod, "make build builds every binary of cmd/")
}

// The production binaries must not link the Temporal server (only the dev tools and the
// tests embed it), nor the dev-only simulators; only the admin tool (its seed command) links
// the demo data.
func TestProductionBinariesDoNotLinkDevOnlyCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// internal/dev/ is the dev and test rigs (devstack, devtemporal, testenv, the dev tools …).
	forbidden := []string{"go.temporal.io/server", "github.com/temporalio/ui-server", "github.com/lockernet/lockernet/internal/dev/"}
	for _, cmd := range shipped {
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
