package apiserver

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/jwtauth"
)

// TowerBody is a tower.
type TowerBody struct {
	ID          string `json:"id" example:"0100000000000014"`
	Name        string `json:"name"`
	LocationID  int64  `json:"locationId"`
	LockerCount int    `json:"lockerCount"`
}

// TowerPath addresses a tower; embedded in other inputs, so it is exported (huma skips
// unexported embedded structs).
type TowerPath struct {
	TowerID string `path:"tower_id" pattern:"^[0-9a-fA-F]{16}$" doc:"16 hex digits, any case" example:"0100000000000014"`
}

func (s *Server) registerTowers(api huma.API) {
	tags := []string{"Towers"}
	huma.Register(api, op(huma.Operation{
		OperationID: "get-tower", Method: http.MethodGet, Path: "/api/v1/towers/{tower_id}", Tags: tags,
		Summary: "A tower", Security: needs(jwtauth.ScopeServiceProvider),
	}), s.getTower)
	huma.Register(api, op(huma.Operation{
		OperationID: "list-tower-lockers", Method: http.MethodGet, Path: "/api/v1/towers/{tower_id}/lockers", Tags: tags,
		Summary: "The lockers of a tower, all statuses", Security: needs(jwtauth.ScopeServiceProvider),
	}), s.listTowerLockers)
}

// getTower answers GET /api/v1/towers/{tower_id}.
func (s *Server) getTower(ctx context.Context, in *TowerPath) (*struct{ Body TowerBody }, error) {
	t, err := s.deps.Store.Tower(ctx, principal(ctx).OrgID, in.TowerID)
	if err != nil {
		return nil, s.towerError(ctx, "tower", err)
	}
	return &struct{ Body TowerBody }{Body: TowerBody{ID: t.ID, Name: t.Name, LocationID: t.LocationID, LockerCount: t.LockerCount}}, nil
}

// listTowerLockers answers GET /api/v1/towers/{tower_id}/lockers.
func (s *Server) listTowerLockers(ctx context.Context, in *TowerPath) (*struct{ Body []LockerBody }, error) {
	ks, err := s.deps.Store.TowerLockers(ctx, principal(ctx).OrgID, in.TowerID)
	if err != nil {
		return nil, s.towerError(ctx, "tower", err)
	}
	return &struct{ Body []LockerBody }{Body: lockerBodies(ks)}, nil
}
