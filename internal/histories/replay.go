package histories

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/lockernet/lockernet/worker"
)

// Result is one history's replay.
type Result struct {
	File         string
	WorkflowType string
	Events       int
	// Err is why the history does not replay (the code decides otherwise than the run
	// did, its workflow type is no longer registered, the file is no history); nil when
	// the current code makes every decision the run made.
	Err error
}

// Report is the replay of every history of a folder, in the order of their paths.
type Report struct{ Results []Result }

// Failed is the histories that did not replay.
func (r Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Err != nil {
			out = append(out, res)
		}
	}
	return out
}

// ReplayDir replays every *.json history under dir (its subfolders too) against the
// workflows the worker registers, the way workflows/replay_test.go does, one at a time.
// A file that does not replay is reported in its Result; the error is for a folder that
// cannot be read or holds no history, so that replaying nothing never passes for a check.
// logger receives the SDK's own messages (nil: none).
func ReplayDir(dir string, logger *slog.Logger) (Report, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("read histories in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return Report{}, fmt.Errorf("replay histories: no *.json history under %s", dir)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sdkLogger := sdklog.NewStructuredLogger(logger)
	// WalkDir visits a folder's entries in lexical order: the report is in the paths' order.
	rep := Report{Results: make([]Result, 0, len(files))}
	for _, f := range files {
		rep.Results = append(rep.Results, replayFile(f, sdkLogger))
	}
	return rep, nil
}

// replayFile replays one history with a replayer of its own, as the replay test does.
func replayFile(file string, logger sdklog.Logger) Result {
	res := Result{File: file}
	h, err := ReadFile(file)
	if err != nil {
		res.Err = err
		return res
	}
	res.Events = len(h.GetEvents())
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		res.Err = errors.New("the history does not begin with its workflow's start")
		return res
	}
	res.WorkflowType = started.GetWorkflowType().GetName()
	rp := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(rp)
	if err := rp.ReplayWorkflowHistory(logger, h); err != nil {
		res.Err = fmt.Errorf("replay: %w", err)
	}
	return res
}

// ReadFile reads a history in Temporal's JSON form (as Export writes it and the replay
// tests keep them); a history without events is an error.
func ReadFile(file string) (*historypb.History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	if len(h.GetEvents()) == 0 {
		return nil, errors.New("decode history: no events")
	}
	return h, nil
}
