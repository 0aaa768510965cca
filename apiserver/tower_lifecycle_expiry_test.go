package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// An unused drop-off token expires and frees the locker; with two, only the last one's
// expiry does. The expired tokens open nothing afterwards.
func TestLifecycleDropoffTokenExpiry(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)

	t.Run("one token", func(t *testing.T) {
		k := lockerID(t, e, towerUnion2, smallHigh)
		d := lcMustIssue(t, e, a, "dropoff", towerUnion2, k, 2)
		assert.Equal(t, "expired", lcTokenOutcome(t, e, d.ID))
		assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion2, k))
		row := lcLockerRow(t, e, k)
		assert.Equal(t, 1, row.Raw, "the workflow wrote the end of the rental back to Postgres")
		assert.Nil(t, row.Possessor)
		assert.Equal(t, "expired", lcTokenStatus(t, e, d.ID))
		assert.NotContains(t, lcAssigned(t, e, a), k)

		// The tower, by its own clock, refuses the expired token; nothing changes.
		res := lcOpen(t, sim, towerUnion2, d, true)
		assert.False(t, res.Opened)
		assert.Equal(t, "expired", lcRefusal(res))
		lcNothingRecorded(t, sim, towerUnion2)
		assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion2, k))
		assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM tower_events WHERE locker_id = $1`, k))
	})

	t.Run("two tokens", func(t *testing.T) {
		k := lockerID(t, e, towerUnion2, smallHigh+1)
		short := lcMustIssue(t, e, a, "dropoff", towerUnion2, k, 2)
		long := lcMustIssue(t, e, a, "dropoff", towerUnion2, k, 12)
		assert.Equal(t, "expired", lcTokenOutcome(t, e, short.ID))
		row := lcLockerRow(t, e, k)
		assert.Equal(t, 3, row.Raw, "the first expiry leaves the rental in place")
		require.NotNil(t, row.HoldExpiresAt)
		assert.Equal(t, long.ExpiresAt, row.HoldExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z"), "held until the last token expires")
		assert.Equal(t, "expired", lcTokenOutcome(t, e, long.ID))
		assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion2, k))
		assert.Equal(t, 1, lcLockerRow(t, e, k).Raw)
	})
}

// Tokens the tower must refuse: forged, for another tower, for a locker the tower does not
// have, stale. None opens anything or changes anything.
func TestLifecycleRefusedTokens(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	b := secondDemoClient(t, e, "lc-refused-b")
	k := lockerID(t, e, towerUnion1, smallHigh)
	d := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	dec := lcDecode(t, e, d)

	refused := func(tower, payload, auth, code string) {
		t.Helper()
		res := lcOpenRaw(t, sim, tower, payload, auth, true)
		assert.False(t, res.Opened)
		assert.Equal(t, code, lcRefusal(res))
		lcNothingRecorded(t, sim, tower)
	}
	// Forged: any flipped byte of payload or MAC.
	refused(towerUnion1, lcFlipHex(t, d.Payload, 40), d.PayloadAuth, "invalid_token")
	refused(towerUnion1, d.Payload, lcFlipHex(t, d.PayloadAuth, 10), "invalid_token")
	refused(towerUnion1, d.Payload, "00", "invalid_token")
	// Presented at another tower.
	refused(towerUnion2, d.Payload, d.PayloadAuth, "wrong_tower")
	// Misplaced: genuine for this tower but naming a locker of another tower.
	mis := dec
	mis.LockerID = lockerID(t, e, towerUnion2, smallHigh)
	payload, auth, err := towerproto.EncodeToken(mis, towerproto.TokenKey(lcDemoTower(t, e, towerUnion1).Secret))
	require.NoError(t, err)
	refused(towerUnion1, payload, auth, "unknown_locker")

	assert.Equal(t, "rented", lockerStatusName(t, e, a, towerUnion1, k))
	assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion2, mis.LockerID))
	// Nothing but the towers' reports of the commands their sessions synced.
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM tower_events WHERE kind <> 'sync_commands'`))
	assert.Equal(t, "active", lcTokenStatus(t, e, d.ID))

	// Stale: A's second drop-off token after A's pickup, and after B's next possession.
	d2 := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, d, true))
	p := lcMustIssue(t, e, a, "pickup", towerUnion1, k, 600)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, p, false))
	require.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	refused(towerUnion1, d2.Payload, d2.PayloadAuth, "stale_generation")
	reserve(t, e, b, towerUnion1, k, 600)
	bd := lcMustIssue(t, e, b, "dropoff", towerUnion1, k, 600)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, bd, true))
	refused(towerUnion1, d2.Payload, d2.PayloadAuth, "stale_generation")
	refused(towerUnion1, p.Payload, p.PayloadAuth, "stale_generation")
	assert.Equal(t, "occupied", lockerStatusName(t, e, a, towerUnion1, k))
	assert.Contains(t, lcAssigned(t, e, b), k)
	assert.Equal(t, "revoked", lcTokenStatus(t, e, d2.ID), "the pickup revoked the possession's other tokens")
	assert.Equal(t, "revoked", lcTokenOutcome(t, e, d2.ID))
	assert.Empty(t, lcAnomalies(t, e, k))
}

