package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
)

// searchResult is the location-search scenario's outcome.
type searchResult struct {
	Locations                    int
	InArea, Closest              summary // client-side latency
	InAreaServer, ClosestServer  summary // Server-Timing: time inside the apiserver
	InAreaResults, ClosestMisses int
}

// runSearch sends n in-area searches (about 20 x 20 km) and n closest searches at random
// points of the generated area, one at a time.
func runSearch(ctx context.Context, b *bench, n, locations int) (searchResult, error) {
	res := searchResult{Locations: locations}
	rng := rand.New(rand.NewPCG(1, 2))
	area, areaSrv := newSample("in-area (client)"), newSample("in-area (server)")
	closest, closestSrv := newSample("closest (client)"), newSample("closest (server)")
	bx := b.data.searchBox
	for i := 0; i < n; i++ {
		lat := bx.minLat + rng.Float64()*(bx.maxLat-bx.minLat-0.2)
		lon := bx.minLon + rng.Float64()*(bx.maxLon-bx.minLon-0.2)
		r, err := b.api.authed(ctx, http.MethodGet, fmt.Sprintf("/api/v1/locations/in-area?start=%.5f,%.5f&end=%.5f,%.5f", lat, lon, lat+0.2, lon+0.2), nil)
		if err != nil || r.status != http.StatusOK {
			area.fail()
		} else {
			area.add(r.latency)
			areaSrv.add(r.serverTime)
			res.InAreaResults += countItems(r.body)
		}
		r, err = b.api.authed(ctx, http.MethodGet, fmt.Sprintf("/api/v1/locations/closest?lat=%.5f&lon=%.5f", lat+0.1, lon+0.1), nil)
		switch {
		case err != nil:
			closest.fail()
		case r.status == http.StatusOK || r.status == http.StatusNotFound:
			closest.add(r.latency)
			closestSrv.add(r.serverTime)
			if r.status == http.StatusNotFound {
				res.ClosestMisses++
			}
		default:
			closest.fail()
		}
	}
	res.InArea, res.InAreaServer, res.Closest, res.ClosestServer = area.summary(), areaSrv.summary(), closest.summary(), closestSrv.summary()
	return res, nil
}

func countItems(body []byte) int {
	depth, n := 0, 0
	for _, c := range body {
		switch c {
		case '[', '{':
			if depth == 1 && c == '{' {
				n++
			}
			depth++
		case ']', '}':
			depth--
		}
	}
	return n
}
