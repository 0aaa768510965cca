package apiserver_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	demo := demoToken(t, e)
	o := e.NewOtherOrg(t)
	rival := otherOrgToken(t, e, o)

	demoLocker := lockerID(t, e, towerUnion1, smallHigh)
	demoLoc := locationID(t, e, towerUnion1)
	demoRes := reserve(t, e, demo, towerUnion1, demoLocker, 3600)
	rivalRes := reserve(t, e, rival, o.TowerID, o.LockerID, 3600)

	// Each organization's ids answer the other exactly as ids that do not exist.
	cases := []struct {
		name         string
		method, path string
		body         any
		token        string
		nonexistent  string
	}{
		{"location lockers", http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", demoLoc), nil, rival, "/api/v1/locations/999999/lockers"},
		{"tower", http.MethodGet, "/api/v1/towers/" + towerUnion1, nil, rival, "/api/v1/towers/0100000000000099"},
		{"tower lockers", http.MethodGet, "/api/v1/towers/" + towerUnion1 + "/lockers", nil, rival, "/api/v1/towers/0100000000000099/lockers"},
		{"reservation", http.MethodGet, "/api/v1/reservations/" + demoRes.ID, nil, rival, "/api/v1/reservations/6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"},
		{"cancel reservation", http.MethodDelete, reservePath(towerUnion1, demoLocker) + "/" + demoRes.ID, nil, rival,
			reservePath(towerUnion1, demoLocker) + "/6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"},
		{"reserve a locker", http.MethodPost, reservePath(towerUnion2, lockerID(t, e, towerUnion2, smallHigh)), map[string]any{"duration": 60}, rival,
			reservePath("0100000000000099", 1)},
		{"the rival's location lockers", http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", o.LocationID), nil, demo, "/api/v1/locations/999999/lockers"},
		{"the rival's tower", http.MethodGet, "/api/v1/towers/" + o.TowerID, nil, demo, "/api/v1/towers/0100000000000099"},
		{"the rival's reservation", http.MethodGet, "/api/v1/reservations/" + rivalRes.ID, nil, demo, "/api/v1/reservations/6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"},
		{"cancel the rival's reservation", http.MethodDelete, reservePath(o.TowerID, o.LockerID) + "/" + rivalRes.ID, nil, demo,
			reservePath(o.TowerID, o.LockerID) + "/6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"},
		{"reserve the rival's locker", http.MethodPost, reservePath(o.TowerID, o.LockerID), map[string]any{"duration": 60}, demo,
			reservePath("0100000000000099", 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := requireProblem(t, e.Do(tc.method, tc.path, tc.token, tc.body), http.StatusNotFound)
			want := requireProblem(t, e.Do(tc.method, tc.nonexistent, tc.token, tc.body), http.StatusNotFound)
			assert.Equal(t, want["detail"], got["detail"], "no existence leak")
		})
	}

	t.Run("searches show only the caller's locations", func(t *testing.T) {
		t.Parallel()
		wantDemo := towerLocations
		wantRival := []string{"Rival Union Station"}
		for _, q := range []string{"/api/v1/locations/in-area?" + laArea, "/api/v1/locations/?" + laArea, "/api/v1/locations/"} {
			assert.Equal(t, wantDemo, keys(locationsByName(t, e.Do(http.MethodGet, q, demo, nil))), q)
			assert.Equal(t, wantRival, keys(locationsByName(t, e.Do(http.MethodGet, q, rival, nil))), q)
		}
		// Both sit at Union Station; each sees its own as the closest.
		for tok, want := range map[string]string{demo: "Union Station", rival: "Rival Union Station"} {
			r := e.Do(http.MethodGet, "/api/v1/locations/closest?lat=34.05615&lon=-118.23655", tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			var l location
			r.JSON(t, &l)
			assert.Equal(t, want, l.Name)
		}
		// Far from its only location the rival finds nothing, though demo locations are near.
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/closest?lat=34.0094&lon=-118.4973", rival, nil), http.StatusNotFound)
	})

	t.Cleanup(func() {
		// Nothing the other organization tried changed anything.
		assert.Equal(t, "active", getReservation(t, e, demo, demoRes.ID).Status)
		assert.Equal(t, "active", getReservation(t, e, rival, rivalRes.ID).Status)
		assert.Equal(t, "available", towerLocker(t, e, demo, towerUnion2, lockerID(t, e, towerUnion2, smallHigh)).Status.Name)
		assert.Equal(t, 23, inArea(t, e, demo, laArea)["Union Station"].LockerAvailability.AvailableLockers)
	})
}