// A drop-off used at the tower before its expiry but uploaded after the locker lapsed still
// counts: the item is inside (DESIGN §4.7). If the locker was given to someone else since,
// the late use is an anomaly and changes nothing.
func TestLifecycleLateUpload(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	// The only simulator of this env: its phone is offline until lcUploadPending.
	sim := lcOfflineSim(t, e)
	a := e.Token("service_provider")
	b := secondDemoClient(t, e, "lc-late-b")

	t.Run("not re-assigned", func(t *testing.T) {
		k := lockerID(t, e, towerUnion1, smallHigh)
		d := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 5)
		res := lcOpen(t, sim, towerUnion1, d, true)
		require.True(t, res.Opened, "refused: %s", lcRefusal(res))
		require.NotEmpty(t, res.UploadError, "the phone is offline")
		require.Equal(t, 3, res.EventsPending)

		assert.Equal(t, "expired", lcTokenOutcome(t, e, d.ID))
		require.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
		assert.Equal(t, 3, lcUploadPending(t, e, sim, towerUnion1))
		assert.Equal(t, "occupied", lockerStatusName(t, e, a, towerUnion1, k))
		got := lcAssigned(t, e, a)[k]
		assert.Equal(t, "occupied", got.Status.Name, "the possession is the drop-off's client's again")
		assert.Equal(t, "used", lcTokenStatus(t, e, d.ID))
		assert.Equal(t, 1, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1 AND type = 'dropoff'`, k))
		assert.Empty(t, lcAnomalies(t, e, k))

		// ... and its pickup works as usual.
		p := lcMustIssue(t, e, a, "pickup", towerUnion1, k, 600)
		lcOpen(t, sim, towerUnion1, p, false)
		lcUploadPending(t, e, sim, towerUnion1)
		assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	})

	t.Run("re-reserved by another client", func(t *testing.T) {
		k := lockerID(t, e, towerUnion1, smallHigh+1)
		d := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 5)
		res := lcOpen(t, sim, towerUnion1, d, true)
		require.True(t, res.Opened, "refused: %s", lcRefusal(res))
		assert.Equal(t, "expired", lcTokenOutcome(t, e, d.ID))
		r := e.Do(http.MethodPost, reservePath(towerUnion1, k), b, map[string]any{"duration": 600})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

		lcUploadPending(t, e, sim, towerUnion1)
		assert.Equal(t, "reserved", lockerStatusName(t, e, a, towerUnion1, k), "the late use changes nothing")
		assert.Contains(t, lcAssigned(t, e, b), k)
		assert.NotContains(t, lcAssigned(t, e, a), k)
		assert.Equal(t, []string{"stale_generation"}, lcAnomalies(t, e, k))
		assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k))
		assert.Equal(t, 1, lcAnomalyMetric(t, e))
	})
}
