package workflows_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	historyfiles "github.com/lockernet/lockernet/internal/histories"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Replay: every history in testdata/ is a real run, recorded on an embedded Temporal server
// by the TestRecord* tests in record_test.go:
//
//	LOCKERNET_RECORD_HISTORIES=1 go test ./workflows/ -run 'TestRecord'
//
// TestReplay replays each against the workflows the worker registers
// (worker.RegisterWorkflows): a change to a workflow that would break the runs in flight
// fails it. Such a change goes behind workflow.GetVersion, and the old histories stay,
// renamed for the change they predate (<name>_before_<change>.json); the recorder then
// writes the new path's under the current names. TestEveryWorkflowHasARecordedHistory fails
// for a workflow the worker registers with no history here, so a new workflow cannot ship
// without one, and for a file in testdata/ missing from the table.

// recordedHistory is a file in testdata/ and the workflow type it is a run of.
type recordedHistory struct{ workflowType, file string }

// histories is every recorded history.
var histories = []recordedHistory{
	{contract.ReservationWorkflowName, "reservation_expired.json"},
	{contract.ReservationWorkflowName, "reservation_cancelled.json"},
	{contract.LockerTokenWorkflowName, "lockertoken_expired.json"},
	{contract.LockerTokenWorkflowName, "lockertoken_used.json"},
	{contract.LockerTokenWorkflowName, "lockertoken_revoked.json"},
	{contract.AccessCodeWorkflowName, "accesscode_expired.json"},
	{contract.AccessCodeWorkflowName, "accesscode_removed.json"},
	{contract.AccessCodeWorkflowName, "accesscode_release_retried.json"},
	// Runs from before the hold-release loop's continue-as-new (changeHoldReleaseContinueAsNew).
	{contract.AccessCodeWorkflowName, "accesscode_expired_before_continue_as_new.json"},
	{contract.AccessCodeWorkflowName, "accesscode_removed_before_continue_as_new.json"},
	{contract.AccessCodeWorkflowName, "accesscode_release_retried_before_continue_as_new.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_completed.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_redelivered.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_first_send_interrupted.json"},
	// Runs of the markerless revision, whose first send was an activity of its own
	// (gatewayreq.RevisionMarkerless, before gatewayreq.RevisionFirstSendLocal).
	{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_first_send_local.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_redelivered_before_first_send_local.json"},
	// Runs from before the markerless revision (gatewayreq.RevisionMarkerless): their markers decide.
	{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_markerless.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_redelivered_before_markerless.json"},
	// Runs from before the sends were activities of their own (versionSendsAsActivities).
	{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_sends_as_activities.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_redelivered_before_sends_as_activities.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_after_first_send_before_sends_as_activities.json"},
	// Runs from before the sends stored the gateway's body with the request (versionBodiesInPostgres).
	{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_bodies_in_postgres.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_redelivered_before_bodies_in_postgres.json"},
	{contract.GatewayRequestWorkflowName, "gateway_request_after_first_send_before_bodies_in_postgres.json"},
	{contract.PickupWindowWorkflowName, "pickup_window_overdue.json"},
	{contract.PickupWindowWorkflowName, "pickup_window_picked_up.json"},
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_retried.json"},
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_failed.json"},
	// Runs from before the markerless revision (contract.WebhookRevisionMarkerless).
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_retried_before_markerless.json"},
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_failed_before_markerless.json"},
	// Runs from before the attempt became a local activity (changeAttemptLocal).
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_retried_before_local_attempt.json"},
	{contract.WebhookDeliveryWorkflowName, "webhook_delivery_failed_before_local_attempt.json"},
}

// The replay tests run one replay at a time (no t.Parallel): the SDK keeps workflow
// executions in a process-wide cache keyed by run, and two replays of one history at once
// (a changed workflow's and the real one's) can meet there, so that a changed workflow
// replays without the error it must raise.
func TestReplay(t *testing.T) {
	for _, h := range histories {
		t.Run(h.file, func(t *testing.T) {
			hist := readHistory(t, h.file)
			started := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			require.NotNil(t, started, "a history starts with its workflow's start")
			require.Equal(t, h.workflowType, started.GetWorkflowType().GetName(), "the table names the workflow the history is a run of")

			rp := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(rp)
			require.NoError(t, rp.ReplayWorkflowHistory(nil, hist))
		})
	}
}

func TestEveryWorkflowHasARecordedHistory(t *testing.T) {
	t.Parallel()
	var reg workflowTypes
	worker.RegisterWorkflows(&reg)
	require.NotEmpty(t, reg.names)
	recorded := map[string]bool{}
	var inTable []string
	for _, h := range histories {
		recorded[h.workflowType] = true
		inTable = append(inTable, h.file)
	}
	for _, name := range reg.names {
		assert.True(t, recorded[name], "the worker registers workflow %s, which has no recorded history: record one (record_test.go) and add it to histories", name)
	}

	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	assert.ElementsMatch(t, files, inTable, "every history in testdata/ is in the table, and every one in the table is there")
}

// workflowTypes collects the workflow types registered on it.
type workflowTypes struct{ names []string }

func (r *workflowTypes) RegisterWorkflow(w any) {
	// Registered without a name, a workflow's type is its function's name.
	full := runtime.FuncForPC(reflect.ValueOf(w).Pointer()).Name()
	r.names = append(r.names, full[strings.LastIndex(full, ".")+1:])
}

func (r *workflowTypes) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name == "" {
		r.RegisterWorkflow(w)
		return
	}
	r.names = append(r.names, o.Name)
}

func (r *workflowTypes) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {
	// No history can show what a dynamic workflow replays: its name is no workflow type.
	r.names = append(r.names, "(a dynamic workflow)")
}

// readHistory reads the recorded history testdata/file.
func readHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	h, err := historyfiles.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	return h
}

// A run started with the markerless revision by a new apiserver but handled first by a worker
// of the build before it (a rolling deploy) records the version markers, with their current
// versions, and their search-attribute upserts: the build that takes it over replays it on the
// same path without calling GetVersion. The histories recorded before the revision are such
// runs once their input carries it. The revision is read: a history whose markers chose an
// older path fails to replay once its input carries it.
func TestMarkerlessRunsReplayMarkersRecordedByTheBuildBefore(t *testing.T) {
	for _, tc := range []struct {
		workflowType, file, field string
		wantErr                   bool
	}{
		{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_markerless.json", "Revision", false},
		{contract.GatewayRequestWorkflowName, "gateway_request_redelivered_before_markerless.json", "Revision", false},
		{contract.WebhookDeliveryWorkflowName, "webhook_delivery_retried_before_markerless.json", "revision", false},
		{contract.WebhookDeliveryWorkflowName, "webhook_delivery_failed_before_markerless.json", "revision", false},
		// Older paths: sends as local activities, the attempt as a regular activity.
		{contract.GatewayRequestWorkflowName, "gateway_request_completed_before_sends_as_activities.json", "Revision", true},
		{contract.WebhookDeliveryWorkflowName, "webhook_delivery_retried_before_local_attempt.json", "revision", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			hist := readHistory(t, tc.file)
			markers := 0
			for _, ev := range hist.GetEvents() {
				if ev.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED && ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "Version" {
					markers++
				}
			}
			if !tc.wantErr {
				require.Positive(t, markers, "the run recorded version markers")
			}
			in := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
			var fields map[string]any
			require.NoError(t, json.Unmarshal(in.GetData(), &fields))
			require.NotContains(t, fields, tc.field, "recorded before the revision")
			fields[tc.field] = 1
			data, err := json.Marshal(fields)
			require.NoError(t, err)
			in.Data = data

			rp := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(rp)
			err = rp.ReplayWorkflowHistory(nil, hist)
			if tc.wantErr {
				require.Error(t, err, "the markerless path is not the one these markers chose")
				return
			}
			require.NoError(t, err)
		})
	}
}

// Workflows changed in the ways the replay test exists to catch: each must fail to replay a
// history of the workflow it stands in for.
func TestReplayCatchesAChangedWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name, workflowType, file string
		changed                  any
	}{
		{"a reservation without its expiry timer", contract.ReservationWorkflowName, "reservation_expired.json", changedReservation},
		{"a locker token without its expiry timer", contract.LockerTokenWorkflowName, "lockertoken_expired.json", changedLockerToken},
		{"an access code released without waiting for its expiry", contract.AccessCodeWorkflowName, "accesscode_expired.json", changedAccessCode},
		{"a gateway request that skips the dispatch", contract.GatewayRequestWorkflowName, "gateway_request_completed.json", changedGatewayRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, slices.ContainsFunc(histories, func(h recordedHistory) bool {
				return h.workflowType == tc.workflowType && h.file == tc.file
			}), "%s is a recorded history of %s", tc.file, tc.workflowType)
			rp := sdkworker.NewWorkflowReplayer()
			rp.RegisterWorkflowWithOptions(tc.changed, workflow.RegisterOptions{Name: tc.workflowType})
			require.Error(t, rp.ReplayWorkflowHistory(nil, readHistory(t, tc.file)))
		})
	}
}

