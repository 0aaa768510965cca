package histories_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/histories"
	"github.com/lockernet/lockernet/workflows/contract"
)

// ranExecution is an execution the test made through the APIs, and its status when exported.
type ranExecution struct{ workflowID, status string }

// A running system, driven through its APIs so that it runs every workflow the worker
// registers, is exported, and its export replays; then a history altered as a changed
// workflow would have it fails the replay. (One system for the subtests: it takes seconds
// to start.)
func TestExportAndReplayWhatRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole system")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	e.RunGatewayCloud(t)
	gw1, _ := e.StartDemoGatewaysMirrored(t)
	ran := driveEveryWorkflow(t, e, gw1)
	ctx := t.Context()
	// A run no worker has taken up: nothing in its history to replay.
	undecided, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: contract.ReservationWorkflowID(uuid.NewString()), TaskQueue: "no-worker-polls-this"}, contract.ReservationWorkflowName,
		contract.ReservationInput{ReservationID: uuid.NewString(), ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	waitListed(t, e.Temporal, append(slices.Clone(ran), ranExecution{undecided.GetID(), "Running"}))
	for _, r := range ran {
		if r.status == "Running" {
			waitDecided(t, e.Temporal, r.workflowID)
		}
	}

	dir := t.TempDir()
	res, err := histories.Export(ctx, e.Temporal, histories.ExportOptions{Dir: dir, ClosedSince: time.Hour, PerType: 50, Running: true})
	require.NoError(t, err)

	t.Run("one file per execution, under its workflow type", func(t *testing.T) {
		var written []string
		runs := map[string]bool{}
		status := map[string]string{}
		for _, x := range res.Written {
			written = append(written, x.File)
			assert.Equal(t, filepath.Join(dir, x.WorkflowType, histories.FileName(x.WorkflowID, x.RunID)), x.File)
			assert.False(t, runs[x.RunID], "run %s written once", x.RunID)
			runs[x.RunID] = true
			status[x.WorkflowID] = x.Status
			h := readHistory(t, x.File)
			assert.Equal(t, x.WorkflowType, h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName(),
				"%s holds a run of the workflow type it is filed under", x.File)
			assert.Len(t, h.GetEvents(), x.Events)
		}
		assert.ElementsMatch(t, filesUnder(t, dir), written, "the folder holds what Export reports, nothing else")
		for _, r := range ran {
			assert.Equal(t, r.status, status[r.workflowID], "%s is exported, as %s", r.workflowID, r.status)
		}
		var types []string
		for _, x := range res.Written {
			if !slices.Contains(types, x.WorkflowType) {
				types = append(types, x.WorkflowType)
			}
		}
		assert.ElementsMatch(t, histories.WorkflowTypes(), types, "the traffic ran every workflow the worker registers")
		require.Len(t, res.Undecided, 1, "the run no worker took up is left out")
		assert.Equal(t, undecided.GetID(), res.Undecided[0].WorkflowID)
		assert.NotContains(t, status, undecided.GetID())
	})

	t.Run("per type at most N closed and N running", func(t *testing.T) {
		res, err := histories.Export(ctx, e.Temporal, histories.ExportOptions{Dir: t.TempDir(), ClosedSince: time.Hour, PerType: 1, Running: true})
		require.NoError(t, err)
		count := map[string]int{}
		for _, x := range res.Written {
			count[x.WorkflowType+" "+x.Status]++
		}
		for k, n := range count {
			assert.Equal(t, 1, n, k)
		}
		assert.Equal(t, 1, count[contract.GatewayRequestWorkflowName+" Completed"], "two closed gateway requests ran; one is taken")
	})

	t.Run("closed ones by their close time, running ones whenever they started", func(t *testing.T) {
		res, err := histories.Export(ctx, e.Temporal, histories.ExportOptions{Dir: t.TempDir(), ClosedSince: time.Nanosecond, PerType: 50, Running: true})
		require.NoError(t, err)
		var ids []string
		for _, x := range res.Written {
			assert.Equal(t, "Running", x.Status, x.WorkflowID)
			ids = append(ids, x.WorkflowID)
		}
		for _, r := range ran {
			if r.status == "Running" {
				assert.Contains(t, ids, r.workflowID)
			}
		}

		res, err = histories.Export(ctx, e.Temporal, histories.ExportOptions{Dir: t.TempDir(), ClosedSince: time.Hour, PerType: 50})
		require.NoError(t, err)
		require.NotEmpty(t, res.Written)
		for _, x := range res.Written {
			assert.NotEqual(t, "Running", x.Status, "without Running, %s is left out", x.WorkflowID)
		}
	})

	t.Run("the export replays on this build", func(t *testing.T) {
		rep, err := histories.ReplayDir(dir, nil)
		require.NoError(t, err)
		require.Len(t, rep.Results, len(res.Written))
		for _, r := range rep.Results {
			assert.NoError(t, r.Err, r.File)
			assert.Positive(t, r.Events)
		}
		assert.Empty(t, rep.Failed())
		t.Logf("%d histories replayed", len(rep.Results))
	})

	t.Run("a history the code no longer makes fails the replay", func(t *testing.T) {
		bad := t.TempDir()
		require.NoError(t, os.CopyFS(bad, os.DirFS(dir)))
		// A gateway request's run recorded its first send (a local activity's marker); the
		// history is made to show another local activity there, as a changed workflow would
		// have recorded.
		var altered string
		var h *historypb.History
		for _, x := range res.Written {
			if x.WorkflowType == contract.GatewayRequestWorkflowName && x.Status == "Completed" {
				altered = filepath.Join(bad, x.WorkflowType, filepath.Base(x.File))
				break
			}
		}
		require.NotEmpty(t, altered)
		h = readHistory(t, altered)
		i := slices.IndexFunc(h.GetEvents(), func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED &&
				ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity"
		})
		require.NotEqual(t, -1, i, "a gateway request records its first send")
		data := h.GetEvents()[i].GetMarkerRecordedEventAttributes().GetDetails()["data"].GetPayloads()[0]
		require.Contains(t, string(data.GetData()), `"SendGatewayRequest"`)
		data.Data = bytes.ReplaceAll(data.GetData(), []byte(`"SendGatewayRequest"`), []byte(`"SendSomethingElse"`))
		writeHistory(t, altered, h)

		rep, err := histories.ReplayDir(bad, nil)
		require.NoError(t, err)
		require.Len(t, rep.Results, len(res.Written), "every history is replayed, past the one that fails")
		failed := rep.Failed()
		require.Len(t, failed, 1)
		assert.Equal(t, altered, failed[0].File)
		assert.Equal(t, contract.GatewayRequestWorkflowName, failed[0].WorkflowType)
		assert.ErrorContains(t, failed[0].Err, "TMPRL1100", "the SDK's non-determinism error")
		t.Logf("%s: %v", failed[0].File, failed[0].Err)
	})
}

