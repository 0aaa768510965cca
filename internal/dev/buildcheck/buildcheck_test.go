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
