package towersim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// control starts the control API of a simulator that uploads to cloud.
func control(t *testing.T, cloud *fakeCloud, clock *fakeClock) (*httptest.Server, *towersim.Simulator) {
	t.Helper()
	sim := newSim(t, simConfig(cloud.URL(), ""), clock)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return srv, sim
}

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body %s", raw)
	return resp.StatusCode, out
}

func openBody(t *testing.T, tok issued, extra string) string {
	t.Helper()
	return `{"payload":"` + tok.payload + `","payload_auth":"` + tok.auth + `"` + extra + `}`
}

func TestControlOpenAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prepare may issue tokens, break the cloud or open beforehand; it returns the path
		// tower id and the body.
		prepare    func(t *testing.T, cloud *fakeCloud, srvURL string) (tower, body string)
		wantStatus int
		want       map[string]any // exact answer
		wantKeys   map[string]any // answer fields checked one by one
	}{
		{
			name: "opened and uploaded",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return towerA, openBody(t, issue(t, secretA, nil), `,"close_with_item":true`)
			},
			wantStatus: http.StatusOK,
			want: map[string]any{
				"opened": true, "lockerId": 959.0, "eventsUploaded": 3.0, "error": nil,
				"eventsPending": 0.0, "tokenType": "dropoff", "itemInside": true, "claim": "developer", "commandsApplied": 0.0,
			},
		},
		{
			name: "tower id in upper case",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return strings.ToUpper(towerB), openBody(t, issue(t, secretB, func(tk *towerproto.Token) { tk.TowerID = towerB }), "")
			},
			wantStatus: http.StatusOK,
			wantKeys:   map[string]any{"opened": true, "error": nil},
		},
		{
			name: "pickup closes empty unless told otherwise",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return towerA, openBody(t, issue(t, secretA, func(tk *towerproto.Token) { tk.Type = towerproto.TokenPickup }), "")
			},
			wantStatus: http.StatusOK,
			wantKeys:   map[string]any{"opened": true, "tokenType": "pickup", "itemInside": false},
		},
		{
			name: "drop-off closes with the item unless told otherwise",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return towerA, openBody(t, issue(t, secretA, nil), `,"access_token":"sdk-token"`)
			},
			wantStatus: http.StatusOK,
			wantKeys:   map[string]any{"opened": true, "tokenType": "dropoff", "itemInside": true, "eventsUploaded": 3.0},
		},
		{
			name: "refused: a normal answer with the code",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return towerA, openBody(t, issue(t, secretA, func(tk *towerproto.Token) { tk.ExpiresAt = t0 }), "")
			},
			wantStatus: http.StatusOK,
			want: map[string]any{
				"opened": false, "lockerId": 959.0, "eventsUploaded": 0.0, "error": "expired",
				"errorDescription": "the token has expired by the tower's clock", "eventsPending": 0.0, "itemInside": false,
				"claim": "developer", "commandsApplied": 0.0, "detail": "open locker: token refused: expired: at 2030-03-04T12:00:00Z",
			},
		},
		{
			name: "refused: forged token names no locker",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				tok := issue(t, secretB, nil)
				return towerA, openBody(t, tok, "")
			},
			wantStatus: http.StatusOK,
			wantKeys:   map[string]any{"opened": false, "lockerId": 0.0, "error": "invalid_token"},
		},
		{
			name: "refused: used twice",
			prepare: func(t *testing.T, _ *fakeCloud, srvURL string) (string, string) {
				body := openBody(t, issue(t, secretA, nil), "")
				status, _ := call(t, http.MethodPost, srvURL+"/sim/towers/"+towerA+"/open", body)
				require.Equal(t, http.StatusOK, status)
				return towerA, body
			},
			wantStatus: http.StatusOK,
			wantKeys:   map[string]any{"opened": false, "lockerId": 959.0, "error": "already_used"},
		},
		{
			name: "opened, upload failed",
			prepare: func(t *testing.T, cloud *fakeCloud, _ string) (string, string) {
				cloud.setFail(http.StatusServiceUnavailable)
				return towerA, openBody(t, issue(t, secretA, nil), "")
			},
			wantStatus: http.StatusOK,
			wantKeys: map[string]any{
				"opened": true, "lockerId": 959.0, "eventsUploaded": 0.0, "error": nil, "eventsPending": 3.0,
				"uploadError": `upload events: cloud answered 503: {"detail":"cloud is down"}`,
			},
		},
		{
			name: "unknown tower",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				return "0100000000000099", openBody(t, issue(t, secretA, nil), "")
			},
			wantStatus: http.StatusNotFound,
			want:       map[string]any{"error": "tower_not_found", "message": `no simulated tower "0100000000000099"`},
		},
		{
			name: "malformed JSON",
			prepare: func(*testing.T, *fakeCloud, string) (string, string) {
				return towerA, `{"payload": `
			},
			wantStatus: http.StatusBadRequest,
			wantKeys:   map[string]any{"error": "invalid_request"},
		},
		{
			name: "wrong JSON types",
			prepare: func(*testing.T, *fakeCloud, string) (string, string) {
				return towerA, `{"payload": 12, "payload_auth": "00", "close_with_item": "yes"}`
			},
			wantStatus: http.StatusBadRequest,
			wantKeys:   map[string]any{"error": "invalid_request"},
		},
		{
			name: "two JSON objects",
			prepare: func(t *testing.T, _ *fakeCloud, _ string) (string, string) {
				b := openBody(t, issue(t, secretA, nil), "")
				return towerA, b + b
			},
			wantStatus: http.StatusBadRequest,
			wantKeys:   map[string]any{"error": "invalid_request"},
		},
		{
			name: "missing payload_auth",
			prepare: func(*testing.T, *fakeCloud, string) (string, string) {
				return towerA, `{"payload": "01ab"}`
			},
			wantStatus: http.StatusBadRequest,
			want:       map[string]any{"error": "invalid_request", "message": "payload and payload_auth are required"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cloud := newFakeCloud(t)
			srv, _ := control(t, cloud, newClock())
			tower, body := tc.prepare(t, cloud, srv.URL)
			status, got := call(t, http.MethodPost, srv.URL+"/sim/towers/"+tower+"/open", body)
			assert.Equal(t, tc.wantStatus, status)
			if tc.want != nil {
				assert.Equal(t, tc.want, got)
			}
			for k, v := range tc.wantKeys {
				assert.Contains(t, got, k)
				assert.Equal(t, v, got[k], k)
			}
		})
	}
}