// driveEveryWorkflow runs every registered workflow through the APIs, as a user would: a
// reservation cancelled and one held, a drop-off token, an access code (its hold a gateway
// request), a read through the gateway cloud API, a webhook test event. It returns the
// executions whose ids it knows.
func driveEveryWorkflow(t *testing.T, e *testenv.Env, gw1 *testenv.Gateway) []ranExecution {
	t.Helper()
	tok := e.Token()
	tower := e.Seed.Towers[0]
	lockerPath := func(i int, rest string) string {
		return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/%s", tower.ID, tower.LockerIDs[i], rest)
	}
	reserve := func(i int) string {
		r := e.Do(http.MethodPost, lockerPath(i, "reservations"), tok, map[string]any{"duration": 600})
		require.Equal(t, http.StatusCreated, r.Status, "reserve: %s", r.Body)
		return r.Map(t)["id"].(string)
	}
	cancelled := reserve(0)
	require.Equal(t, http.StatusNoContent, e.Do(http.MethodDelete, lockerPath(0, "reservations/"+cancelled), tok, nil).Status)
	held := reserve(1)
	r := e.Do(http.MethodPost, lockerPath(2, "dropoff-locker-tokens"), tok, map[string]any{"duration": 600})
	require.Equal(t, http.StatusCreated, r.Status, "drop-off token: %s", r.Body)
	token := r.Map(t)["id"].(string)

	app := map[string]string{"x-api-key": e.Creds.AppEngineAPIKey}
	r = testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/locker", app, map[string]any{"location_id": fmt.Sprint(gw1.LocationID),
		"locker_name": "A01", "single_use": false, "expiry": time.Now().Add(time.Hour).Format(time.RFC3339)})
	require.Equal(t, http.StatusOK, r.Status, "access code: %s", r.Body)
	code := r.Map(t)["id"].(string)

	// A parcel left under a pickup policy: its window's workflow runs.
	r = testenv.DoWithHeaders(t, http.MethodPut, e.URL+"/pickup-policy", app, map[string]any{"window_seconds": 3600})
	require.Equal(t, http.StatusOK, r.Status, "pickup policy: %s", r.Body)
	r = e.Do(http.MethodPost, lockerPath(3, "dropoff-locker-tokens"), tok, map[string]any{"duration": 600})
	require.Equal(t, http.StatusCreated, r.Status, "drop-off token: %s", r.Body)
	drop := r.Map(t)
	opened, err := e.TowerSim(t).Open(t.Context(), tower.ID, towersim.OpenRequest{Payload: drop["payload"].(string), PayloadAuth: drop["payload_auth"].(string)})
	require.NoError(t, err)
	require.True(t, opened.Opened && opened.UploadError == "", "drop-off at the tower: %+v", opened)
	r = e.Do(http.MethodGet, lockerPath(3, "pickup-window"), tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "pickup window: %s", r.Body)
	window := r.Map(t)["id"].(string)

	r = testenv.DoWithHeaders(t, http.MethodGet, fmt.Sprintf("%s/api/customer/v1/locations/%d/lockers/config", e.URL, gw1.LocationID),
		map[string]string{"X-API-Key": e.GatewayKey()}, nil)
	require.Equal(t, http.StatusOK, r.Status, "read through the gateway cloud API: %s", r.Body)

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	r = testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/webhooks/endpoints", app, map[string]any{"url": receiver.URL + "/hooks"})
	require.Equal(t, http.StatusCreated, r.Status, "webhook endpoint: %s", r.Body)
	r = testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/webhooks/endpoints/"+r.Map(t)["id"].(string)+"/test", app, nil)
	require.Equal(t, http.StatusAccepted, r.Status, "webhook test event: %s", r.Body)

	return []ranExecution{
		{contract.ReservationWorkflowID(cancelled), "Completed"},
		{contract.ReservationWorkflowID(held), "Running"},
		{contract.LockerTokenWorkflowID(token), "Running"},
		{contract.AccessCodeWorkflowID(code), "Running"},
		{contract.PickupWindowWorkflowID(window), "Running"},
	}
}