func changedReservation(ctx workflow.Context, in contract.ReservationInput) (contract.ReservationState, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var res activities.ExpireReservationResult
	err := workflow.ExecuteActivity(ctx, "ExpireReservation", activities.ExpireReservationInput{ReservationID: in.ReservationID}).Get(ctx, &res)
	return contract.ReservationState{Outcome: contract.OutcomeExpired, ExpiryApplied: res.Expired}, err
}

func changedLockerToken(ctx workflow.Context, in contract.LockerTokenInput) (contract.LockerTokenState, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var res activities.ExpireTokenResult
	err := workflow.ExecuteActivity(ctx, "ExpireToken", activities.ExpireTokenInput{TokenID: in.TokenID}).Get(ctx, &res)
	return contract.LockerTokenState{Outcome: contract.TokenOutcomeExpired}, err
}

func changedAccessCode(ctx workflow.Context, in contract.AccessCodeInput) (contract.AccessCodeState, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var spec gatewayreq.Spec
	err := workflow.ExecuteActivity(ctx, "PrepareHoldRelease", activities.PrepareHoldReleaseInput{CodeID: in.CodeID, Attempt: 1}).Get(ctx, &spec)
	return contract.AccessCodeState{Outcome: contract.CodeOutcomeRemoved}, err
}

