package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

func TestTowers(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	ctx := context.Background()

	// A tower whose id has hex letters, at a location of its own (San Diego).
	const hexTower = "01000000000000ab"
	loc, err := e.Store.UpsertLocation(ctx, store.NewLocation{OrganizationID: e.Creds.OrganizationID, Name: "San Diego Depot",
		Lat: 32.7157, Lon: -117.1611, Address1: "1050 Kettner Blvd", City: "San Diego", State: "CA", Zip: "92101", Country: "US"})
	require.NoError(t, err)
	_, err = e.Store.EnsureTower(ctx, store.Tower{ID: hexTower, OrganizationID: e.Creds.OrganizationID, LocationID: loc,
		Name: "Depot tower", SecretSealed: e.Keyring.Seal("tower:"+hexTower, make([]byte, 32))})
	require.NoError(t, err)
	types, err := e.Store.UpsertLockerType(ctx, e.Creds.OrganizationID, store.LockerType{Name: "small", SortOrder: 1})
	require.NoError(t, err)
	hexLocker, err := e.Store.EnsureLocker(ctx, store.NewLocker{TowerID: hexTower, Name: "A1", TypeID: types})
	require.NoError(t, err)

	t.Run("GET a tower", func(t *testing.T) {
		t.Parallel()
		for _, tw := range []string{towerUnion1, towerUnion2, towerSantaMon, towerPasadena} {
			r := e.Do(http.MethodGet, "/api/v1/towers/"+tw, tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			m := r.Map(t)
			assert.Equal(t, sorted("id", "name", "locationId", "lockerCount"), keys(m))
			assert.Equal(t, tw, m["id"])
			assert.EqualValues(t, locationID(t, e, tw), m["locationId"])
			assert.EqualValues(t, 12, m["lockerCount"])
			assert.NotEmpty(t, m["name"])
		}
		m := e.Do(http.MethodGet, "/api/v1/towers/"+towerUnion1, tok, nil).Map(t)
		assert.Equal(t, "Union Station tower 1", m["name"])
	})

	t.Run("tower ids are case-insensitive on input and lower-case on output", func(t *testing.T) {
		t.Parallel()
		for _, in := range []string{hexTower, strings.ToUpper(hexTower), "01000000000000aB"} {
			r := e.Do(http.MethodGet, "/api/v1/towers/"+in, tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", in, r.Body)
			m := r.Map(t)
			assert.Equal(t, hexTower, m["id"])
			assert.EqualValues(t, 1, m["lockerCount"])
			assert.EqualValues(t, loc, m["locationId"])

			r = e.Do(http.MethodGet, "/api/v1/towers/"+in+"/lockers", tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", in, r.Body)
			var ks []locker
			r.JSON(t, &ks)
			require.Len(t, ks, 1)
			assert.Equal(t, hexTower, ks[0].TowerID)
			assert.Equal(t, hexLocker, ks[0].ID)
		}
		res := reserve(t, e, tok, strings.ToUpper(hexTower), hexLocker, 60)
		assert.Equal(t, hexTower, res.TowerID)
		r := e.Do(http.MethodDelete, reservePath(strings.ToUpper(hexTower), hexLocker)+"/"+res.ID, tok, nil)
		assert.Equal(t, http.StatusNoContent, r.Status, "body: %s", r.Body)
	})

	t.Run("tower lockers", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodGet, "/api/v1/towers/"+towerPasadena+"/lockers", tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		var ks []locker
		r.JSON(t, &ks)
		require.Len(t, ks, 12)
		types := map[string]int{}
		for i, k := range ks {
			assert.Equal(t, lockerID(t, e, towerPasadena, i), k.ID, "by id")
			assert.Equal(t, towerPasadena, k.TowerID)
			assert.Equal(t, locationID(t, e, towerPasadena), k.LocationID)
			assert.Equal(t, lockerStatus{ID: 1, Name: "available"}, k.Status)
			types[k.Type.Name]++
			assert.Equal(t, i >= 8, k.IsLowLocker, "locker %s", k.Name)
		}
		assert.Equal(t, map[string]int{"small": 6, "medium": 4, "large": 2}, types)
	})

	t.Run("bad and unknown tower ids", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			id     string
			status int
		}{
			{"xyz", http.StatusUnprocessableEntity},
			{"010000000000001", http.StatusUnprocessableEntity},   // 15 digits
			{"01000000000000111", http.StatusUnprocessableEntity}, // 17 digits
			{"010000000000001g", http.StatusUnprocessableEntity},
			{"0100000000000099", http.StatusNotFound},
			{"ffffffffffffffff", http.StatusNotFound},
		} {
			requireProblem(t, e.Do(http.MethodGet, "/api/v1/towers/"+tc.id, tok, nil), tc.status)
			requireProblem(t, e.Do(http.MethodGet, "/api/v1/towers/"+tc.id+"/lockers", tok, nil), tc.status)
		}
	})
}
