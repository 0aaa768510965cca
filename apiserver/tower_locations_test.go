package apiserver_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

var towerLocations = []string{"Pasadena Old Town", "Santa Monica Pier", "Union Station"}

// wantAvailability is a location's availability when every locker is free: per tower
// small 6, medium 4 (2 low), large 2 (2 low).
func assertFullAvailability(t *testing.T, l location, towers int) {
	t.Helper()
	assert.Equal(t, availability{12 * towers, 12 * towers}, l.LockerAvailability, l.Name)
	assert.Equal(t, availability{4 * towers, 4 * towers}, l.LowLockerAvailability, l.Name)
	require.Len(t, l.ByType, 3, l.Name)
	want := []struct {
		name      string
		sortOrder int
		total     int
		low       int
	}{{"small", 1, 6, 0}, {"medium", 2, 4, 2}, {"large", 3, 2, 2}}
	for i, w := range want {
		got := l.ByType[i]
		assert.Equal(t, w.name, got.LockerType.Name, "%s byType[%d]", l.Name, i)
		assert.Equal(t, w.sortOrder, got.LockerType.SortOrder, "%s byType[%d]", l.Name, i)
		assert.NotNil(t, got.LockerType.Description)
		assert.Equal(t, availability{w.total * towers, w.total * towers}, got.LockerAvailability, "%s %s", l.Name, w.name)
		assert.Equal(t, availability{w.low * towers, w.low * towers}, got.LowLockerAvailability, "%s %s low", l.Name, w.name)
	}
}