func changedGatewayRequest(workflow.Context, gatewayreq.Spec) (gatewayreq.Result, error) {
	return gatewayreq.Result{}, nil
}

// A request settled by its first send costs what a bare workflow costs: one task, the send's
// marker, the completion — no activity task. Runs of the revision before sent it as an
// activity of its own, and keep that path: the revision is read, so each history fails to
// replay under the other revision.
func TestFirstSendInsideTheFirstTask(t *testing.T) {
	hist := readHistory(t, "gateway_request_completed.json")
	assert.LessOrEqual(t, len(hist.GetEvents()), 7, "a bare workflow's 5 events, the send's marker, one to spare")
	for _, ev := range hist.GetEvents() {
		assert.NotEqual(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ev.GetEventType(), "no activity task")
	}

	for _, tc := range []struct {
		file     string
		revision int
	}{
		{"gateway_request_completed.json", gatewayreq.RevisionMarkerless},
		{"gateway_request_completed_before_first_send_local.json", gatewayreq.RevisionFirstSendLocal},
	} {
		t.Run(tc.file, func(t *testing.T) {
			hist := readHistory(t, tc.file)
			in := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
			var fields map[string]any
			require.NoError(t, json.Unmarshal(in.GetData(), &fields))
			require.NotEqual(t, float64(tc.revision), fields["Revision"])
			fields["Revision"] = tc.revision
			data, err := json.Marshal(fields)
			require.NoError(t, err)
			in.Data = data
			rp := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(rp)
			require.Error(t, rp.ReplayWorkflowHistory(nil, hist), "recorded on the other revision's path")
		})
	}
}
