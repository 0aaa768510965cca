package apiserver_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// lcUse is the three events a tower records for one token use, from seq on.
func lcUse(t *testing.T, e *testenv.Env, tk towerTokenResp, seq uint64, withItem bool) []towerproto.Event {
	t.Helper()
	dec := lcDecode(t, e, tk)
	at := time.Now().Truncate(time.Millisecond)
	base := towerproto.Event{At: at, LockerID: dec.LockerID, TokenID: dec.ID, Generation: dec.Generation}
	used, opened, closed := base, base, base
	used.Seq, used.Kind = seq, towerproto.EventTokenUsed
	opened.Seq, opened.Kind = seq+1, towerproto.EventDoorOpened
	closed.Seq, closed.Kind, closed.ItemInside = seq+2, towerproto.EventDoorClosed, withItem
	return []towerproto.Event{used, opened, closed}
}

// lcBatch signs events as the tower would (signer's key, claimed tower id).
func lcBatch(t *testing.T, e *testenv.Env, signer, claimed string, epoch uint32, events ...towerproto.Event) towerproto.BatchEnvelope {
	t.Helper()
	env, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: claimed, BootEpoch: epoch, Events: events},
		towerproto.EventKey(lcDemoTower(t, e, signer).Secret))
	require.NoError(t, err)
	return env
}

func lcUpload(t *testing.T, e *testenv.Env, tok, prefix, tower string, body any) testenv.Response {
	t.Helper()
	return e.Do(http.MethodPost, prefix+"/towers/"+tower+"/events", tok, body)
}

// lcUploadOK uploads and requires the 200 with the given counts.
func lcUploadOK(t *testing.T, e *testenv.Env, tok, tower string, accepted, duplicates int, batches ...towerproto.BatchEnvelope) {
	t.Helper()
	r := lcUpload(t, e, tok, "/api/v1", tower, batches)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `{"accepted":`+strconv.Itoa(accepted)+`,"duplicates":`+strconv.Itoa(duplicates)+`}`, string(r.Body))
}

// lcEventsStart starts an env and returns it with a service-provider token and a tower-access
// (SDK) token, the two callers of the event-upload tests.
func lcEventsStart(t *testing.T) (*testenv.Env, string, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{})
	return e, e.Token("service_provider"), e.Token("tower_access")
}