// waitListed waits until Temporal's visibility, which lags the executions, lists the
// executions ran, the access code's hold and the read (two completed gateway requests),
// and the webhook delivery's completion.
func waitListed(t *testing.T, c client.Client, ran []ranExecution) {
	t.Helper()
	queries := map[string]int64{
		fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Completed'", contract.GatewayRequestWorkflowName):  2,
		fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Completed'", contract.WebhookDeliveryWorkflowName): 1,
	}
	for _, r := range ran {
		queries[fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = '%s'", r.workflowID, r.status)] = 1
	}
	for q, n := range queries {
		require.Eventually(t, func() bool {
			resp, err := c.CountWorkflow(t.Context(), &workflowservice.CountWorkflowExecutionsRequest{Query: q})
			return err == nil && resp.GetCount() >= n
		}, 30*time.Second, 100*time.Millisecond, "visibility lists %d of %s", n, q)
	}
}

// waitDecided waits until a workflow task of the running execution id has completed.
func waitDecided(t *testing.T, c client.Client, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return false
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "a workflow task of %s completes", id)
}

func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	}))
	return files
}

func readHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	h, err := histories.ReadFile(file)
	require.NoError(t, err)
	return h
}

func writeHistory(t *testing.T, file string, h *historypb.History) {
	t.Helper()
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o644))
}

func TestFileName(t *testing.T) {
	t.Parallel()
	const run = "0196f6a2-7b1c-7d3e-9f00-1a2b3c4d5e6f"
	for _, tc := range []struct{ id, want string }{
		{"reservation/8c3b7d7e-1f2a-4b6c-9d0e-3f4a5b6c7d8e", "reservation-8c3b7d7e-1f2a-4b6c-9d0e-3f4a5b6c7d8e_" + run + ".json"},
		{"gateway-request/41386084-3cd8-4abb-aa66-a30ee1ddc09c", "gateway-request-41386084-3cd8-4abb-aa66-a30ee1ddc09c_" + run + ".json"},
		{"a b/../c_d", "a-b-..-c-d_" + run + ".json"},
		{"x" + strings.Repeat("0", 200), "x" + strings.Repeat("0", 149) + "_" + run + ".json"},
	} {
		t.Run(tc.id[:min(len(tc.id), 20)], func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, histories.FileName(tc.id, run))
		})
	}
}

func TestReplayDirRefusesAFolderWithoutHistories(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(empty, "README.md"), []byte("not a history\n"), 0o644))
	for name, dir := range map[string]string{"no history in it": empty, "missing": filepath.Join(empty, "missing")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := histories.ReplayDir(dir, nil)
			assert.Error(t, err, "replaying nothing is no check that passes")
		})
	}
}

func TestReplayDirReportsAFileThatIsNoHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"events": [`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty.json"), []byte(`{"events": []}`), 0o644))
	rep, err := histories.ReplayDir(dir, nil)
	require.NoError(t, err)
	require.Len(t, rep.Failed(), 2)
	assert.Equal(t, filepath.Join(dir, "broken.json"), rep.Failed()[0].File)
	assert.Equal(t, filepath.Join(dir, "empty.json"), rep.Failed()[1].File)
}

func TestExportRefusesOptionsThatTakeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string]histories.ExportOptions{
		"no folder":      {ClosedSince: time.Hour, PerType: 1},
		"none per type":  {Dir: t.TempDir(), ClosedSince: time.Hour},
		"no time closed": {Dir: t.TempDir(), PerType: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The options are checked before Temporal is called: no client is needed.
			_, err := histories.Export(ctx, nil, opts)
			assert.Error(t, err)
		})
	}
}
