package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GET /users/me/assigned-lockers follows a possession through every status, and shows
// nothing of it to another client or organization.
func TestLifecycleAssignedLockers(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	b := secondDemoClient(t, e, "lc-assigned-b")
	other := otherOrgToken(t, e, e.NewOtherOrg(t))
	k := lockerID(t, e, towerUnion2, smallHigh)

	nobodyElse := func() {
		t.Helper()
		assert.NotContains(t, lcAssigned(t, e, b), k, "another client of the organization")
		assert.Empty(t, lcAssigned(t, e, other), "another organization")
	}
	r := e.Do(http.MethodGet, "/api/v1/users/me/assigned-lockers", a, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `[]`, string(r.Body), "an empty list is [] (clients call .filter on it)")

	// reserved: since, reservationId, no tokens.
	res := reserve(t, e, a, towerUnion2, k, 300)
	got := lcAssigned(t, e, a)[k]
	require.NotNil(t, got.Possession, "reserved lockers are listed with their possession")
	assert.Equal(t, "reserved", got.Status.Name)
	assert.Equal(t, towerUnion2, got.TowerID)
	require.NotNil(t, got.Possession.Since)
	assert.Regexp(t, timestampRE, *got.Possession.Since)
	since := *got.Possession.Since
	require.NotNil(t, got.Possession.ReservationID)
	assert.Equal(t, res.ID, *got.Possession.ReservationID)
	assert.NotNil(t, got.Possession.ActiveTokens, "activeTokens is a list, never null")
	assert.Empty(t, got.Possession.ActiveTokens)
	nobodyElse()

	// rented: the reservation is consumed; the drop-off tokens are listed.
	d1 := lcMustIssue(t, e, a, "dropoff", towerUnion2, k, 300)
	d2 := lcMustIssue(t, e, a, "dropoff", towerUnion2, k, 600)
	got = lcAssigned(t, e, a)[k]
	assert.Equal(t, "rented", got.Status.Name)
	assert.Nil(t, got.Possession.ReservationID, "a consumed reservation is no longer part of the possession")
	assert.Equal(t, since, *got.Possession.Since, "the possession started with the reservation")
	require.Len(t, got.Possession.ActiveTokens, 2)
	assert.Equal(t, d1.ID, got.Possession.ActiveTokens[0].ID, "soonest expiry first")
	assert.Equal(t, "dropoff", got.Possession.ActiveTokens[0].Type)
	assert.Equal(t, d1.ExpiresAt, got.Possession.ActiveTokens[0].ExpiresAt)
	assert.Equal(t, d2.ID, got.Possession.ActiveTokens[1].ID)
	nobodyElse()

	// declined: still A's, tokens still listed.
	require.Equal(t, http.StatusOK, e.Do(http.MethodPost, lcReleasePath(towerUnion2, k), a, nil).Status)
	got = lcAssigned(t, e, a)[k]
	assert.Equal(t, "declined", got.Status.Name)
	assert.Len(t, got.Possession.ActiveTokens, 2)
	nobodyElse()

	// occupied: the used token leaves the list; a pickup token joins it.
	lcRequireOpened(t, lcOpen(t, sim, towerUnion2, d1, true))
	got = lcAssigned(t, e, a)[k]
	assert.Equal(t, "occupied", got.Status.Name)
	require.Len(t, got.Possession.ActiveTokens, 1)
	assert.Equal(t, d2.ID, got.Possession.ActiveTokens[0].ID)
	p := lcMustIssue(t, e, a, "pickup", towerUnion2, k, 900)
	got = lcAssigned(t, e, a)[k]
	require.Len(t, got.Possession.ActiveTokens, 2)
	assert.Equal(t, "pickup", got.Possession.ActiveTokens[1].Type)
	assert.Equal(t, since, *got.Possession.Since)
	nobodyElse()

	// picked up: the possession is over.
	lcRequireOpened(t, lcOpen(t, sim, towerUnion2, p, false))
	assert.NotContains(t, lcAssigned(t, e, a), k)
	nobodyElse()

	// A drop-off token on an available locker starts a possession without a reservation.
	lcMustIssue(t, e, b, "dropoff", towerUnion2, k, 300)
	got = lcAssigned(t, e, b)[k]
	assert.Equal(t, "rented", got.Status.Name)
	assert.Nil(t, got.Possession.ReservationID)
	require.NotNil(t, got.Possession.Since)
	assert.NotEqual(t, since, *got.Possession.Since, "a new possession")
	assert.NotContains(t, lcAssigned(t, e, a), k)

	// Only service_provider may ask.
	requireProblem(t, e.Do(http.MethodGet, "/api/v1/users/me/assigned-lockers", e.Token("tower_access"), nil), http.StatusForbidden)
}
