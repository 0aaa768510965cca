package histories

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// ExportOptions choose the executions Export writes.
type ExportOptions struct {
	// Dir receives <Dir>/<WorkflowType>/<workflow id>_<run id>.json; it is created if
	// missing, and files of other executions already in it are kept.
	Dir string
	// ClosedSince takes the executions closed within this long before now.
	ClosedSince time.Duration
	// PerType caps the closed executions taken of each workflow type, newest first, and
	// apart from them the running ones.
	PerType int
	// Running also takes the running executions, however long ago they started, with their
	// history so far: they are the runs a deploy replays first.
	Running bool
}

// Exported is one execution whose history Export wrote.
type Exported struct {
	WorkflowType string
	WorkflowID   string
	RunID        string
	// Status is the execution's status when it was listed (Running, Completed, ...).
	Status string
	Events int
	// File is where its history is, under ExportOptions.Dir.
	File string
}

// ExportResult is what Export wrote, and the running executions it left out because no
// workflow task of theirs has completed yet: such a history holds no decision of the code
// to check (and the replayer refuses a history that short).
type ExportResult struct {
	Written   []Exported
	Undecided []Exported
}

// Export lists, through Temporal's visibility API, the executions of every workflow type
// the worker registers that closed within opts.ClosedSince (and with opts.Running the
// running ones), up to opts.PerType of each per type, and writes each one's history.
func Export(ctx context.Context, c client.Client, opts ExportOptions) (ExportResult, error) {
	if opts.Dir == "" {
		return ExportResult{}, errors.New("export histories: no folder to write to")
	}
	if opts.PerType < 1 {
		return ExportResult{}, fmt.Errorf("export histories: %d executions per type is not a positive number", opts.PerType)
	}
	if opts.ClosedSince <= 0 {
		return ExportResult{}, fmt.Errorf("export histories: closed since %s is not a positive duration", opts.ClosedSince)
	}
	since := time.Now().Add(-opts.ClosedSince).UTC().Format(time.RFC3339Nano)
	var res ExportResult
	for _, wt := range WorkflowTypes() {
		queries := []string{fmt.Sprintf("WorkflowType = '%s' AND CloseTime >= '%s'", wt, since)}
		if opts.Running {
			queries = append(queries, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", wt))
		}
		for _, q := range queries {
			execs, err := listExecutions(ctx, c, q, opts.PerType)
			if err != nil {
				return res, err
			}
			for _, ex := range execs {
				e, decided, err := exportOne(ctx, c, opts.Dir, wt, ex)
				if err != nil {
					return res, err
				}
				if decided {
					res.Written = append(res.Written, e)
				} else {
					res.Undecided = append(res.Undecided, e)
				}
			}
		}
	}
	return res, nil
}

// listExecutions returns up to limit executions that match the visibility query.
func listExecutions(ctx context.Context, c client.Client, query string, limit int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for len(out) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: int32(min(limit-len(out), 1000)), NextPageToken: token, Query: query})
		if err != nil {
			return nil, fmt.Errorf("list workflow executions (%s): %w", query, err)
		}
		execs := resp.GetExecutions()
		out = append(out, execs[:min(len(execs), limit-len(out))]...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return out, nil
}

// exportOne writes the history of ex, unless no workflow task of it has completed yet
// (decided is false then, and nothing is written).
func exportOne(ctx context.Context, c client.Client, dir, workflowType string, ex *workflowpb.WorkflowExecutionInfo) (Exported, bool, error) {
	id, runID := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
	e := Exported{WorkflowType: workflowType, WorkflowID: id, RunID: runID, Status: ex.GetStatus().String()}
	h, err := readHistory(ctx, c, id, runID)
	if err != nil {
		return e, false, err
	}
	e.Events = len(h.GetEvents())
	if !hasCompletedTask(h) {
		return e, false, nil
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return e, false, fmt.Errorf("encode history of %s/%s: %w", id, runID, err)
	}
	folder := filepath.Join(dir, workflowType)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return e, false, fmt.Errorf("create %s: %w", folder, err)
	}
	e.File = filepath.Join(folder, FileName(id, runID))
	if err := os.WriteFile(e.File, append(b, '\n'), 0o644); err != nil {
		return e, false, fmt.Errorf("write history of %s/%s: %w", id, runID, err)
	}
	return e, true, nil
}

// readHistory reads a run's whole history (for a running one, its history so far).
func readHistory(ctx context.Context, c client.Client, id, runID string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read history of %s/%s: %w", id, runID, err)
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}

func hasCompletedTask(h *historypb.History) bool {
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}

// unsafeInName is what a file name does not keep of a workflow id.
var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// FileName is the name of the file holding a run's history: its workflow id with every
// run of characters other than letters, digits, '.' and '-' made one '-' (the '/' of
// "reservation/<id>" among them; '_' separates the run id), cut to 150 characters.
func FileName(workflowID, runID string) string {
	name := unsafeInName.ReplaceAllString(workflowID, "-")
	if len(name) > 150 {
		name = name[:150]
	}
	return name + "_" + runID + ".json"
}