func TestLocationsInArea(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)

	t.Run("Los Angeles holds the three tower locations with their availability", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodGet, "/api/v1/locations/in-area?"+laArea, tok, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.Equal(t, byte('['), r.Body[0], "a bare JSON array")
		var raw []map[string]any
		r.JSON(t, &raw)
		require.NotEmpty(t, raw)
		assert.Equal(t, sorted("id", "name", "lat", "lon", "description", "address1", "address2", "city", "state", "zip",
			"country", "notes", "accessHours", "timezone", "lockerAvailability", "lowLockerAvailability", "byType"), keys(raw[0]))

		locs := locationsByName(t, r)
		assert.Equal(t, towerLocations, keys(locs), "gateway-only locations are not tower locations")
		us := locs["Union Station"]
		assert.InDelta(t, 34.0562, us.Lat, 1e-9)
		assert.InDelta(t, -118.2365, us.Lon, 1e-9)
		assert.Equal(t, "Los Angeles", us.City)
		require.NotNil(t, us.Timezone)
		assert.Equal(t, "America/Los_Angeles", *us.Timezone)
		assertFullAvailability(t, us, 2)
		assertFullAvailability(t, locs["Santa Monica Pier"], 1)
		assertFullAvailability(t, locs["Pasadena Old Town"], 1)
	})

	t.Run("the same answer for every form of the query", func(t *testing.T) {
		t.Parallel()
		want := e.Do(http.MethodGet, "/api/v1/locations/in-area?"+laArea, tok, nil)
		require.Equal(t, http.StatusOK, want.Status)
		for _, q := range []string{
			"/api/v1/locations/in-area?start=34.2,-118.1&end=33.9,-118.6",    // corners swapped
			"/api/v1/locations/in-area?start=34.2,-118.6&end=33.9,-118.1",    // the other diagonal
			"/api/v1/locations/in-area?start=33.9,%20-118.6&end=34.2,-118.1", // a space after the comma
			"/api/v1/locations/in-area?" + laArea + "&unknown=1",             // extra parameters ignored
			"/api/v1/locations/?" + laArea,
			"/api/v1/locations?" + laArea,
			"/api/v1/locations/?start=34.2,-118.1&end=33.9,-118.6",
		} {
			r := e.Do(http.MethodGet, q, tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", q, r.Body)
			assert.JSONEq(t, string(want.Body), string(r.Body), q)
		}
	})

	t.Run("a GET with a JSON content type and no body works", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodGet, "/api/v1/locations/in-area?"+laArea, tok, "")
		assert.Equal(t, towerLocations, keys(locationsByName(t, r)))
	})

	t.Run("a smaller area holds fewer", func(t *testing.T) {
		t.Parallel()
		// Around Santa Monica Pier only.
		locs := inArea(t, e, tok, "start=33.99,-118.52&end=34.03,-118.47")
		assert.Equal(t, []string{"Santa Monica Pier"}, keys(locs))
		// Around Culver City (gateway-only): nothing.
		assert.Empty(t, inArea(t, e, tok, "start=34.01,-118.41&end=34.03,-118.38"))
		// The Pacific.
		assert.Empty(t, inArea(t, e, tok, "start=-10,-170&end=10,-150"))
		// A degenerate area: exactly one point.
		assert.Equal(t, []string{"Union Station"}, keys(inArea(t, e, tok, "start=34.0562,-118.2365&end=34.0562,-118.2365")))
	})

	t.Run("malformed points are 422", func(t *testing.T) {
		t.Parallel()
		cases := []struct{ name, query string }{
			{"missing comma", "start=33.9%20-118.6&end=34.2,-118.1"},
			{"three numbers", "start=33.9,-118.6,1&end=34.2,-118.1"},
			{"letters", "start=abc,def&end=34.2,-118.1"},
			{"one letter", "start=33.9,-118.6x&end=34.2,-118.1"},
			{"empty start", "start=&end=34.2,-118.1"},
			{"empty end", "start=33.9,-118.6&end="},
			{"only a comma", "start=,&end=34.2,-118.1"},
			{"NaN", "start=NaN,-118.6&end=34.2,-118.1"},
			{"Inf", "start=33.9,Inf&end=34.2,-118.1"},
			{"-Inf", "start=-Inf,-118.6&end=34.2,-118.1"},
			{"lat 91", "start=91,-118.6&end=34.2,-118.1"},
			{"lat -90.5", "start=33.9,-118.6&end=-90.5,-118.1"},
			{"lon -181", "start=33.9,-181&end=34.2,-118.1"},
			{"lon 180.01", "start=33.9,-118.6&end=34.2,180.01"},
			{"hex float", "start=0x1p4,-118.6&end=34.2,-118.1"},
			{"missing start", "end=34.2,-118.1"},
			{"missing end", "start=33.9,-118.6"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, path := range []string{"/api/v1/locations/in-area?", "/api/v1/locations/?"} {
					r := e.Do(http.MethodGet, path+tc.query, tok, nil)
					requireProblem(t, r, http.StatusUnprocessableEntity)
				}
			})
		}
	})

	t.Run("the edges of the world are valid", func(t *testing.T) {
		t.Parallel()
		locs := inArea(t, e, tok, "start=-90,-180&end=90,180")
		assert.Equal(t, towerLocations, keys(locs))
	})

	t.Run("percent-encoding and junk bytes", func(t *testing.T) {
		t.Parallel()
		q := "start=" + url.QueryEscape("33.9,-118.6") + "&end=" + url.QueryEscape("34.2,-118.1")
		assert.Equal(t, towerLocations, keys(inArea(t, e, tok, q)))
		for _, junk := range []string{"start=%00&end=%ff", "start=" + url.QueryEscape("1e999,1") + "&end=0,0", "start=" + url.QueryEscape("\u202e34,1") + "&end=0,0"} {
			requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/in-area?"+junk, tok, nil), http.StatusUnprocessableEntity)
		}
	})
}

