package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// POST .../release: rented → declined for the possessor only; the grace that follows.
func TestLifecycleRelease(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	b := secondDemoClient(t, e, "lc-release-b")
	k := lockerID(t, e, towerUnion1, mediumHigh)
	release := func(tok string) testenv.Response {
		return e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), tok, nil)
	}

	// Not rented: 409 naming the status.
	lcConflict(t, release(a), "available")
	reserve(t, e, a, towerUnion1, k, 300)
	lcConflict(t, release(a), "reserved")

	// Rented by A: B cannot release it; A can, and the answer is the Locker, declined.
	d1 := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	lcConflict(t, release(b), "rented")
	r := release(a)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var got locker
	r.JSON(t, &got)
	assert.Equal(t, k, got.ID)
	assert.Equal(t, towerUnion1, got.TowerID)
	assert.Equal(t, lockerStatus{ID: 5, Name: "declined"}, got.Status)
	lcConflict(t, release(a), "declined")
	assert.Equal(t, "declined", lcAssigned(t, e, a)[k].Status.Name, "a declined locker stays with its possessor during the grace")
	assert.NotContains(t, lcAssigned(t, e, b), k)
	lcConflict(t, e.Do(http.MethodPost, reservePath(towerUnion1, k), b, map[string]any{"duration": 60}), "declined")

	// During the grace a drop-off token rents it again; release once more.
	d2 := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	assert.Equal(t, "rented", lockerStatusName(t, e, a, towerUnion1, k))
	r = release(a)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// A release token used at the tower (door closed empty) frees it and ends the possession:
	// the tower bumps the generation, so the earlier drop-off tokens open nothing any more.
	rel := lcMustIssue(t, e, a, "release", towerUnion1, k, 600)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, rel, false))
	assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	assert.NotContains(t, lcAssigned(t, e, a), k)
	for _, d := range []towerTokenResp{d1, d2} {
		res := lcOpen(t, sim, towerUnion1, d, true)
		assert.False(t, res.Opened)
		assert.Equal(t, "stale_generation", lcRefusal(res))
		assert.Equal(t, "revoked", lcTokenStatus(t, e, d.ID))
	}
	assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	assert.Equal(t, "used", lcTokenOutcome(t, e, rel.ID))
	assert.Equal(t, "revoked", lcTokenOutcome(t, e, d1.ID))
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k), "a release is no drop-off or pickup")
}

// lcReleasedWithToken rents a medium locker of towerUnion1 to tok, releases it, and issues
// tok a release token for it during the grace.
func lcReleasedWithToken(t *testing.T, e *testenv.Env, tok string) (int64, towerTokenResp) {
	t.Helper()
	k := lockerID(t, e, towerUnion1, mediumHigh)
	lcMustIssue(t, e, tok, "dropoff", towerUnion1, k, 600)
	require.Equal(t, http.StatusOK, e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), tok, nil).Status)
	return k, lcMustIssue(t, e, tok, "release", towerUnion1, k, 600)
}

// A release token used with the door closed on an item does not free the locker.
func TestLifecycleReleaseTokenClosedWithItem(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	k, rel := lcReleasedWithToken(t, e, a)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, rel, true))
	assert.Equal(t, "declined", lockerStatusName(t, e, a, towerUnion1, k))
	assert.Equal(t, "used", lcTokenStatus(t, e, rel.ID))
}

// After the grace a declined locker reads available at once, before anything writes it back.
func TestLifecycleReleaseGraceLapses(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	a := e.Token("service_provider")
	b := secondDemoClient(t, e, "lc-grace-b")
	k := lockerID(t, e, towerUnion1, mediumHigh)
	d := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 3600)
	require.Equal(t, http.StatusOK, e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), a, nil).Status)
	before := lcLockerRow(t, e, k)
	require.Equal(t, 5, before.Raw)
	require.NotNil(t, before.HoldExpiresAt)

	lcLapse(t, e, k)
	assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	assert.Equal(t, "available", locationLocker(t, e, a, locationID(t, e, towerUnion1), k).Status.Name)
	assert.NotContains(t, lcAssigned(t, e, a), k)
	lcConflict(t, e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), a, nil), "available")
	lcConflict(t, lcIssue(t, e, a, "release", towerUnion1, k, map[string]any{"duration": 60}), "available")

	// Anyone may take it now; the new possession has a new generation.
	nd := lcMustIssue(t, e, b, "dropoff", towerUnion1, k, 600)
	assert.Greater(t, lcDecode(t, e, nd).Generation, lcDecode(t, e, d).Generation)
	assert.Contains(t, lcAssigned(t, e, b), k)
	assert.NotContains(t, lcAssigned(t, e, a), k)
}

// A release token used (door closed empty) after the locker was rented again during the
// grace: the tower has ended the possession and bumped its generation, so the cloud ends it
// too; otherwise every token of the rental, old or new, would be refused as stale there.
func TestLifecycleReleaseTokenAfterReRent(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	k, rel := lcReleasedWithToken(t, e, a)
	d := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	require.Equal(t, "rented", lockerStatusName(t, e, a, towerUnion1, k))

	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, rel, false))
	assert.Equal(t, "available", lockerStatusName(t, e, a, towerUnion1, k))
	assert.NotContains(t, lcAssigned(t, e, a), k)
	assert.Equal(t, "revoked", lcTokenStatus(t, e, d.ID))
	assert.Equal(t, "stale_generation", lcRefusal(lcOpen(t, sim, towerUnion1, d, true)))

	// The next possession's token carries the generation the tower now expects.
	nd := lcMustIssue(t, e, a, "dropoff", towerUnion1, k, 600)
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, nd, true))
	assert.Equal(t, "occupied", lockerStatusName(t, e, a, towerUnion1, k))
}