// lcAnomalyMetric reads lockernet_tower_token_uses_total{outcome="anomaly"}.
func lcAnomalyMetric(t *testing.T, e *testenv.Env) int {
	t.Helper()
	r := testenv.DoWithHeaders(t, http.MethodGet, e.MetricsURL(e.URL)+"/metrics", nil, nil)
	require.Equal(t, http.StatusOK, r.Status)
	m := regexp.MustCompile(`(?m)^lockernet_tower_token_uses_total\{outcome="anomaly"\} (\d+)$`).FindSubmatch(r.Body)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// Who may upload, and what a batch must be: anything unverifiable answers 4xx and changes
// nothing; a verified upload applies once, and its replay is recognised.
func TestLifecycleEventsVerification(t *testing.T) {
	t.Parallel()
	e, sp, sdk := lcEventsStart(t)
	k := lockerID(t, e, towerUnion1, smallHigh)
	d := lcMustIssue(t, e, sp, "dropoff", towerUnion1, k, 600)
	events := lcUse(t, e, d, 1, true)
	good := lcBatch(t, e, towerUnion1, towerUnion1, 7001, events...)

	// Scope and tenancy.
	for _, prefix := range []string{"/api/v1", "/sdk/v1"} {
		requireProblem(t, lcUpload(t, e, sp, prefix, towerUnion1, []towerproto.BatchEnvelope{good}), http.StatusForbidden)
		requireProblem(t, lcUpload(t, e, "", prefix, towerUnion1, []towerproto.BatchEnvelope{good}), http.StatusUnauthorized)
	}
	other := e.NewOtherOrg(t)
	otherSDK := clientToken(t, e, other.ClientID, other.ClientSecret, "tower_access")
	requireProblem(t, lcUpload(t, e, otherSDK, "/api/v1", towerUnion1, []towerproto.BatchEnvelope{good}), http.StatusNotFound)
	requireProblem(t, lcUpload(t, e, otherSDK, "/sdk/v1", towerUnion1, []towerproto.BatchEnvelope{good}), http.StatusNotFound)
	requireProblem(t, lcUpload(t, e, sdk, "/api/v1", other.TowerID, []towerproto.BatchEnvelope{good}), http.StatusNotFound)
	requireProblem(t, lcUpload(t, e, sdk, "/api/v1", "0100000000000099", []towerproto.BatchEnvelope{good}), http.StatusNotFound)

	// Batches that do not verify.
	forgedAuth := good
	forgedAuth.PayloadAuth = lcFlipHex(t, good.PayloadAuth, 5)
	forgedPayload := good
	forgedPayload.Payload = lcFlipHex(t, good.Payload, towerproto.BatchPayloadLen(3)-1) // the last event's flags
	otherTower := lcBatch(t, e, towerUnion2, towerUnion2, 7001, events...)
	otherKey := lcBatch(t, e, towerUnion2, towerUnion1, 7001, events...)
	wrongStart, wrongCount, zeroStart := good, good, good
	wrongStart.SyncEventStart = 2
	wrongCount.SyncEventCount = 2
	zeroStart.SyncEventStart = 0
	odd, notHex, noAuth := good, good, good
	odd.Payload = good.Payload[:len(good.Payload)-1]
	notHex.Payload = "zz" + good.Payload[2:]
	noAuth.PayloadAuth = ""
	upper := good
	upper.Payload = "0A" + good.Payload[2:]
	for name, b := range map[string]any{
		"forged MAC":                   []towerproto.BatchEnvelope{forgedAuth},
		"forged payload":               []towerproto.BatchEnvelope{forgedPayload},
		"batch of another tower":       []towerproto.BatchEnvelope{otherTower},
		"signed with another key":      []towerproto.BatchEnvelope{otherKey},
		"start mismatch":               []towerproto.BatchEnvelope{wrongStart},
		"count mismatch":               []towerproto.BatchEnvelope{wrongCount},
		"zero start":                   []towerproto.BatchEnvelope{zeroStart},
		"odd-length hex":               []towerproto.BatchEnvelope{odd},
		"not hex":                      []towerproto.BatchEnvelope{notHex},
		"no auth":                      []towerproto.BatchEnvelope{noAuth},
		"good batch then a forged one": []towerproto.BatchEnvelope{good, forgedAuth},
		"not an array":                 map[string]any{"payload": good.Payload},
		"wrong field types":            `[{"syncEventStart": "1", "syncEventCount": 3, "payload": "00", "payloadAuth": "00"}]`,
		"truncated payload":            []towerproto.BatchEnvelope{{SyncEventStart: 1, SyncEventCount: 3, Payload: good.Payload[:40], PayloadAuth: good.PayloadAuth}},
		"unknown version":              []towerproto.BatchEnvelope{upper},
	} {
		t.Run(name, func(t *testing.T) {
			for _, prefix := range []string{"/api/v1", "/sdk/v1"} {
				requireProblem(t, lcUpload(t, e, sdk, prefix, towerUnion1, b), http.StatusUnprocessableEntity)
			}
		})
	}
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM tower_events`), "a refused upload stores nothing")
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, "active", lcTokenStatus(t, e, d.ID))

	// The verified upload, through the SDK path.
	r := lcUpload(t, e, sdk, "/sdk/v1", towerUnion1, []towerproto.BatchEnvelope{good})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `{"msg":"3 events stored, 0 already known","accepted":3,"duplicates":0}`, string(r.Body))
	assert.Equal(t, "occupied", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, "used", lcTokenOutcome(t, e, d.ID))
	// The transaction row the app engine's list reads: where, which locker, whose, which token.
	assert.Equal(t, 1, lcCount(t, e, `
		SELECT count(*) FROM transactions x
		JOIN lockers k ON k.id = x.locker_id JOIN locations l ON l.id = k.location_id JOIN towers w ON w.id = k.tower_id
		WHERE x.type = 'dropoff' AND x.status = 'completed' AND x.token_id = $1 AND x.client_id = $2
		  AND x.tower_id = w.id AND x.tower_name = w.name AND x.location_id = l.id AND x.location_name = l.name
		  AND x.city = l.city AND x.pin_code = l.zip AND x.locker_number = k.name AND x.organization_id = l.organization_id`,
		d.ID, e.Creds.ServiceProvider.ClientID))

	// Its replay, on either path, is recognised and changes nothing twice.
	lcUploadOK(t, e, sdk, towerUnion1, 0, 3, good)
	r = lcUpload(t, e, sdk, "/sdk/v1", towerUnion1, []towerproto.BatchEnvelope{good, good})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `{"msg":"0 events stored, 6 already known","accepted":0,"duplicates":6}`, string(r.Body))
	assert.Equal(t, "occupied", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1 AND type = 'dropoff'`, k))
	assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM token_uses`))

	// An empty upload is fine.
	lcUploadOK(t, e, sdk, towerUnion1, 0, 0)
}

// The events of one use may come in separate uploads and in any order: the use applies once,
// when both halves are in. Door events without a token change nothing.
func TestLifecycleEventsOrder(t *testing.T) {
	t.Parallel()
	e, sp, sdk := lcEventsStart(t)
	k := lockerID(t, e, towerUnion1, smallHigh)
	const epoch = 42

	// door_closed first, then token_used (+ door_opened).
	d := lcMustIssue(t, e, sp, "dropoff", towerUnion1, k, 600)
	ev := lcUse(t, e, d, 1, true)
	lcUploadOK(t, e, sdk, towerUnion1, 1, 0, lcBatch(t, e, towerUnion1, towerUnion1, epoch, ev[2]))
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k), "half a use changes nothing")
	lcUploadOK(t, e, sdk, towerUnion1, 2, 0, lcBatch(t, e, towerUnion1, towerUnion1, epoch, ev[0], ev[1]))
	assert.Equal(t, "occupied", lockerStatusName(t, e, sp, towerUnion1, k))
	lcUploadOK(t, e, sdk, towerUnion1, 0, 3, lcBatch(t, e, towerUnion1, towerUnion1, epoch, ev...))
	assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k))
	assert.Equal(t, "used", lcTokenOutcome(t, e, d.ID))

	// The pickup, its two halves in one upload but in reverse batch order.
	p := lcMustIssue(t, e, sp, "pickup", towerUnion1, k, 600)
	pev := lcUse(t, e, p, 4, false)
	lcUploadOK(t, e, sdk, towerUnion1, 3, 0,
		lcBatch(t, e, towerUnion1, towerUnion1, epoch, pev[2]), lcBatch(t, e, towerUnion1, towerUnion1, epoch, pev[0], pev[1]))
	assert.Equal(t, "available", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1 AND type = 'pickup'`, k))

	// Door events with no token: nothing happens, whatever the door sensor saw.
	k2 := lockerID(t, e, towerUnion1, smallHigh+1)
	lcMustIssue(t, e, sp, "dropoff", towerUnion1, k2, 600)
	doorOnly := []towerproto.Event{
		{Seq: 7, Kind: towerproto.EventDoorOpened, At: time.Now(), LockerID: k2},
		{Seq: 8, Kind: towerproto.EventDoorClosed, At: time.Now(), LockerID: k2, ItemInside: true},
		{Seq: 9, Kind: towerproto.EventDoorOpened, At: time.Now(), LockerID: k},
		{Seq: 10, Kind: towerproto.EventDoorClosed, At: time.Now(), LockerID: k, ItemInside: true},
	}
	lcUploadOK(t, e, sdk, towerUnion1, 4, 0, lcBatch(t, e, towerUnion1, towerUnion1, epoch, doorOnly...))
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k2))
	assert.Equal(t, "available", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, 2, lcCount(t, e, `SELECT count(*) FROM transactions`))
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM tower_anomalies`))
}

// Uses the cloud cannot apply: recorded as anomalies (row + metric), no status changes.
func TestLifecycleEventsAnomalies(t *testing.T) {
	t.Parallel()
	e, sp, sdk := lcEventsStart(t)
	k := lockerID(t, e, towerUnion1, smallHigh)
	d := lcMustIssue(t, e, sp, "dropoff", towerUnion1, k, 600)
	dec := lcDecode(t, e, d)
	now := time.Now()

	// A token the cloud never issued.
	unknown := uuid.New()
	ev := []towerproto.Event{
		{Seq: 1, Kind: towerproto.EventTokenUsed, At: now, LockerID: k, TokenID: unknown, Generation: dec.Generation},
		{Seq: 2, Kind: towerproto.EventDoorClosed, At: now, LockerID: k, TokenID: unknown, Generation: dec.Generation, ItemInside: true},
	}
	lcUploadOK(t, e, sdk, towerUnion1, 2, 0, lcBatch(t, e, towerUnion1, towerUnion1, 1, ev...))
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, []string{"unknown_token"}, lcAnomalies(t, e, k))

	// Our token, reported on a locker of another tower ("misplaced").
	misplaced := lockerID(t, e, towerUnion2, smallHigh)
	ev = []towerproto.Event{
		{Seq: 3, Kind: towerproto.EventTokenUsed, At: now, LockerID: misplaced, TokenID: dec.ID, Generation: dec.Generation},
		{Seq: 4, Kind: towerproto.EventDoorClosed, At: now, LockerID: misplaced, TokenID: dec.ID, Generation: dec.Generation, ItemInside: true},
	}
	lcUploadOK(t, e, sdk, towerUnion1, 2, 0, lcBatch(t, e, towerUnion1, towerUnion1, 1, ev...))
	assert.Equal(t, "available", lockerStatusName(t, e, sp, towerUnion2, misplaced))
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, []string{"unknown_locker"}, lcAnomalies(t, e, misplaced))

	// A use by the tower's clock long after the token expired (another token: a tower reports
	// each token's use once).
	d2 := lcMustIssue(t, e, sp, "dropoff", towerUnion1, k, 600)
	ev = lcUse(t, e, d2, 5, true)
	for i := range ev {
		ev[i].At = lcDecode(t, e, d2).ExpiresAt.Add(time.Hour)
	}
	lcUploadOK(t, e, sdk, towerUnion1, 3, 0, lcBatch(t, e, towerUnion1, towerUnion1, 1, ev...))
	assert.Equal(t, "rented", lockerStatusName(t, e, sp, towerUnion1, k))
	assert.Equal(t, []string{"unknown_token", "used_after_expiry"}, lcAnomalies(t, e, k))
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM transactions`))
	assert.Equal(t, 3, lcAnomalyMetric(t, e))
}

