// Package histories exports the histories of the workflows a Temporal namespace runs and
// replays a folder of them against the workflows this build registers. The replay tests of
// workflows/ replay histories the tests recorded themselves; these are the runs a deploy
// meets: a change that would break them fails the replay before it ships
// (docs/runbook.md, "Replay what runs").
//
// A history is written as Temporal's JSON form of history.v1.History, the form of the
// recorded histories in workflows/testdata (client.HistoryFromJSON reads it), at
// <dir>/<WorkflowType>/<workflow id>_<run id>.json.
package histories

import (
	"reflect"
	"runtime"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/worker"
)

// WorkflowTypes is every workflow type the worker registers (worker.RegisterWorkflows),
// sorted: the types Export takes and ReplayDir replays against.
func WorkflowTypes() []string {
	var reg typeNames
	worker.RegisterWorkflows(&reg)
	slices.Sort(reg.names)
	return reg.names
}

// typeNames collects the workflow types registered on it.
type typeNames struct{ names []string }

func (r *typeNames) RegisterWorkflow(w any) {
	// Registered without a name, a workflow's type is its function's name.
	full := runtime.FuncForPC(reflect.ValueOf(w).Pointer()).Name()
	r.names = append(r.names, full[strings.LastIndex(full, ".")+1:])
}

func (r *typeNames) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name == "" {
		r.RegisterWorkflow(w)
		return
	}
	r.names = append(r.names, o.Name)
}

// A dynamic workflow has no type to list its executions by; the replay still runs its
// histories, since the replayer registers it.
func (r *typeNames) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {}
