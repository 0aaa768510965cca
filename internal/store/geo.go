package store

import "math"

// EarthRadiusKm is the mean Earth radius used for great-circle distances.
const EarthRadiusKm = 6371.0088

// Box is a latitude/longitude rectangle that does not cross the antimeridian.
type Box struct {
	MinLat, MinLon, MaxLat, MaxLon float64
}

// BoxesAround returns one or two boxes (two when the area crosses the antimeridian) that
// contain every point within radiusKm of (lat, lon). They prefilter through the GiST index;
// the exact great-circle distance is checked afterwards.
func BoxesAround(lat, lon, radiusKm float64) []Box {
	dLat := radiusKm / (EarthRadiusKm * math.Pi / 180)
	minLat, maxLat := lat-dLat, lat+dLat
	if minLat <= -90 || maxLat >= 90 {
		// The circle reaches a pole: every longitude is in range.
		return []Box{{MinLat: math.Max(minLat, -90), MinLon: -180, MaxLat: math.Min(maxLat, 90), MaxLon: 180}}
	}
	// The widest longitude span of the circle is at its pole-most latitude.
	widest := math.Max(math.Abs(minLat), math.Abs(maxLat))
	dLon := dLat / math.Cos(widest*math.Pi/180)
	if dLon >= 180 {
		return []Box{{MinLat: minLat, MinLon: -180, MaxLat: maxLat, MaxLon: 180}}
	}
	minLon, maxLon := lon-dLon, lon+dLon
	switch {
	case minLon < -180:
		return []Box{
			{MinLat: minLat, MinLon: -180, MaxLat: maxLat, MaxLon: maxLon},
			{MinLat: minLat, MinLon: minLon + 360, MaxLat: maxLat, MaxLon: 180},
		}
	case maxLon > 180:
		return []Box{
			{MinLat: minLat, MinLon: minLon, MaxLat: maxLat, MaxLon: 180},
			{MinLat: minLat, MinLon: -180, MaxLat: maxLat, MaxLon: maxLon - 360},
		}
	}
	return []Box{{MinLat: minLat, MinLon: minLon, MaxLat: maxLat, MaxLon: maxLon}}
}

// DistanceKm is the great-circle (haversine) distance between two points.
func DistanceKm(lat1, lon1, lat2, lon2 float64) float64 {
	rad := math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * EarthRadiusKm * math.Asin(math.Min(1, math.Sqrt(a)))
}