// Several phones upload at once: the same batch (one of them stores it, the others see
// duplicates), and the two halves of uses (each use still applies once).
func TestLifecycleEventsConcurrentUploads(t *testing.T) {
	t.Parallel()
	e, sp, sdk := lcEventsStart(t)

	k := lockerID(t, e, towerUnion2, smallHigh)
	good := lcBatch(t, e, towerUnion2, towerUnion2, 1, lcUse(t, e, lcMustIssue(t, e, sp, "dropoff", towerUnion2, k, 600), 1, true)...)
	type counts struct{ Accepted, Duplicates int }
	const phones = 6
	answers := make([]counts, phones)
	testenv.AtOnce(phones, func(i int) {
		status, body, err := rawDo(http.MethodPost, e.URL+"/api/v1/towers/"+towerUnion2+"/events", sdk, []towerproto.BatchEnvelope{good})
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &answers[i]) != nil {
			answers[i] = counts{-1, -1}
		}
	})
	stored := 0
	for _, c := range answers {
		require.NotEqual(t, counts{-1, -1}, c, "every upload answers 200")
		require.Equal(t, 3, c.Accepted+c.Duplicates)
		if c.Accepted > 0 {
			stored++
			assert.Equal(t, counts{3, 0}, c)
		}
	}
	assert.Equal(t, 1, stored, "exactly one upload stored the batch")
	assert.Equal(t, "occupied", lockerStatusName(t, e, sp, towerUnion2, k))
	assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k))

	// Halves of eight uses, every half in its own upload, all at once.
	var lockers []int64
	var uploads [][]towerproto.BatchEnvelope
	for i := 1; i <= 8; i++ {
		k := lockerID(t, e, towerUnion2, i)
		lockers = append(lockers, k)
		ev := lcUse(t, e, lcMustIssue(t, e, sp, "dropoff", towerUnion2, k, 600), uint64(3*i+1), true)
		uploads = append(uploads,
			[]towerproto.BatchEnvelope{lcBatch(t, e, towerUnion2, towerUnion2, 2, ev[0], ev[1])},
			[]towerproto.BatchEnvelope{lcBatch(t, e, towerUnion2, towerUnion2, 2, ev[2])})
	}
	testenv.AtOnce(len(uploads), func(i int) {
		status, body, err := rawDo(http.MethodPost, e.URL+"/sdk/v1/towers/"+towerUnion2+"/events", sdk, uploads[i])
		if err != nil || status != http.StatusOK {
			t.Errorf("upload failed: %d %s %v", status, body, err)
		}
	})
	for _, k := range lockers {
		assert.Equal(t, "occupied", lockerStatusName(t, e, sp, towerUnion2, k), "locker %d: its use applied", k)
	}
	assert.Equal(t, 9, lcCount(t, e, `SELECT count(*) FROM token_uses`))
}
