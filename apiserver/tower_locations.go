package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// ClosestRadiusKm is the search radius of the closest-location operation (seed: 12 miles).
const ClosestRadiusKm = 20.0

// AreaQuery is the in-area search; exported so huma reads it when embedded in an input.
type AreaQuery struct {
	Start string `query:"start" doc:"One corner of the area: <lat>,<lon>" example:"34.00,-118.50"`
	End   string `query:"end" doc:"The opposite corner: <lat>,<lon>" example:"34.20,-118.10"`
}

// box parses the two corners (in any order) into a search box; errors name the parameter.
func (q AreaQuery) box() (store.Box, error) {
	lat1, lon1, err := parsePoint("start", q.Start)
	if err != nil {
		return store.Box{}, err
	}
	lat2, lon2, err := parsePoint("end", q.End)
	if err != nil {
		return store.Box{}, err
	}
	return store.Box{
		MinLat: math.Min(lat1, lat2), MaxLat: math.Max(lat1, lat2),
		MinLon: math.Min(lon1, lon2), MaxLon: math.Max(lon1, lon2),
	}, nil
}

// parsePoint reads "<lat>,<lon>"; latitudes in [-90, 90], longitudes in [-180, 180].
func parsePoint(name, s string) (lat, lon float64, err error) {
	bad := func(msg string) error {
		return invalidField("malformed point", "query."+name, s, msg)
	}
	a, b, ok := strings.Cut(s, ",")
	if !ok || strings.Contains(b, ",") {
		return 0, 0, bad("expected <lat>,<lon>")
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	lat, err1 := strconv.ParseFloat(a, 64)
	lon, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || !decimalRE.MatchString(a) || !decimalRE.MatchString(b) || !finite(lat) || !finite(lon) {
		return 0, 0, bad("expected two decimal numbers <lat>,<lon>")
	}
	if lat < -90 || lat > 90 {
		return 0, 0, bad("latitude must be within [-90, 90]")
	}
	if lon < -180 || lon > 180 {
		return 0, 0, bad("longitude must be within [-180, 180]")
	}
	return lat, lon, nil
}

// decimalRE is a plain decimal number; strconv.ParseFloat alone would also take hex floats
// ("0x1p4"), underscores and "Inf".
var decimalRE = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

type locationsOutput struct {
	Body []LocationBody
}

func (s *Server) registerLocations(api huma.API) {
	tags := []string{"Locations"}
	huma.Register(api, op(huma.Operation{
		OperationID: "get-locations-in-area", Method: http.MethodGet, Path: "/api/v1/locations/in-area", Tags: tags,
		Summary: "Locations in a rectangular area, with availability",
		Description: fmt.Sprintf("Tower locations inside the rectangle with corners start and end (any order; no wrap across the antimeridian), by id, at most %d. "+
			"Availability counts lockers available now.", store.MaxAreaResults),
		Security: needs(jwtauth.ScopeServiceProvider),
	}), s.getLocationsInArea)

	listOp := huma.Operation{
		OperationID: "list-locations", Method: http.MethodGet, Path: "/api/v1/locations/", Tags: tags,
		Summary:     "Locations: in an area, or all of them paged",
		Description: "With start and end this is the in-area search. Without them it lists the organization's tower locations by id, with skip and limit.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}
	huma.Register(api, op(listOp), s.listLocations)
	listOp.OperationID, listOp.Path, listOp.Hidden = "list-locations-no-slash", "/api/v1/locations", true
	huma.Register(api, op(listOp), s.listLocations)

	huma.Register(api, op(huma.Operation{
		OperationID: "get-closest-location", Method: http.MethodGet, Path: "/api/v1/locations/closest", Tags: tags,
		Summary:     "The nearest location within 20 km",
		Description: "Great-circle distance; 404 when no tower location is within the radius.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}), s.getClosestLocation)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-location-lockers", Method: http.MethodGet, Path: "/api/v1/locations/{location_id}/lockers", Tags: tags,
		Summary:  "The lockers of a location, with their status",
		Security: needs(jwtauth.ScopeServiceProvider),
	}), s.listLocationLockers)
}

// getLocationsInArea answers GET /api/v1/locations/in-area, where both corners are required.
func (s *Server) getLocationsInArea(ctx context.Context, in *struct {
	Start string `query:"start" required:"true" doc:"One corner of the area: <lat>,<lon>" example:"34.00,-118.50"`
	End   string `query:"end" required:"true" doc:"The opposite corner: <lat>,<lon>" example:"34.20,-118.10"`
}) (*locationsOutput, error) {
	return s.locationsInArea(ctx, AreaQuery{Start: in.Start, End: in.End})
}

// listLocations answers GET /api/v1/locations/: the in-area search when a corner is given,
// else a page of all locations.
func (s *Server) listLocations(ctx context.Context, in *struct {
	AreaQuery
	Skip  int `query:"skip" minimum:"0" default:"0"`
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}) (*locationsOutput, error) {
	if in.Start != "" || in.End != "" {
		return s.locationsInArea(ctx, in.AreaQuery)
	}
	locs, err := s.deps.Store.ListLocations(ctx, principal(ctx).OrgID, in.Skip, in.Limit)
	if err != nil {
		return nil, s.towerError(ctx, "list locations", err)
	}
	return &locationsOutput{Body: locationBodies(locs)}, nil
}

// locationsInArea answers the in-area search of both location routes.
func (s *Server) locationsInArea(ctx context.Context, q AreaQuery) (*locationsOutput, error) {
	b, err := q.box()
	if err != nil {
		return nil, s.towerError(ctx, "locations in area", err)
	}
	locs, err := s.deps.Store.LocationsInArea(ctx, principal(ctx).OrgID, b)
	if err != nil {
		return nil, s.towerError(ctx, "locations in area", err)
	}
	return &locationsOutput{Body: locationBodies(locs)}, nil
}

// getClosestLocation answers GET /api/v1/locations/closest.
func (s *Server) getClosestLocation(ctx context.Context, in *struct {
	Lat    float64 `query:"lat" required:"true" minimum:"-90" maximum:"90"`
	Lon    float64 `query:"lon" required:"true" minimum:"-180" maximum:"180"`
	Radius float64 `query:"radius" exclusiveMinimum:"0" maximum:"20" doc:"Search radius in km (default and maximum 20)"`
}) (*struct{ Body LocationBody }, error) {
	if !finite(in.Lat) || !finite(in.Lon) || !finite(in.Radius) {
		return nil, s.towerError(ctx, "closest location", invalidInput("lat, lon and radius must be finite numbers"))
	}
	radius := in.Radius
	if radius == 0 {
		radius = ClosestRadiusKm
	}
	loc, err := s.deps.Store.ClosestLocation(ctx, principal(ctx).OrgID, in.Lat, in.Lon, radius)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = errNotFound(fmt.Sprintf("no location within %g km", radius))
		}
		return nil, s.towerError(ctx, "closest location", err)
	}
	return &struct{ Body LocationBody }{Body: locationBody(loc)}, nil
}

// listLocationLockers answers GET /api/v1/locations/{location_id}/lockers.
func (s *Server) listLocationLockers(ctx context.Context, in *struct {
	LocationID int64 `path:"location_id"`
}) (*struct{ Body []LockerBody }, error) {
	ks, err := s.deps.Store.LocationLockers(ctx, principal(ctx).OrgID, in.LocationID)
	if err != nil {
		return nil, s.towerError(ctx, "location", err)
	}
	return &struct{ Body []LockerBody }{Body: lockerBodies(ks)}, nil
}
