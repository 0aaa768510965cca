package apiserver

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// MaxHoldSeconds bounds reservation and token durations (1 s to 24 h).
const MaxHoldSeconds = 86400

// outboxGrace is how long the periodic sweep leaves a fresh outbox item to the immediate
// dispatch before it considers that attempt lost.
const outboxGrace = 5 * time.Second

// ReservationBody is a reservation.
type ReservationBody struct {
	ID        uuid.UUID `json:"id"`
	LockerID  int64     `json:"lockerId"`
	TowerID   string    `json:"towerId"`
	Status    string    `json:"status" enum:"active,consumed,cancelled,expired"`
	CreatedAt Timestamp `json:"createdAt"`
	ExpiresAt Timestamp `json:"expiresAt"`
	Duration  int       `json:"duration" doc:"Seconds"`
}

func reservationBody(r store.Reservation) ReservationBody {
	return ReservationBody{ID: r.ID, LockerID: r.LockerID, TowerID: r.TowerID, Status: r.Status,
		CreatedAt: ts(r.CreatedAt), ExpiresAt: ts(r.ExpiresAt), Duration: r.DurationSeconds}
}

// LockerPath addresses a tower locker. Embedded input types must be exported: huma skips
// unexported embedded fields, so their parameters would never be read.
type LockerPath struct {
	TowerID  string `path:"tower_id" pattern:"^[0-9a-fA-F]{16}$" doc:"16 hex digits, any case" example:"0100000000000014"`
	LockerID int64  `path:"locker_id"`
}

type reservationOutput struct {
	Location string `header:"Location"`
	Body     ReservationBody
}

func (s *Server) registerReservations(api huma.API) {
	tags := []string{"Reservations"}
	huma.Register(api, op(huma.Operation{
		OperationID: "create-reservation", Method: http.MethodPost, Path: "/api/v1/towers/{tower_id}/lockers/{locker_id}/reservations", Tags: tags,
		Summary:       "Reserve a locker",
		Description:   "Holds an available locker for the caller for duration seconds. Only one of any number of concurrent callers wins; the others get 409 naming the locker's current status.",
		DefaultStatus: http.StatusCreated,
		Security:      needs(jwtauth.ScopeServiceProvider),
	}), s.createReservation)

	huma.Register(api, op(huma.Operation{
		OperationID: "cancel-reservation", Method: http.MethodDelete, Path: "/api/v1/towers/{tower_id}/lockers/{locker_id}/reservations/{reservation_id}", Tags: tags,
		Summary:       "Cancel a reservation",
		Description:   "Gives the locker back. Repeating the call for a cancelled reservation answers 204 again; a consumed or expired one answers 409.",
		DefaultStatus: http.StatusNoContent,
		Security:      needs(jwtauth.ScopeServiceProvider),
	}), s.cancelReservation)

	huma.Register(api, op(huma.Operation{
		OperationID: "get-reservation", Method: http.MethodGet, Path: "/api/v1/reservations/{reservation_id}", Tags: tags,
		Summary: "A reservation", Security: needs(jwtauth.ScopeServiceProvider),
	}), s.getReservation)
}

// createReservation answers POST /api/v1/towers/{tower_id}/lockers/{locker_id}/reservations.
func (s *Server) createReservation(ctx context.Context, in *struct {
	LockerPath
	Body struct {
		Duration int `json:"duration" minimum:"1" maximum:"86400" doc:"Seconds"`
	}
}) (*reservationOutput, error) {
	p := principal(ctx)
	tower, _, err := s.tower(ctx, p.OrgID, in.TowerID)
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	d := time.Duration(in.Body.Duration) * time.Second
	start := time.Now().UTC().Truncate(time.Microsecond)
	r := store.Reservation{ID: uuid.New(), LockerID: in.LockerID, TowerID: tower.ID, LocationID: tower.LocationID, ExpiresAt: start.Add(d)}
	item := outbox.ReservationItem(r, p.OrgID, "", nil)
	err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var err error
		r, err = tx.ReserveLocker(ctx, store.ReserveParams{
			ID: r.ID, OrgID: p.OrgID, ClientID: p.ClientID, TowerID: tower.ID, LockerID: in.LockerID, Duration: d, Start: start,
		})
		return []store.OutboxItem{item}, err
	})
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	return &reservationOutput{Location: "/api/v1/reservations/" + r.ID.String(), Body: reservationBody(r)}, nil
}

// cancelReservation answers DELETE /api/v1/towers/{tower_id}/lockers/{locker_id}/reservations/{reservation_id}.
func (s *Server) cancelReservation(ctx context.Context, in *struct {
	LockerPath
	ReservationID string `path:"reservation_id" format:"uuid"`
}) (*struct{}, error) {
	p := principal(ctx)
	id, err := uuid.Parse(in.ReservationID)
	if err != nil {
		return nil, s.towerError(ctx, "reservation", errNotFound("reservation: not found"))
	}
	err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		r, ok, err := tx.CancelReservation(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID, id)
		if err != nil || !ok {
			return nil, err
		}
		return []store.OutboxItem{outbox.ReservationItem(r, p.OrgID, contract.SignalReservationEnded, contract.OutcomeCancelled)}, nil
	})
	if err != nil {
		return nil, s.towerError(ctx, "reservation", err)
	}
	return nil, nil
}

// getReservation answers GET /api/v1/reservations/{reservation_id}.
func (s *Server) getReservation(ctx context.Context, in *struct {
	ReservationID string `path:"reservation_id" format:"uuid"`
}) (*struct{ Body ReservationBody }, error) {
	id, err := uuid.Parse(in.ReservationID)
	if err != nil {
		return nil, s.towerError(ctx, "reservation", errNotFound("reservation: not found"))
	}
	r, err := s.deps.Store.Reservation(ctx, principal(ctx).OrgID, id)
	if err != nil {
		return nil, s.towerError(ctx, "reservation", err)
	}
	return &struct{ Body ReservationBody }{Body: reservationBody(r)}, nil
}

// record makes a state change in one transaction with the workflow starts and signals it
// returns (outbox.Record), dispatching them at once after the commit.
func (s *Server) record(ctx context.Context, change outbox.Change) error {
	_, err := outbox.Record(ctx, s.deps.Store, outboxGrace, s.deps.Workflows, change)
	return err
}
