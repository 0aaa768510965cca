package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/webhook"
)

type pickupWindowResp struct {
	ID                string  `json:"id"`
	LockerID          int64   `json:"lockerId"`
	LocationID        int64   `json:"locationId"`
	Status            string  `json:"status"`
	OpenedAt          string  `json:"openedAt"`
	PickupBy          string  `json:"pickupBy"`
	Reminders         int     `json:"reminders"`
	RemindersSent     int     `json:"remindersSent"`
	NextReminderAt    *string `json:"nextReminderAt"`
	ExtensionsUsed    int     `json:"extensionsUsed"`
	ExtensionsLeft    int     `json:"extensionsLeft"`
	OnExpiry          string  `json:"onExpiry"`
	OverdueAt         *string `json:"overdueAt"`
	ReturnRequestedAt *string `json:"returnRequestedAt"`
	ClosedAt          *string `json:"closedAt"`
	DropoffTokenID    string  `json:"dropoffTokenId"`
}

func pwPath(tower string, locker int64, rest string) string {
	return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/pickup-window%s", tower, locker, rest)
}

func pwGet(t *testing.T, e *testenv.Env, tok, tower string, locker int64) pickupWindowResp {
	t.Helper()
	r := e.Do(http.MethodGet, pwPath(tower, locker, ""), tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var w pickupWindowResp
	r.JSON(t, &w)
	return w
}

func pwTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// appDo calls the app engine API with the demo organization's admin key.
func appDo(t *testing.T, e *testenv.Env, method, path string, body any) testenv.Response {
	t.Helper()
	return testenv.DoWithHeaders(t, method, e.URL+path, map[string]string{"x-api-key": e.Creds.AppEngineAPIKey}, body)
}

// pwDropoff leaves a parcel in a locker through the tower simulator and returns the window it
// opened.
func pwDropoff(t *testing.T, e *testenv.Env, sim *towersim.Simulator, tok, tower string, locker int64) pickupWindowResp {
	t.Helper()
	drop := lcMustIssue(t, e, tok, "dropoff", tower, locker, 600)
	lcRequireOpened(t, lcOpen(t, sim, tower, drop, true))
	w := pwGet(t, e, tok, tower, locker)
	require.Equal(t, drop.ID, w.DropoffTokenID)
	return w
}

// whWindow matches parcel.* events of one window.
func whWindow(id string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		w, _ := m["window"].(map[string]any)
		return w != nil && w["id"] == id
	}
}

