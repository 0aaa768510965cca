package apiserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/webhook"
)

// whReceiver is a customer's backend: it keeps every delivery whose signature verifies with
// the endpoint's key, answers it 204, and counts the others.
type whReceiver struct {
	mu     sync.Mutex
	key    []byte
	bodies map[string]webhook.Payload // by webhook-id
	forged int
}

func newWHReceiver(t *testing.T) (*whReceiver, string) {
	t.Helper()
	rc := &whReceiver{bodies: map[string]webhook.Payload{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		var p webhook.Payload
		if webhook.Verify(rc.key, r.Header, b, time.Now(), 5*time.Minute) != nil || json.Unmarshal(b, &p) != nil {
			rc.forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rc.bodies[r.Header.Get(webhook.HeaderID)] = p
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/hooks"
}

// subscribedReceiver starts a receiver and registers it, with the demo organization's admin
// key, as an endpoint of the organization; the receiver checks signatures with the secret the
// endpoint was given.
func subscribedReceiver(t *testing.T, e *testenv.Env) *whReceiver {
	t.Helper()
	rc, hookURL := newWHReceiver(t)
	r := doKey(t, e, http.MethodPost, "/webhooks/endpoints", e.Creds.AppEngineAPIKey, map[string]any{"url": hookURL})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	key, err := webhook.ParseSecret(asMap(t, r.Body)["secret"].(string))
	require.NoError(t, err)
	rc.mu.Lock()
	rc.key = key
	rc.mu.Unlock()
	return rc
}

func (rc *whReceiver) got(id string) (webhook.Payload, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	p, ok := rc.bodies[id]
	return p, ok
}

// whEvents lists the organization's events of one type through the event log API.
func whEvents(t *testing.T, e *testenv.Env, typ string) []webhook.Payload {
	t.Helper()
	r := testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/webhooks/events?limit=100&type="+url.QueryEscape(typ),
		map[string]string{"x-api-key": e.Creds.AppEngineAPIKey}, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page struct {
		Data []webhook.Payload `json:"data"`
	}
	r.JSON(t, &page)
	return page.Data
}

// whMatching are the events of typ whose data match.
func whMatching(t *testing.T, e *testenv.Env, typ string, match func(map[string]any) bool) []webhook.Payload {
	t.Helper()
	var out []webhook.Payload
	for _, p := range whEvents(t, e, typ) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(p.Data, &m))
		if match(m) {
			out = append(out, p)
		}
	}
	return out
}

// whOne requires exactly one event of typ whose data match (waiting up to wait for it to be
// recorded), of the demo organization and sub-organization subOrg, and returns its data.
func whOne(t *testing.T, e *testenv.Env, typ string, subOrg *int64, wait time.Duration, match func(map[string]any) bool) (webhook.Payload, map[string]any) {
	t.Helper()
	if wait > 0 {
		require.Eventually(t, func() bool { return len(whMatching(t, e, typ, match)) > 0 }, wait, 50*time.Millisecond, "%s recorded", typ)
	}
	evs := whMatching(t, e, typ, match)
	require.Len(t, evs, 1, "%s events", typ)
	p := evs[0]
	assert.Equal(t, e.Creds.OrganizationID, p.OrganizationID)
	assert.Equal(t, subOrg, p.SubOrganizationID, "%s: sub-organization", typ)
	var m map[string]any
	require.NoError(t, json.Unmarshal(p.Data, &m))
	return p, m
}

func whDataIs(key string, v any) func(map[string]any) bool {
	return func(m map[string]any) bool { return m[key] == v }
}

func whUsedLocker(id int64) func(map[string]any) bool {
	return func(m map[string]any) bool {
		k, _ := m["locker"].(map[string]any)
		return k != nil && k["id"] == float64(id)
	}
}

// asMap decodes a JSON body (or re-encodes a value) into a generic map.
func asMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// The tower API's state changes, made over HTTP and by the tower's own uploads, record their
// webhook events with the objects exactly as the API shows them, once each; failed changes
// record nothing; and every event reaches the organization's endpoint.
func TestTowerWebhookEvents(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	sim := e.TowerSim(t)
	tok := e.Token("service_provider")
	rc := subscribedReceiver(t, e)
	subOrg := e.Creds.SubOrganizationID // Union Station's; Santa Monica Pier has none
	var delivered []string

	t.Run("reservation.created, failed reservation, reservation.cancelled", func(t *testing.T) {
		k := lockerID(t, e, towerUnion1, smallHigh)
		r := e.Do(http.MethodPost, reservePath(towerUnion1, k), tok, map[string]any{"duration": 600})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		created := asMap(t, r.Body)
		p, data := whOne(t, e, "reservation.created", &subOrg, 0, whDataIs("id", created["id"]))
		assert.Equal(t, created, data, "the reservation as the API answered it")
		delivered = append(delivered, p.ID)

		r = e.Do(http.MethodPost, reservePath(towerUnion1, k), tok, map[string]any{"duration": 600})
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Len(t, whMatching(t, e, "reservation.created", whDataIs("lockerId", float64(k))), 1, "a failed reservation records nothing")

		res := reservation{ID: created["id"].(string), LockerID: k, TowerID: towerUnion1}
		require.Equal(t, http.StatusNoContent, cancelReservation(t, e, tok, res).Status)
		require.Equal(t, http.StatusNoContent, cancelReservation(t, e, tok, res).Status, "a repeated cancel")
		r = e.Do(http.MethodGet, "/api/v1/reservations/"+res.ID, tok, nil)
		require.Equal(t, http.StatusOK, r.Status)
		p, data = whOne(t, e, "reservation.cancelled", &subOrg, 0, whDataIs("id", res.ID))
		assert.Equal(t, asMap(t, r.Body), data)
		assert.Equal(t, "cancelled", data["status"])
		delivered = append(delivered, p.ID)
	})

	t.Run("reservation.expired", func(t *testing.T) {
		k := lockerID(t, e, towerSantaMon, smallHigh)
		res := reserve(t, e, tok, towerSantaMon, k, 1)
		p, data := whOne(t, e, "reservation.expired", nil, lcWait, whDataIs("id", res.ID))
		r := e.Do(http.MethodGet, "/api/v1/reservations/"+res.ID, tok, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, asMap(t, r.Body), data)
		assert.Equal(t, "expired", data["status"])
		delivered = append(delivered, p.ID)
	})

	t.Run("locker.released", func(t *testing.T) {
		k := lockerID(t, e, towerUnion1, smallHigh+1)
		lcMustIssue(t, e, tok, "dropoff", towerUnion1, k, 600)
		r := e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		p, data := whOne(t, e, "locker.released", &subOrg, 0, whDataIs("id", float64(k)))
		assert.Equal(t, asMap(t, r.Body), data, "the locker as the API answered it")
		delivered = append(delivered, p.ID)

		r = e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), tok, nil)
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Len(t, whMatching(t, e, "locker.released", whDataIs("id", float64(k))), 1, "a failed release records nothing")
	})

	t.Run("locker_token.expired", func(t *testing.T) {
		k := lockerID(t, e, towerSantaMon, smallHigh+1)
		r := lcIssue(t, e, tok, "dropoff", towerSantaMon, k, map[string]any{"duration": 1, "client_info": "order 5"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		issued := asMap(t, r.Body)
		p, data := whOne(t, e, "locker_token.expired", nil, lcWait, whDataIs("id", issued["id"]))
		delete(issued, "payload")
		delete(issued, "payload_auth")
		assert.Equal(t, issued, data, "the token as the API answered it, without what opens the locker")
		delivered = append(delivered, p.ID)
	})

	t.Run("locker.dropoff_completed and locker.pickup_completed", func(t *testing.T) {
		k := lockerID(t, e, towerUnion2, smallHigh)
		r := lcIssue(t, e, tok, "dropoff", towerUnion2, k, map[string]any{"duration": 600, "client_info": "order 42"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var drop towerTokenResp
		r.JSON(t, &drop)
		lcRequireOpened(t, lcOpen(t, sim, towerUnion2, drop, true))
		p, data := whOne(t, e, "locker.dropoff_completed", &subOrg, 0, whUsedLocker(k))
		assert.Equal(t, asMap(t, []byte(mustJSON(t, towerLocker(t, e, tok, towerUnion2, k)))), data["locker"], "the locker as the API shows it")
		assert.Equal(t, "occupied", data["locker"].(map[string]any)["status"].(map[string]any)["name"])
		assert.Equal(t, drop.ID, data["tokenId"])
		assert.Equal(t, "order 42", data["clientInfo"])
		assert.Regexp(t, timestampRE, data["completedAt"])
		delivered = append(delivered, p.ID)

		pick := lcMustIssue(t, e, tok, "pickup", towerUnion2, k, 600)
		lcRequireOpened(t, lcOpen(t, sim, towerUnion2, pick, false))
		p, data = whOne(t, e, "locker.pickup_completed", &subOrg, 0, whUsedLocker(k))
		assert.Equal(t, asMap(t, []byte(mustJSON(t, towerLocker(t, e, tok, towerUnion2, k)))), data["locker"])
		assert.Equal(t, "available", data["locker"].(map[string]any)["status"].(map[string]any)["name"])
		assert.Equal(t, pick.ID, data["tokenId"])
		assert.Nil(t, data["clientInfo"])
		delivered = append(delivered, p.ID)
		assert.Len(t, whMatching(t, e, "locker.dropoff_completed", whUsedLocker(k)), 1)
	})

	// Every event reached the endpoint, once recorded: delivery row, outbox row, workflow.
	for _, id := range delivered {
		require.True(t, strings.HasPrefix(id, webhook.EventIDPrefix))
		assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`,
			strings.TrimPrefix(id, webhook.EventIDPrefix)), "%s: one delivery", id)
		assert.Eventually(t, func() bool { _, ok := rc.got(id); return ok }, lcWait, 50*time.Millisecond, "%s delivered", id)
		if p, ok := rc.got(id); ok {
			assert.Equal(t, id, p.ID, fmt.Sprintf("%s: the delivery carries its event", id))
		}
	}
	rc.mu.Lock()
	assert.Zero(t, rc.forged, "every delivery's signature verified with the endpoint's secret")
	rc.mu.Unlock()
}
