package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// TestSDKBodiesIgnoreUnknownProperties: a property Harbor's SDK may add one day is ignored on
// every /sdk/v1 body (DESIGN §8), while the other surfaces keep refusing what they do not know.
func TestSDKBodiesIgnoreUnknownProperties(t *testing.T) {
	t.Parallel()
	e, tw, tok := startSDKTower(t, "01000000000000c3", 1)

	r := e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/session-token", tok,
		map[string]any{"duration": 60, "claims": []string{"sync_packet"}, "version": "", "appBuild": 412, "device": map[string]any{"os": "android"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var sess sessionAnswer
	r.JSON(t, &sess)
	require.NotNil(t, sess.TowerID)
	assert.Equal(t, tw.Upper, *sess.TowerID)

	env, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: tw.ID, BootEpoch: 1, Events: []towerproto.Event{
		{Seq: 1, Kind: towerproto.EventDoorOpened, At: time.Now().UTC().Truncate(time.Millisecond), LockerID: tw.LockerID}}},
		towerproto.EventKey(tw.Secret))
	require.NoError(t, err)
	batch := map[string]any{"syncEventStart": env.SyncEventStart, "syncEventCount": env.SyncEventCount,
		"payload": env.Payload, "payloadAuth": env.PayloadAuth, "firstEventId": 1, "rssi": -60}
	r = e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/events", tok, []any{batch})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var res struct {
		Accepted *int `json:"accepted"`
	}
	r.JSON(t, &res)
	require.NotNil(t, res.Accepted)
	assert.Equal(t, 1, *res.Accepted)

	r = e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/reset-events", tok, map[string]any{"reason": "log corrupted", "syncEventStart": 9})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// What is known is still checked.
	r = e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/session-token", tok, map[string]any{"duration": 0, "claims": []string{"sync_packet"}, "extra": true})
	requireProblem(t, r, http.StatusUnprocessableEntity)

	// The tower API's upload of the same batch, and the token a service provider asks for its
	// user, refuse a property they do not know.
	r = e.Do(http.MethodPost, "/api/v1/towers/"+tw.ID+"/events", tok, []any{batch})
	requireProblem(t, r, http.StatusUnprocessableEntity)
	assert.Contains(t, string(r.Body), "unexpected property")
	r = e.Do(http.MethodPost, "/api/v1/login/authorize", e.Token(), map[string]any{"userId": "u-1", "extra": 1})
	requireProblem(t, r, http.StatusUnprocessableEntity)
	assert.Contains(t, string(r.Body), "unexpected property")
}