func TestListLocations(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	list := func(q string) []string {
		t.Helper()
		r := e.Do(http.MethodGet, "/api/v1/locations/"+q, tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", q, r.Body)
		var ls []location
		r.JSON(t, &ls)
		out := []string{}
		for _, l := range ls {
			out = append(out, l.Name)
		}
		return out
	}
	// By id: the seed creates Union Station, Santa Monica Pier, Pasadena Old Town in order.
	all := []string{"Union Station", "Santa Monica Pier", "Pasadena Old Town"}
	assert.Equal(t, all, list(""))
	assert.Equal(t, all, list("?skip=0&limit=1000"))
	assert.Equal(t, all[1:2], list("?skip=1&limit=1"))
	assert.Equal(t, all[:2], list("?limit=2"))
	assert.Equal(t, all[2:], list("?skip=2"))
	assert.Empty(t, list("?skip=3"))
	assert.Empty(t, list("?skip=1000000"))

	for _, q := range []string{"?limit=1001", "?limit=0", "?limit=-1", "?skip=-1", "?skip=abc", "?limit=1.5", "?limit=99999999999999999999"} {
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/"+q, tok, nil), http.StatusUnprocessableEntity)
	}
	r := e.Do(http.MethodGet, "/api/v1/locations", tok, "")
	require.Equal(t, http.StatusOK, r.Status, "GET with JSON content type and no body: %s", r.Body)
}

func TestAvailabilityFollowsReservations(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	union := func() location { t.Helper(); return inArea(t, e, tok, laArea)["Union Station"] }

	low := reserve(t, e, tok, towerUnion2, lockerID(t, e, towerUnion2, mediumLow), 600)
	l := union()
	assert.Equal(t, availability{24, 23}, l.LockerAvailability)
	assert.Equal(t, availability{8, 7}, l.LowLockerAvailability)
	types := byTypeName(l)
	assert.Equal(t, availability{8, 7}, types["medium"].LockerAvailability)
	assert.Equal(t, availability{4, 3}, types["medium"].LowLockerAvailability)
	assert.Equal(t, availability{12, 12}, types["small"].LockerAvailability)
	assert.Equal(t, availability{4, 4}, types["large"].LockerAvailability)
	assert.Equal(t, availability{4, 4}, types["large"].LowLockerAvailability)

	high := reserve(t, e, tok, towerUnion1, lockerID(t, e, towerUnion1, smallHigh), 600)
	l = union()
	assert.Equal(t, availability{24, 22}, l.LockerAvailability)
	assert.Equal(t, availability{8, 7}, l.LowLockerAvailability, "a high locker leaves the low count alone")
	types = byTypeName(l)
	assert.Equal(t, availability{12, 11}, types["small"].LockerAvailability)
	assert.Equal(t, availability{0, 0}, types["small"].LowLockerAvailability)

	// The other locations are untouched, and every form of the read agrees.
	locs := inArea(t, e, tok, laArea)
	assertFullAvailability(t, locs["Santa Monica Pier"], 1)
	closest := e.Do(http.MethodGet, "/api/v1/locations/closest?lat=34.0562&lon=-118.2365", tok, nil)
	require.Equal(t, http.StatusOK, closest.Status)
	var c location
	closest.JSON(t, &c)
	assert.Equal(t, availability{24, 22}, c.LockerAvailability)

	for _, res := range []reservation{low, high} {
		require.Equal(t, http.StatusNoContent, cancelReservation(t, e, tok, res).Status)
	}
	assertFullAvailability(t, union(), 2)
}

func TestClosestLocation(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	closest := func(q string) testenv.Response {
		t.Helper()
		return e.Do(http.MethodGet, "/api/v1/locations/closest?"+q, tok, nil)
	}
	name := func(r testenv.Response) string {
		t.Helper()
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		var l location
		r.JSON(t, &l)
		return l.Name
	}
	// 34.0993 is 10 km north of Santa Monica Pier (34.0094, -118.4973).
	const tenKmNorthOfPier = "lat=34.0993&lon=-118.4973"

	t.Run("finds", func(t *testing.T) {
		t.Parallel()
		cases := []struct{ name, query, want string }{
			{"near Santa Monica Pier", "lat=34.0100&lon=-118.4950", "Santa Monica Pier"},
			{"at Union Station", "lat=34.0562&lon=-118.2365", "Union Station"},
			{"near Pasadena", "lat=34.15&lon=-118.15", "Pasadena Old Town"},
			{"next to a gateway-only location, the nearest tower location", "lat=34.0211&lon=-118.3965", "Santa Monica Pier"},
			{"10 km away, default radius", tenKmNorthOfPier, "Santa Monica Pier"},
			{"10 km away, radius 15", tenKmNorthOfPier + "&radius=15", "Santa Monica Pier"},
			{"10 km away, radius 20", tenKmNorthOfPier + "&radius=20", "Santa Monica Pier"},
			{"unknown extra parameters ignored", "lat=34.0100&lon=-118.4950&foo=bar&limit=3", "Santa Monica Pier"},
		}
		for _, tc := range cases {
			assert.Equal(t, tc.want, name(closest(tc.query)), tc.name)
		}
	})

	t.Run("the body is a full Location", func(t *testing.T) {
		t.Parallel()
		r := closest("lat=34.0100&lon=-118.4950")
		require.Equal(t, http.StatusOK, r.Status)
		m := r.Map(t)
		assert.Equal(t, sorted("id", "name", "lat", "lon", "description", "address1", "address2", "city", "state", "zip",
			"country", "notes", "accessHours", "timezone", "lockerAvailability", "lowLockerAvailability", "byType"), keys(m))
		var l location
		r.JSON(t, &l)
		assertFullAvailability(t, l, 1)
	})

	t.Run("nothing within reach is 404", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{
			"lat=0&lon=-150",                         // the middle of the Pacific
			tenKmNorthOfPier + "&radius=5",           // narrowed
			"lat=34.0100&lon=-118.4950&radius=0.001", // 1 m
			"lat=90&lon=0", "lat=-90&lon=180",
		} {
			requireProblem(t, closest(q), http.StatusNotFound)
		}
	})

	t.Run("bad parameters are 422", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{
			"lat=abc&lon=-118.49",
			"lat=34.01&lon=xyz",
			"lat=34.01",
			"lon=-118.49",
			"",
			"lat=&lon=-118.49",
			"lat=91&lon=0",
			"lat=-91&lon=0",
			"lat=0&lon=-181",
			"lat=0&lon=180.5",
			"lat=NaN&lon=0",
			"lat=0&lon=Inf",
			"lat=-Inf&lon=0",
			"lat=34.01&lon=-118.49&radius=Inf",
			"lat=34.01&lon=-118.49&radius=21",
			"lat=34.01&lon=-118.49&radius=20.0001",
			"lat=34.01&lon=-118.49&radius=0",
			"lat=34.01&lon=-118.49&radius=-1",
			"lat=34.01&lon=-118.49&radius=NaN",
			"lat=34.01&lon=-118.49&radius=ten",
		} {
			requireProblem(t, closest(q), http.StatusUnprocessableEntity)
		}
	})

	t.Run("a GET with a JSON content type and no body works", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodGet, "/api/v1/locations/closest?lat=34.0100&lon=-118.4950", tok, "")
		assert.Equal(t, "Santa Monica Pier", name(r))
	})
}