// Each step of a pickup window, end to end through HTTP with short windows: the policy API and
// its refusals, the window opened by the drop-off, the reminder, an extension and its refusals,
// the overdue mark on time, the overdue list, the return token that opens the locker in the tower
// simulator, a plain pickup, another organization's 404 — and every parcel event delivered once,
// signed, to the organization's endpoint.
func TestPickupWindows(t *testing.T) {
	t.Parallel()
	e, sim, tok := lcStart(t)
	rc := subscribedReceiver(t, e)
	var delivered []string
	rival := e.NewOtherOrg(t)
	union := &e.Creds.SubOrganizationID // Union Station's sub-organization; Santa Monica Pier has none

	t.Run("policy API", func(t *testing.T) {
		r := appDo(t, e, http.MethodGet, "/pickup-policy", nil)
		requireProblem(t, r, http.StatusNotFound)
		for _, bad := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"window_seconds": 0}, "window_seconds"},
			{map[string]any{"window_seconds": 10, "reminder_offsets_seconds": []int{10}}, "reminder_offsets_seconds"},
			{map[string]any{"window_seconds": 10, "reminder_offsets_seconds": []int{1, 2, 3, 4, 5, 6}}, "reminder_offsets_seconds"},
			{map[string]any{"window_seconds": 10, "max_extensions": 1}, "extension_seconds"},
			{map[string]any{"window_seconds": 10, "on_expiry": "burn"}, "on_expiry"},
			{map[string]any{"window_seconds": "ten"}, "window_seconds"},
			{map[string]any{"window_seconds": 1 << 40}, "window_seconds"},
		} {
			r := appDo(t, e, http.MethodPut, "/pickup-policy", bad.body)
			m := requireProblem(t, r, http.StatusUnprocessableEntity)
			assert.Contains(t, fmt.Sprint(m), bad.field, "%v", bad.body)
		}
		r = appDo(t, e, http.MethodPut, fmt.Sprintf("/locations/%d/pickup-policy", rival.LocationID), map[string]any{"window_seconds": 10})
		requireProblem(t, r, http.StatusNotFound)
		r = appDo(t, e, http.MethodGet, fmt.Sprintf("/locations/%d/pickup-policy", rival.LocationID), nil)
		requireProblem(t, r, http.StatusNotFound)

		r = appDo(t, e, http.MethodPut, "/pickup-policy", map[string]any{"window_seconds": 5, "reminder_offsets_seconds": []int{3},
			"max_extensions": 1, "extension_seconds": 3})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := asMap(t, r.Body)
		assert.Equal(t, float64(5), m["window_seconds"])
		assert.Equal(t, []any{float64(3)}, m["reminder_offsets_seconds"])
		assert.Equal(t, "notify", m["on_expiry"])
		assert.Nil(t, m["location_id"])
		r = appDo(t, e, http.MethodGet, "/pickup-policy", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		// A sub-organization's key reads the policy but may not change it.
		sp := e.Creds.ServiceProvider
		r = appDo(t, e, http.MethodPost, "/auth/api-key", map[string]any{"client_id": sp.ClientID, "client_secret": sp.ClientSecret,
			"organization_id": e.Creds.OrganizationID, "sub_organization_id": e.Creds.SubOrganizationID})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		subKey := map[string]string{"x-api-key": r.Map(t)["api_key"].(string)}
		r = testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/pickup-policy", subKey, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			r = testenv.DoWithHeaders(t, method, e.URL+"/pickup-policy", subKey, map[string]any{"window_seconds": 60})
			requireProblem(t, r, http.StatusForbidden)
		}
		r = testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/pickup-windows", subKey, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})

	t.Run("reminder, extension, overdue, return", func(t *testing.T) {
		k := lockerID(t, e, towerUnion1, smallHigh)
		w := pwDropoff(t, e, sim, tok, towerUnion1, k)
		assert.Equal(t, "open", w.Status)
		assert.Equal(t, 5*time.Second, pwTime(t, w.PickupBy).Sub(pwTime(t, w.OpenedAt)), "the window runs from the drop-off")
		assert.Equal(t, 1, w.Reminders)
		assert.Equal(t, 1, w.ExtensionsLeft)
		require.NotNil(t, w.NextReminderAt)

		p, data := whOne(t, e, "parcel.pickup_reminder", union, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		assert.Equal(t, float64(1), data["window"].(map[string]any)["remindersSent"])
		assert.Equal(t, float64(1), data["detail"].(map[string]any)["reminder"])
		assert.Equal(t, float64(k), data["locker"].(map[string]any)["id"])
		assert.Equal(t, "occupied", data["locker"].(map[string]any)["status"].(map[string]any)["name"])

		r := e.Do(http.MethodPost, pwPath(towerUnion1, k, "/extensions"), tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var ext pickupWindowResp
		r.JSON(t, &ext)
		assert.Equal(t, 3*time.Second, pwTime(t, ext.PickupBy).Sub(pwTime(t, w.PickupBy)))
		assert.Equal(t, 0, ext.ExtensionsLeft)
		p, _ = whOne(t, e, "parcel.pickup_extended", union, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		r = e.Do(http.MethodPost, pwPath(towerUnion1, k, "/extensions"), tok, nil)
		assert.Contains(t, requireProblem(t, r, http.StatusConflict)["detail"], "no extensions left")

		p, data = whOne(t, e, "parcel.overdue", union, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		win := data["window"].(map[string]any)
		assert.Equal(t, "overdue", win["status"])
		assert.Equal(t, ext.PickupBy, win["pickupBy"])
		late := pwTime(t, p.CreatedAt).Sub(pwTime(t, ext.PickupBy))
		assert.True(t, late >= 0, "overdue is never early (%s)", late)
		t.Logf("parcel.overdue recorded %s after pickupBy", late)

		got := pwGet(t, e, tok, towerUnion1, k)
		assert.Equal(t, "overdue", got.Status)
		require.NotNil(t, got.OverdueAt)
		r = e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/overdue-lockers", got.LocationID), tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var overdue []struct {
			Locker struct {
				ID int64 `json:"id"`
			} `json:"locker"`
			Window pickupWindowResp `json:"window"`
		}
		r.JSON(t, &overdue)
		require.Len(t, overdue, 1)
		assert.Equal(t, k, overdue[0].Locker.ID)
		assert.Equal(t, w.ID, overdue[0].Window.ID)
		r = e.Do(http.MethodPost, pwPath(towerUnion1, k, "/extensions"), tok, nil)
		assert.Contains(t, requireProblem(t, r, http.StatusConflict)["detail"], "can no longer be extended")

		r = e.Do(http.MethodPost, pwPath(towerUnion1, k, "/return"), tok, map[string]any{"duration": 600, "client_info": "return run 7"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var ret struct {
			Window pickupWindowResp `json:"window"`
			Token  towerTokenResp   `json:"token"`
		}
		r.JSON(t, &ret)
		assert.Equal(t, "return_requested", ret.Window.Status)
		assert.Equal(t, "pickup", ret.Token.Type)
		p, data = whOne(t, e, "parcel.return_requested", union, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		assert.Equal(t, ret.Token.ID, data["detail"].(map[string]any)["tokenId"])

		lcRequireOpened(t, lcOpen(t, sim, towerUnion1, ret.Token, false))
		p, data = whOne(t, e, "parcel.returned", union, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		assert.Equal(t, "available", data["locker"].(map[string]any)["status"].(map[string]any)["name"])
		got = pwGet(t, e, tok, towerUnion1, k)
		assert.Equal(t, "returned", got.Status)
		require.NotNil(t, got.ClosedAt)
		r = e.Do(http.MethodPost, pwPath(towerUnion1, k, "/extensions"), tok, nil)
		assert.Contains(t, requireProblem(t, r, http.StatusConflict)["detail"], "already returned")
		r = e.Do(http.MethodPost, pwPath(towerUnion1, k, "/return"), tok, map[string]any{"duration": 600})
		assert.Contains(t, requireProblem(t, r, http.StatusConflict)["detail"], "already returned")
		assert.Equal(t, 0, lcCount(t, e, `SELECT count(*) FROM locker_tokens WHERE locker_id = $1 AND status = 'active'`, k),
			"a refused return issues no token")
	})

	t.Run("plain pickup closes the window; refusals", func(t *testing.T) {
		r := appDo(t, e, http.MethodPut, "/pickup-policy", map[string]any{"window_seconds": 3600, "reminder_offsets_seconds": []int{600},
			"max_extensions": 2, "extension_seconds": 600})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		k := lockerID(t, e, towerUnion2, smallHigh)
		w := pwDropoff(t, e, sim, tok, towerUnion2, k)
		assert.Equal(t, time.Hour, pwTime(t, w.PickupBy).Sub(pwTime(t, w.OpenedAt)))
		pick := lcMustIssue(t, e, tok, "pickup", towerUnion2, k, 600)
		lcRequireOpened(t, lcOpen(t, sim, towerUnion2, pick, false))
		got := pwGet(t, e, tok, towerUnion2, k)
		assert.Equal(t, "picked_up", got.Status)
		r = e.Do(http.MethodPost, pwPath(towerUnion2, k, "/extensions"), tok, nil)
		assert.Contains(t, requireProblem(t, r, http.StatusConflict)["detail"], "already picked up")
		// Its workflow ended with the window.
		require.Eventually(t, func() bool {
			return workflowClosed(t, e, "pickup-window/"+w.ID)
		}, lcWait, 50*time.Millisecond, "the window's workflow ends at the pickup")
		assert.Empty(t, whMatching(t, e, "parcel.returned", whWindow(w.ID)), "a pickup is no return")

		// No window: a locker never dropped off into, another organization's locker, a bad id.
		other := lockerID(t, e, towerUnion2, smallHigh+2)
		requireProblem(t, e.Do(http.MethodGet, pwPath(towerUnion2, other, ""), tok, nil), http.StatusNotFound)
		m := requireProblem(t, e.Do(http.MethodPost, pwPath(towerUnion2, other, "/extensions"), tok, nil), http.StatusConflict)
		assert.Contains(t, m["detail"], "no pickup window")
		requireProblem(t, e.Do(http.MethodPost, pwPath(towerUnion2, other, "/return"), tok, map[string]any{"duration": 60}), http.StatusConflict)
		requireProblem(t, e.Do(http.MethodPost, pwPath(rival.TowerID, rival.LockerID, "/return"), tok, map[string]any{"duration": 60}), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodPost, pwPath(towerUnion2, other, "/return"), tok, map[string]any{"duration": 0}), http.StatusUnprocessableEntity)
		requireProblem(t, e.Do(http.MethodGet, pwPath(rival.TowerID, rival.LockerID, ""), tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodPost, pwPath(rival.TowerID, rival.LockerID, "/extensions"), tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/overdue-lockers", rival.LocationID), tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/towers/"+towerUnion2+"/lockers/x1/pickup-window", tok, nil), http.StatusUnprocessableEntity)
	})

	t.Run("request_return on expiry, policy applied to open windows", func(t *testing.T) {
		k := lockerID(t, e, towerSantaMon, smallHigh)
		w := pwDropoff(t, e, sim, tok, towerSantaMon, k) // under the 1 h policy
		assert.Equal(t, "open", w.Status)
		r := appDo(t, e, http.MethodPut, fmt.Sprintf("/locations/%d/pickup-policy", w.LocationID),
			map[string]any{"window_seconds": 2, "on_expiry": "request_return", "apply_to_open_windows": true})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := asMap(t, r.Body)
		assert.Equal(t, float64(1), m["retimed_windows"])
		assert.Equal(t, float64(w.LocationID), m["location_id"])
		p, data := whOne(t, e, "parcel.overdue", nil, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		assert.Equal(t, "return_requested", data["window"].(map[string]any)["status"])
		p, data = whOne(t, e, "parcel.return_requested", nil, lcWait, whWindow(w.ID))
		delivered = append(delivered, p.ID)
		assert.Equal(t, "window_ran_out", data["detail"].(map[string]any)["reason"])

		r = appDo(t, e, http.MethodGet, fmt.Sprintf("/pickup-windows?overdue=true&location_id=%d", w.LocationID), nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var list struct {
			Data []map[string]any `json:"data"`
		}
		r.JSON(t, &list)
		require.Len(t, list.Data, 1)
		assert.Equal(t, w.ID, list.Data[0]["id"])
		assert.Equal(t, "return_requested", list.Data[0]["status"])
		requireProblem(t, appDo(t, e, http.MethodGet, "/pickup-windows?location_id=abc", nil), http.StatusUnprocessableEntity)
		require.Equal(t, http.StatusNoContent, appDo(t, e, http.MethodDelete, fmt.Sprintf("/locations/%d/pickup-policy", w.LocationID), nil).Status)
		requireProblem(t, appDo(t, e, http.MethodDelete, fmt.Sprintf("/locations/%d/pickup-policy", w.LocationID), nil), http.StatusNotFound)
	})

	// Every parcel event reached the endpoint once, signed with its secret.
	for _, id := range delivered {
		require.True(t, strings.HasPrefix(id, webhook.EventIDPrefix))
		assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`,
			strings.TrimPrefix(id, webhook.EventIDPrefix)), "%s: one delivery", id)
		assert.Eventually(t, func() bool { _, ok := rc.got(id); return ok }, lcWait, 50*time.Millisecond, "%s delivered", id)
	}
	rc.mu.Lock()
	assert.Zero(t, rc.forged)
	rc.mu.Unlock()
}

// A window whose end passes while no worker runs is marked overdue once when one is back (the
// durable timer fires late, never twice); its reminder likewise.
func TestPickupWindowAcrossWorkerRestart(t *testing.T) {
	t.Parallel()
	e, sim, tok := lcStart(t)
	r := appDo(t, e, http.MethodPut, "/pickup-policy", map[string]any{"window_seconds": 3, "reminder_offsets_seconds": []int{2}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = appDo(t, e, http.MethodPost, "/webhooks/endpoints", map[string]any{"url": "http://127.0.0.1:9/hooks"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	k := lockerID(t, e, towerPasadena, smallHigh)
	w := pwDropoff(t, e, sim, tok, towerPasadena, k)
	e.StopWorker()
	time.Sleep(time.Until(pwTime(t, w.PickupBy)) + 500*time.Millisecond)
	assert.Equal(t, "open", pwGet(t, e, tok, towerPasadena, k).Status, "nothing runs the window while no worker does")
	e.StartWorker()
	whOne(t, e, "parcel.overdue", nil, lcWait, whWindow(w.ID))
	require.Eventually(t, func() bool { return workflowClosed(t, e, "pickup-window/"+w.ID) }, lcWait, 50*time.Millisecond)
	assert.Len(t, whMatching(t, e, "parcel.overdue", whWindow(w.ID)), 1)
	assert.LessOrEqual(t, len(whMatching(t, e, "parcel.pickup_reminder", whWindow(w.ID))), 1)
	got := pwGet(t, e, tok, towerPasadena, k)
	assert.Equal(t, "overdue", got.Status)
	b, _ := json.Marshal(got)
	t.Logf("window after the restart: %s", b)
}

// workflowClosed reports whether the workflow's latest run has ended.
func workflowClosed(t *testing.T, e *testenv.Env, id string) bool {
	t.Helper()
	d, err := e.Temporal.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		return false
	}
	return d.GetWorkflowExecutionInfo().GetCloseTime() != nil
}

// The worker's due pass marks a window past its end overdue, with its event, once; the
// window's workflow, firing afterwards, finds the mark made and ends without a second event.
func TestPickupDuePassMarksOnce(t *testing.T) {
	t.Parallel()
	e, sim, tok := lcStart(t)
	r := appDo(t, e, http.MethodPut, "/pickup-policy", map[string]any{"window_seconds": 2})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = appDo(t, e, http.MethodPost, "/webhooks/endpoints", map[string]any{"url": "http://127.0.0.1:9/hooks"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	k := lockerID(t, e, towerSantaMon, mediumHigh)
	w := pwDropoff(t, e, sim, tok, towerSantaMon, k)
	e.StopWorker()
	time.Sleep(time.Until(pwTime(t, w.PickupBy)) + 200*time.Millisecond)
	marked, err := e.Store.MarkDuePickupWindows(context.Background(), 500)
	require.NoError(t, err)
	require.Len(t, marked, 1)
	assert.Equal(t, w.ID, marked[0].ID.String())
	assert.Equal(t, "overdue", marked[0].Status)
	again, err := e.Store.MarkDuePickupWindows(context.Background(), 500)
	require.NoError(t, err)
	assert.Empty(t, again, "a second pass finds nothing due")
	whOne(t, e, "parcel.overdue", nil, 0, whWindow(w.ID))
	e.StartWorker()
	require.Eventually(t, func() bool { return workflowClosed(t, e, "pickup-window/"+w.ID) }, lcWait, 50*time.Millisecond)
	assert.Len(t, whMatching(t, e, "parcel.overdue", whWindow(w.ID)), 1, "the workflow found the mark made")
	assert.Equal(t, "overdue", pwGet(t, e, tok, towerSantaMon, k).Status)
}
