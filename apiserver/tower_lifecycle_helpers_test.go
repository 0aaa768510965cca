package apiserver_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/towerproto"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Helpers of the tower-lifecycle tests (lifecycle_*_test.go). Their names start with lc so
// they never collide with the platform tests' helpers in the same package.

// lcWait is how long a test waits for an outcome driven by real workflows and timers.
const lcWait = 60 * time.Second

// lcStart starts an env with its tower simulator, and returns them with a service-provider
// token.
func lcStart(t *testing.T) (*testenv.Env, *towersim.Simulator, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{})
	return e, e.TowerSim(t), e.Token("service_provider")
}

func lcTokenPath(typ, tower string, lockerID int64) string {
	return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/%s-locker-tokens", tower, lockerID, typ)
}

func lcReleasePath(tower string, lockerID int64) string {
	return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/release", tower, lockerID)
}

// lcIssue asks for a drop-off, pickup or release token with any body.
func lcIssue(t *testing.T, e *testenv.Env, tok, typ, tower string, lockerID int64, body any) testenv.Response {
	t.Helper()
	return e.Do(http.MethodPost, lcTokenPath(typ, tower, lockerID), tok, body)
}

// lcMustIssue issues a token of duration seconds and requires the 201.
func lcMustIssue(t *testing.T, e *testenv.Env, tok, typ, tower string, lockerID int64, duration int) towerTokenResp {
	t.Helper()
	r := lcIssue(t, e, tok, typ, tower, lockerID, map[string]any{"duration": duration})
	require.Equal(t, http.StatusCreated, r.Status, "%s token: %s", typ, r.Body)
	var out towerTokenResp
	r.JSON(t, &out)
	require.Equal(t, typ, out.Type)
	return out
}

// lcConflict requires a 409 problem whose detail names the status.
func lcConflict(t *testing.T, r testenv.Response, status string) {
	t.Helper()
	m := requireProblem(t, r, http.StatusConflict)
	require.Contains(t, m["detail"], status, "the 409 names the locker's status")
}

// lcOpen presents a token at a simulated tower, the door closing with or without an item.
func lcOpen(t *testing.T, sim *towersim.Simulator, tower string, tk towerTokenResp, withItem bool) towersim.OpenResponse {
	t.Helper()
	return lcOpenRaw(t, sim, tower, tk.Payload, tk.PayloadAuth, withItem)
}

func lcOpenRaw(t *testing.T, sim *towersim.Simulator, tower, payload, auth string, withItem bool) towersim.OpenResponse {
	t.Helper()
	res, err := sim.Open(context.Background(), tower, towersim.OpenRequest{Payload: payload, PayloadAuth: auth, CloseWithItem: &withItem})
	require.NoError(t, err)
	return res
}

// lcRequireOpened requires that the tower opened and that the cloud took its events.
func lcRequireOpened(t *testing.T, res towersim.OpenResponse) {
	t.Helper()
	require.True(t, res.Opened, "tower refused: %v %s", lcRefusal(res), res.ErrorDescription)
	require.Empty(t, res.UploadError)
	require.Zero(t, res.EventsPending)
}

// lcNothingRecorded requires that a tower holds no queued event but its reports of the
// commands its sessions synced (a refused token records nothing).
func lcNothingRecorded(t *testing.T, sim *towersim.Simulator, tower string) {
	t.Helper()
	tw, ok := sim.Tower(tower)
	require.True(t, ok)
	for _, ev := range tw.PendingEvents() {
		assert.Equal(t, towerproto.EventSyncCommands, ev.Kind, "pending event %+v", ev)
	}
}

// lcRefusal is the tower's refusal code, "" when it opened.
func lcRefusal(res towersim.OpenResponse) string {
	if res.Error == nil {
		return ""
	}
	return *res.Error
}

// lcDemoTower returns a demo tower with its secret.
func lcDemoTower(t *testing.T, e *testenv.Env, id string) seed.Tower {
	t.Helper()
	for _, tw := range e.Seed.Towers {
		if tw.ID == id {
			return tw
		}
	}
	t.Fatalf("no demo tower %s", id)
	return seed.Tower{}
}

// lcDecode decodes a token the API issued, with its tower's key.
func lcDecode(t *testing.T, e *testenv.Env, tk towerTokenResp) towerproto.Token {
	t.Helper()
	tw := lcDemoTower(t, e, tk.TowerID)
	dec, err := towerproto.DecodeToken(tk.Payload, tk.PayloadAuth, towerproto.TokenKey(tw.Secret))
	require.NoError(t, err)
	return dec
}