func TestControlReads(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	srv, _ := control(t, cloud, newClock())
	tok := issue(t, secretA, nil)
	status, _ := call(t, http.MethodPost, srv.URL+"/sim/towers/"+towerA+"/open", openBody(t, tok, ""))
	require.Equal(t, http.StatusOK, status)

	t.Run("list towers", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/sim/towers")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var towers []towersim.TowerStatus
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&towers))
		require.Len(t, towers, 2)
		assert.Equal(t, towerA, towers[0].ID)
		assert.Equal(t, towerB, towers[1].ID)
		assert.Equal(t, []towersim.LockerStatus{
			{LockerID: 959, ItemInside: true}, {LockerID: 960}, {LockerID: 961},
		}, towers[0].Lockers)
	})

	t.Run("one tower", func(t *testing.T) {
		status, got := call(t, http.MethodGet, srv.URL+"/sim/towers/"+strings.ToUpper(towerB), "")
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, towerB, got["id"])
	})

	t.Run("event log", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/sim/towers/" + towerA + "/events")
		require.NoError(t, err)
		defer resp.Body.Close()
		var got towersim.EventsResponse
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		assert.Equal(t, towerA, got.TowerID)
		assert.Equal(t, uint32(1), got.BootEpoch)
		require.Len(t, got.Events, 3)
		assert.Equal(t, towersim.EventJSON{
			BootEpoch: 1, Seq: 3, Kind: "door_closed", At: t0, LockerID: 959,
			TokenID: uuid.UUID(tok.ID).String(), ItemInside: true, Uploaded: true,
		}, got.Events[2])
	})

	t.Run("sync with nothing queued", func(t *testing.T) {
		status, got := call(t, http.MethodPost, srv.URL+"/sim/towers/"+towerA+"/sync", "")
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, map[string]any{"eventsUploaded": 0.0, "eventsPending": 0.0, "commandsApplied": 0.0}, got)
	})

	t.Run("unknown routes and methods answer JSON", func(t *testing.T) {
		status, got := call(t, http.MethodGet, srv.URL+"/nope", "")
		assert.Equal(t, http.StatusNotFound, status)
		assert.Equal(t, "not_found", got["error"])
		status, got = call(t, http.MethodGet, srv.URL+"/sim/towers/"+towerA+"/open", "")
		assert.Equal(t, http.StatusMethodNotAllowed, status)
		assert.Equal(t, "method_not_allowed", got["error"])
		status, got = call(t, http.MethodGet, srv.URL+"/sim/towers/ffff/events", "")
		assert.Equal(t, http.StatusNotFound, status)
		assert.Equal(t, "tower_not_found", got["error"])
	})
}

func TestControlSyncDeliversQueuedEvents(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	srv, _ := control(t, cloud, newClock())
	cloud.setFail(http.StatusBadGateway)
	status, _ := call(t, http.MethodPost, srv.URL+"/sim/towers/"+towerA+"/open", openBody(t, issue(t, secretA, nil), ""))
	require.Equal(t, http.StatusOK, status)

	status, got := call(t, http.MethodPost, srv.URL+"/sim/towers/"+towerA+"/sync", `{}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, 3.0, got["eventsPending"])
	assert.NotEmpty(t, got["uploadError"])

	cloud.setFail(0)
	status, got = call(t, http.MethodPost, srv.URL+"/sim/towers/"+towerA+"/sync", `{"access_token":"explicit"}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"eventsUploaded": 3.0, "eventsPending": 0.0, "commandsApplied": 0.0}, got)
	requests, _, _ := cloud.snapshot()
	require.Len(t, requests, 1)
	assert.Equal(t, "explicit", requests[0].bearer)
}

func TestControlClient(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	srv, _ := control(t, cloud, newClock())
	client := towersim.NewControlClient(srv.URL+"/", nil)
	ctx := context.Background()
	tok := issue(t, secretA, nil)

	resp, err := client.Open(ctx, towerA, openReq(tok, true))
	require.NoError(t, err)
	assert.True(t, resp.Opened)
	assert.Nil(t, resp.Error)
	assert.Equal(t, int64(959), resp.LockerID)
	assert.Equal(t, 3, resp.EventsUploaded)

	resp, err = client.Open(ctx, towerA, openReq(tok, true))
	require.NoError(t, err)
	assert.False(t, resp.Opened)
	require.NotNil(t, resp.Error)
	assert.Equal(t, "already_used", *resp.Error)

	_, err = client.Open(ctx, "0100000000000099", openReq(tok, true))
	var ce *towersim.ControlError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, http.StatusNotFound, ce.StatusCode)
	assert.Equal(t, "tower_not_found", ce.Code)
}
