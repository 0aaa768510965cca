package workflows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Recorded histories of real runs live in testdata/. A change to a workflow that would break
// the runs in flight fails its replay test; re-record (LOCKERNET_RECORD_HISTORIES=1) only for
// a change made behind workflow.GetVersion, and keep the old files.

// replayHistories replays each recorded history against wf registered under name.
func replayHistories(t *testing.T, wf any, name string, files []string) {
	t.Helper()
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			rp := sdkworker.NewWorkflowReplayer()
			rp.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: name})
			require.NoError(t, rp.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", file)))
		})
	}
}

// requireReplayFails checks that changed, registered under name, does not replay file: the
// replay tests would catch such a change.
func requireReplayFails(t *testing.T, changed any, name, file string) {
	t.Helper()
	rp := sdkworker.NewWorkflowReplayer()
	rp.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: name})
	require.Error(t, rp.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", file)))
}

// recordHistories skips the test unless LOCKERNET_RECORD_HISTORIES=1.
func recordHistories(t *testing.T) {
	t.Helper()
	if os.Getenv("LOCKERNET_RECORD_HISTORIES") != "1" {
		t.Skip("set LOCKERNET_RECORD_HISTORIES=1 to record testdata histories")
	}
}

// writeHistory writes the history of a finished run to testdata/file.
func writeHistory(ctx context.Context, t *testing.T, c client.Client, r client.WorkflowRun, file string) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, r.GetID(), r.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", file), append(b, '\n'), 0o644))
}
