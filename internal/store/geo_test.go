package store_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// destination is the point at distanceKm from (lat, lon) on the initial bearing (degrees).
func destination(lat, lon, bearing, distanceKm float64) (float64, float64) {
	rad := math.Pi / 180
	d := distanceKm / store.EarthRadiusKm
	φ1, λ1, θ := lat*rad, lon*rad, bearing*rad
	φ2 := math.Asin(math.Sin(φ1)*math.Cos(d) + math.Cos(φ1)*math.Sin(d)*math.Cos(θ))
	λ2 := λ1 + math.Atan2(math.Sin(θ)*math.Sin(d)*math.Cos(φ1), math.Cos(d)-math.Sin(φ1)*math.Sin(φ2))
	lon2 := math.Mod(λ2/rad+540, 360) - 180
	return φ2 / rad, lon2
}

func inBox(b store.Box, lat, lon float64) bool {
	const eps = 1e-9
	return lat >= b.MinLat-eps && lat <= b.MaxLat+eps && lon >= b.MinLon-eps && lon <= b.MaxLon+eps
}

func TestBoxesAround(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		lat, lon, km  float64
		boxes         int
		allLongitudes bool
	}{
		{"Los Angeles", 34.0522, -118.2437, 20, 1, false},
		{"the equator at Greenwich", 0, 0, 20, 1, false},
		{"a tiny radius", 34.0522, -118.2437, 0.001, 1, false},
		{"near the antimeridian, east side", 0, 179.95, 20, 2, false},
		{"near the antimeridian, west side", 0, -179.95, 20, 2, false},
		{"on the antimeridian", -16.5, 180, 20, 2, false},
		{"near the antimeridian at 60° north", 60, 179.99, 20, 2, false},
		{"Fiji, clear of the antimeridian", -17.7, 178.0, 20, 1, false},
		{"near the north pole", 89.95, 10, 20, 1, true},
		{"near the south pole", -89.9, -45, 20, 1, true},
		{"at the north pole", 90, 0, 20, 1, true},
		{"high latitude, wide longitude span", 89.5, 0, 20, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			boxes := store.BoxesAround(tc.lat, tc.lon, tc.km)
			require.Len(t, boxes, tc.boxes, "%+v", boxes)
			for _, b := range boxes {
				assert.LessOrEqual(t, b.MinLat, b.MaxLat)
				assert.LessOrEqual(t, b.MinLon, b.MaxLon)
				assert.GreaterOrEqual(t, b.MinLat, -90.0)
				assert.LessOrEqual(t, b.MaxLat, 90.0)
				assert.GreaterOrEqual(t, b.MinLon, -180.0)
				assert.LessOrEqual(t, b.MaxLon, 180.0)
			}
			if tc.boxes == 2 {
				// One box ends at +180, the other starts at -180.
				assert.True(t, boxes[0].MaxLon == 180 || boxes[1].MaxLon == 180, "%+v", boxes)
				assert.True(t, boxes[0].MinLon == -180 || boxes[1].MinLon == -180, "%+v", boxes)
			}
			if tc.allLongitudes {
				assert.Equal(t, -180.0, boxes[0].MinLon)
				assert.Equal(t, 180.0, boxes[0].MaxLon)
			}

			// Every point within the radius is in some box: the centre and the whole circle.
			covered := func(lat, lon float64) bool {
				for _, b := range boxes {
					if inBox(b, lat, lon) {
						return true
					}
				}
				return false
			}
			assert.True(t, covered(tc.lat, tc.lon), "centre")
			for bearing := 0.0; bearing < 360; bearing += 2.5 {
				for _, frac := range []float64{0.5, 0.999} {
					lat, lon := destination(tc.lat, tc.lon, bearing, tc.km*frac)
					require.InDelta(t, tc.km*frac, store.DistanceKm(tc.lat, tc.lon, lat, lon), 1e-6*tc.km+1e-9)
					assert.True(t, covered(lat, lon), "bearing %.1f at %.3f km: (%f, %f) not in %+v", bearing, tc.km*frac, lat, lon, boxes)
				}
			}

			// The boxes stay tight: a point 50 % beyond the radius straight north or south
			// (where the box's latitude bound is exact) is outside.
			if !tc.allLongitudes {
				for _, bearing := range []float64{0, 180} {
					lat, lon := destination(tc.lat, tc.lon, bearing, tc.km*1.5)
					assert.False(t, covered(lat, lon), "bearing %.0f beyond the radius", bearing)
				}
			}
		})
	}
}

func TestDistanceKm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                   string
		lat1, lon1, lat2, lon2 float64
		km, tolerance          float64
	}{
		{"the same point", 34.0522, -118.2437, 34.0522, -118.2437, 0, 1e-9},
		{"one degree of longitude on the equator", 0, 0, 0, 1, 111.195, 0.001},
		{"one degree of latitude", 10, 20, 11, 20, 111.195, 0.001},
		{"half way round the equator", 0, 0, 0, 180, math.Pi * store.EarthRadiusKm, 1e-6},
		{"pole to pole", 90, 0, -90, 0, math.Pi * store.EarthRadiusKm, 1e-6},
		{"London to Paris", 51.5074, -0.1278, 48.8566, 2.3522, 343.56, 0.5},
		{"Los Angeles to New York", 34.0522, -118.2437, 40.7128, -74.0060, 3935.75, 2},
		{"across the antimeridian", 0, 179.95, 0, -179.95, 11.1195, 0.001},
		{"Union Station to Santa Monica Pier", 34.0562, -118.2365, 34.0094, -118.4973, 24.59, 0.05},
		{"10 km north of Santa Monica Pier", 34.0094, -118.4973, 34.0993, -118.4973, 9.996, 0.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.InDelta(t, tc.km, store.DistanceKm(tc.lat1, tc.lon1, tc.lat2, tc.lon2), tc.tolerance)
			assert.InDelta(t, tc.km, store.DistanceKm(tc.lat2, tc.lon2, tc.lat1, tc.lon1), tc.tolerance, "symmetric")
		})
	}
}