func TestLocationLockers(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	union := locationID(t, e, towerUnion1)

	r := e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", union), tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var raw []map[string]any
	r.JSON(t, &raw)
	require.Len(t, raw, 24)
	assert.Equal(t, sorted("id", "name", "isLowLocker", "towerId", "locationId", "status", "type", "accessMode"), keys(raw[0]))
	assert.Equal(t, sorted("id", "name"), keys(raw[0]["status"].(map[string]any)))
	assert.Equal(t, sorted("id", "name", "description"), keys(raw[0]["type"].(map[string]any)))

	var ks []locker
	r.JSON(t, &ks)
	perTower := map[string]int{}
	low, ids := 0, map[int64]bool{}
	for _, k := range ks {
		perTower[k.TowerID]++
		ids[k.ID] = true
		assert.Equal(t, union, k.LocationID)
		assert.Equal(t, lockerStatus{ID: 1, Name: "available"}, k.Status)
		assert.Equal(t, "public", k.AccessMode)
		assert.Contains(t, []string{"small", "medium", "large"}, k.Type.Name)
		if k.IsLowLocker {
			low++
		}
	}
	assert.Equal(t, map[string]int{towerUnion1: 12, towerUnion2: 12}, perTower)
	assert.Equal(t, 8, low)
	assert.Len(t, ids, 24)

	// The same lockers as the towers list.
	for _, tw := range []string{towerUnion1, towerUnion2} {
		k := towerLocker(t, e, tok, tw, lockerID(t, e, tw, largeLow))
		assert.Equal(t, "11", k.Name)
		assert.True(t, k.IsLowLocker)
		assert.Equal(t, "large", k.Type.Name)
		assert.True(t, ids[k.ID])
	}

	t.Run("unknown, malformed and gateway-only locations", func(t *testing.T) {
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/999999/lockers", tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/0/lockers", tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/-1/lockers", tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/abc/lockers", tok, nil), http.StatusUnprocessableEntity)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/1.5/lockers", tok, nil), http.StatusUnprocessableEntity)
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/99999999999999999999/lockers", tok, nil), http.StatusUnprocessableEntity)
		for serial, id := range e.Seed.GatewayLocationID {
			r := e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", id), tok, nil)
			requireProblem(t, r, http.StatusNotFound)
			assert.NotZero(t, id, serial)
		}
		require.Len(t, e.Seed.GatewayLocationID, 2)
	})
}
