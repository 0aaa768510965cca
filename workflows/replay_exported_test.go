package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	// Named apart: the recorded histories' table of replay_test.go is called histories.
	exported "github.com/lockernet/lockernet/internal/histories"
)

// testdata/exported holds histories exported from a running system with
// `lockernet-admin histories export` (docs/runbook.md, "Replay what runs"): runs driven through
// the APIs, closed ones and runs still in flight, where the histories of TestReplay are runs the
// tests recorded. Each must replay on the workflows the worker registers; a change that breaks
// one goes behind workflow.GetVersion, as for the recorded histories, and the file stays.
func TestReplayExportedHistories(t *testing.T) {
	rep, err := exported.ReplayDir(filepath.Join("testdata", "exported"), nil)
	require.NoError(t, err)
	for _, r := range rep.Results {
		assert.NoError(t, r.Err, "%s (%s) does not replay", r.File, r.WorkflowType)
		assert.Equal(t, r.WorkflowType, filepath.Base(filepath.Dir(r.File)), "%s is filed under its workflow type", r.File)
	}
}
