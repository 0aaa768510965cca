package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

type towerTokenResp struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	LockerID    int64  `json:"lockerId"`
	TowerID     string `json:"towerId"`
	ExpiresAt   string `json:"expiresAt"`
	Payload     string `json:"payload"`
	PayloadAuth string `json:"payload_auth"`
}

func lockerStatusName(t *testing.T, e *testenv.Env, tok, tower string, locker int64) string {
	t.Helper()
	r := e.Do(http.MethodGet, "/api/v1/towers/"+tower+"/lockers", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var ls []struct {
		ID     int64 `json:"id"`
		Status struct {
			Name string `json:"name"`
		} `json:"status"`
	}
	r.JSON(t, &ls)
	for _, l := range ls {
		if l.ID == locker {
			return l.Status.Name
		}
	}
	t.Fatalf("locker %d not in tower %s", locker, tower)
	return ""
}

func assigned(t *testing.T, e *testenv.Env, tok string) map[int64]map[string]any {
	t.Helper()
	r := e.Do(http.MethodGet, "/api/v1/users/me/assigned-lockers", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var list []map[string]any
	r.JSON(t, &list)
	out := map[int64]map[string]any{}
	for _, l := range list {
		out[int64(l["id"].(float64))] = l
	}
	return out
}

// The seed's seven-step flow, end to end over HTTP with the tower simulator.
func TestDropoffAndPickupFlow(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	sim := e.TowerSim(t)
	ctx := context.Background()

	// 1-2. Tokens.
	tok := e.Token("service_provider")
	// 3. Locations in an area.
	r := e.Do(http.MethodGet, "/api/v1/locations/in-area?start=34.0,-118.3&end=34.1,-118.2", tok, nil)
	require.Equal(t, http.StatusOK, r.Status)
	var locs []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	r.JSON(t, &locs)
	require.NotEmpty(t, locs)
	assert.Equal(t, "Union Station", locs[0].Name)
	// 4. Lockers of the location, reservation.
	r = e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", locs[0].ID), tok, nil)
	require.Equal(t, http.StatusOK, r.Status)
	var lockers []struct {
		ID      int64  `json:"id"`
		TowerID string `json:"towerId"`
	}
	r.JSON(t, &lockers)
	locker, tower := lockers[0].ID, lockers[0].TowerID
	r = e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/reservations", tower, locker), tok, map[string]any{"duration": 600})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, "reserved", lockerStatusName(t, e, tok, tower, locker))
	assert.Contains(t, assigned(t, e, tok), locker)

	// 5. Drop-off token, used at the tower: door closed with the item inside.
	r = e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/dropoff-locker-tokens", tower, locker), tok,
		map[string]any{"duration": 300, "client_info": "order 42"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var drop towerTokenResp
	r.JSON(t, &drop)
	assert.Equal(t, "dropoff", drop.Type)
	assert.Equal(t, "rented", lockerStatusName(t, e, tok, tower, locker))
	a := assigned(t, e, tok)[locker]
	require.NotNil(t, a)
	assert.Equal(t, "rented", a["status"].(map[string]any)["name"])
	assert.Len(t, a["possession"].(map[string]any)["activeTokens"], 1)

	withItem := true
	res, err := sim.Open(ctx, tower, towersim.OpenRequest{Payload: drop.Payload, PayloadAuth: drop.PayloadAuth, CloseWithItem: &withItem})
	require.NoError(t, err)
	require.True(t, res.Opened, "refused: %v %s", res.Error, res.ErrorDescription)
	// token_used, door_opened, door_closed, and the tower's sync_commands report of the
	// commands the session pulled first (the reservation's generation floor).
	assert.Equal(t, 4, res.EventsUploaded, res.UploadError)
	assert.Positive(t, res.CommandsApplied)
	assert.Equal(t, "occupied", lockerStatusName(t, e, tok, tower, locker))
	a = assigned(t, e, tok)[locker]
	require.NotNil(t, a, "occupied lockers stay in the caller's possession")
	assert.Empty(t, a["possession"].(map[string]any)["activeTokens"])

	// The same token does not open twice.
	res, err = sim.Open(ctx, tower, towersim.OpenRequest{Payload: drop.Payload, PayloadAuth: drop.PayloadAuth})
	require.NoError(t, err)
	assert.False(t, res.Opened)

	// 6. Pickup token, door closed empty.
	r = e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/pickup-locker-tokens", tower, locker), tok, map[string]any{"duration": 300})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var pick towerTokenResp
	r.JSON(t, &pick)
	empty := false
	res, err = sim.Open(ctx, tower, towersim.OpenRequest{Payload: pick.Payload, PayloadAuth: pick.PayloadAuth, CloseWithItem: &empty})
	require.NoError(t, err)
	require.True(t, res.Opened, "refused: %v", res.Error)
	assert.Equal(t, "available", lockerStatusName(t, e, tok, tower, locker))
	// 7. Nothing in the caller's possession any more.
	assert.NotContains(t, assigned(t, e, tok), locker)

	// The workflows of both tokens ended as used.
	for _, id := range []string{drop.ID, pick.ID} {
		require.Eventually(t, func() bool {
			d, err := e.Temporal.DescribeWorkflowExecution(ctx, "locker-token/"+id, "")
			return err == nil && d.GetWorkflowExecutionInfo().GetStatus().String() == "Completed"
		}, 30*time.Second, 100*time.Millisecond, "token workflow %s completed", id)
	}
	// Two transaction rows: drop-off and pickup.
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM transactions WHERE locker_id = $1`, locker).Scan(&n))
	assert.Equal(t, 2, n)
}
