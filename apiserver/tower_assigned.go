package apiserver

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
)

// ActiveTokenBody is an unexpired, unused token of a possession.
type ActiveTokenBody struct {
	ID        uuid.UUID `json:"id"`
	Type      string    `json:"type" enum:"dropoff,pickup,release"`
	ExpiresAt Timestamp `json:"expiresAt"`
}

// PossessionBody describes the caller's hold on a locker.
type PossessionBody struct {
	Since         *Timestamp        `json:"since" nullable:"true"`
	ReservationID *uuid.UUID        `json:"reservationId,omitempty"`
	ActiveTokens  []ActiveTokenBody `json:"activeTokens"`
}

// AssignedLockerBody is a Locker with the caller's possession.
type AssignedLockerBody struct {
	LockerBody
	Possession PossessionBody `json:"possession"`
}

func (s *Server) registerAssigned(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "list-assigned-lockers", Method: http.MethodGet, Path: "/api/v1/users/me/assigned-lockers", Tags: []string{"Lockers"},
		Summary:     "Lockers in the caller's possession",
		Description: "Reserved by the caller, rented, occupied, declined (and out of service with the caller's item kept inside), with the possession's details.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}), s.listAssignedLockers)
}

// listAssignedLockers answers GET /api/v1/users/me/assigned-lockers.
func (s *Server) listAssignedLockers(ctx context.Context, _ *struct{}) (*struct{ Body []AssignedLockerBody }, error) {
	p := principal(ctx)
	list, err := s.deps.Store.AssignedLockers(ctx, p.OrgID, p.ClientID)
	if err != nil {
		return nil, s.towerError(ctx, "assigned lockers", err)
	}
	out := make([]AssignedLockerBody, 0, len(list))
	for _, a := range list {
		b := AssignedLockerBody{LockerBody: lockerBody(a.Locker), Possession: PossessionBody{ReservationID: a.ReservationID,
			ActiveTokens: make([]ActiveTokenBody, 0, len(a.ActiveTokens))}}
		b.Possession.Since = optTS(a.Since)
		for _, t := range a.ActiveTokens {
			b.Possession.ActiveTokens = append(b.Possession.ActiveTokens, ActiveTokenBody{ID: t.ID, Type: t.Type, ExpiresAt: ts(t.ExpiresAt)})
		}
		out = append(out, b)
	}
	return &struct{ Body []AssignedLockerBody }{Body: out}, nil
}