// lcOfflineSim is a simulator whose phone went offline after it got its sessions: opens
// work with the cached sessions, their events stay queued until lcUploadPending sends them.
func lcOfflineSim(t *testing.T, e *testenv.Env) *towersim.Simulator {
	t.Helper()
	sim := e.TowerSim(t)
	for _, tw := range e.Seed.Towers {
		require.NoError(t, sim.Prepare(context.Background(), tw.ID, towersim.DefaultClaim, ""))
	}
	sim.SetOffline(true)
	return sim
}

// lcUploadPending uploads a simulated tower's queued events to the env, as a phone that came
// back online would.
func lcUploadPending(t *testing.T, e *testenv.Env, sim *towersim.Simulator, tower string) int {
	t.Helper()
	tw, ok := sim.Tower(tower)
	require.True(t, ok)
	n, err := towersim.NewRelay(e.URL, nil).Upload(context.Background(), tw, e.Token("tower_access"))
	require.NoError(t, err)
	return n
}

// lcRow is a locker row as stored, with the status a client sees.
type lcRow struct {
	Raw, Effective int
	Generation     int32
	Possessor      *string
	HoldExpiresAt  *time.Time
}

func lcLockerRow(t *testing.T, e *testenv.Env, lockerID int64) lcRow {
	t.Helper()
	var r lcRow
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `
		SELECT status, locker_status(status, hold_expires_at), generation, possessor_client_id, hold_expires_at
		FROM lockers WHERE id = $1`, lockerID).Scan(&r.Raw, &r.Effective, &r.Generation, &r.Possessor, &r.HoldExpiresAt))
	return r
}

// lcTokenStatus is a token's stored status (active, used, expired, revoked).
func lcTokenStatus(t *testing.T, e *testenv.Env, id string) string {
	t.Helper()
	var s string
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT status FROM locker_tokens WHERE id = $1`, uuid.MustParse(id)).Scan(&s))
	return s
}

// lcAnomalies lists the anomaly kinds recorded for a locker, oldest first.
func lcAnomalies(t *testing.T, e *testenv.Env, lockerID int64) []string {
	t.Helper()
	rows, err := e.Store.Pool().Query(context.Background(), `SELECT kind FROM tower_anomalies WHERE locker_id = $1 ORDER BY id`, lockerID)
	require.NoError(t, err)
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kinds = append(kinds, k)
	}
	require.NoError(t, rows.Err())
	return kinds
}

// lcCount runs a count query.
func lcCount(t *testing.T, e *testenv.Env, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// lcTokenOutcome waits for a token's workflow to complete and returns its result.
func lcTokenOutcome(t *testing.T, e *testenv.Env, tokenID string) string {
	t.Helper()
	ctx := context.Background()
	id := contract.LockerTokenWorkflowID(tokenID)
	require.Eventually(t, func() bool {
		d, err := e.Temporal.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, lcWait, 50*time.Millisecond, "workflow %s completes", id)
	var st contract.LockerTokenState
	require.NoError(t, e.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &st))
	return st.Outcome
}

// lcFlipHex changes one byte of a hex string (at byte index i), keeping it valid hex.
func lcFlipHex(t *testing.T, s string, i int) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	b[i] ^= 0x01
	return hex.EncodeToString(b)
}

// lcLapse moves a locker's hold into the past, as the clock would once it runs out.
func lcLapse(t *testing.T, e *testenv.Env, lockerID int64) {
	t.Helper()
	_, err := e.Store.Pool().Exec(context.Background(),
		`UPDATE lockers SET hold_expires_at = now() - interval '1 second' WHERE id = $1 AND hold_expires_at IS NOT NULL`, lockerID)
	require.NoError(t, err)
}

// lcAssigned returns the caller's assigned lockers, decoded.
func lcAssigned(t *testing.T, e *testenv.Env, tok string) map[int64]lcAssignedLocker {
	t.Helper()
	r := e.Do(http.MethodGet, "/api/v1/users/me/assigned-lockers", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var list []lcAssignedLocker
	r.JSON(t, &list)
	out := make(map[int64]lcAssignedLocker, len(list))
	for _, a := range list {
		out[a.ID] = a
	}
	require.Len(t, out, len(list), "a locker is listed once")
	return out
}

type lcAssignedLocker struct {
	ID         int64        `json:"id"`
	TowerID    string       `json:"towerId"`
	Status     lockerStatus `json:"status"`
	Possession *struct {
		Since         *string `json:"since"`
		ReservationID *string `json:"reservationId"`
		ActiveTokens  []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			ExpiresAt string `json:"expiresAt"`
		} `json:"activeTokens"`
	} `json:"possession"`
}
