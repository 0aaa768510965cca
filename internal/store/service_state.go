package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ServiceChange reports what an operator's service-state change ended.
type ServiceChange struct {
	From, To             LockerStatus
	CancelledReservation *uuid.UUID
	RevokedTokens        []uuid.UUID
}

// SetOutOfService takes a tower locker out of service (operators only). The possession
// ends, a reservation is cancelled, active tokens are revoked and the generation is bumped,
// so no outstanding token opens it; the tower's command log gets the new generation floor
// and the service state in the same transaction. An occupied locker needs force, and keeps its possession
// (the item is inside) for when it returns to service. Doing it twice changes nothing.
func (s *Store) SetOutOfService(ctx context.Context, towerID string, lockerID int64, reason string, force bool) (ServiceChange, error) {
	k, err := s.lockLocker(ctx, 0, towerID, lockerID)
	if err != nil {
		return ServiceChange{}, err
	}
	ch := ServiceChange{From: k.Status, To: StatusOutOfService}
	switch k.Status {
	case StatusOutOfService:
		return ch, nil
	case StatusOccupied:
		if !force {
			return ServiceChange{}, conflict(k, "locker %d is occupied: an item is inside; force keeps its possession", k.ID)
		}
	case StatusReserved:
		ch.CancelledReservation = k.ReservationID
		if _, err := s.db.Exec(ctx, `UPDATE reservations SET status = 'cancelled', ended_at = now() WHERE id = $1 AND status = 'active'`,
			*k.ReservationID); err != nil {
			return ServiceChange{}, fmt.Errorf("cancel reservation: %w", translate(err))
		}
	}
	keep := k.Status == StatusOccupied
	var gen int32
	err = s.db.QueryRow(ctx, `
		UPDATE lockers SET status = 6, generation = generation + 1, kept_possession = $2, service_reason = $3,
		       possessor_client_id = CASE WHEN $2 THEN possessor_client_id END,
		       possession_since = CASE WHEN $2 THEN possession_since END,
		       hold_expires_at = NULL, reservation_id = NULL, updated_at = now()
		WHERE id = $1 RETURNING generation`, k.ID, keep, reason).Scan(&gen)
	if err != nil {
		return ServiceChange{}, fmt.Errorf("set out of service: %w", translate(err))
	}
	if ch.RevokedTokens, err = s.revokeActiveTokens(ctx, k.ID); err != nil {
		return ServiceChange{}, err
	}
	// The tower learns it with the next sync through any phone, even before it sees a token
	// of the new generation: every outstanding token is refused from then on.
	if err := s.appendCommands(ctx, k.TowerID, []newCommand{floorCommand(k.ID, gen), serviceCommand(k.ID, true)}); err != nil {
		return ServiceChange{}, err
	}
	return ch, nil
}

// SetInService returns an out-of-service locker to service: occupied if it kept a
// possession, else available.
func (s *Store) SetInService(ctx context.Context, towerID string, lockerID int64) (ServiceChange, error) {
	k, err := s.lockLocker(ctx, 0, towerID, lockerID)
	if err != nil {
		return ServiceChange{}, err
	}
	if k.Status != StatusOutOfService {
		return ServiceChange{From: k.Status, To: k.Status}, nil
	}
	to := StatusAvailable
	if k.KeptPossession {
		to = StatusOccupied
	}
	_, err = s.db.Exec(ctx, `
		UPDATE lockers SET status = $2, kept_possession = false, service_reason = NULL, updated_at = now()
		WHERE id = $1`, k.ID, to)
	if err != nil {
		return ServiceChange{}, fmt.Errorf("set in service: %w", translate(err))
	}
	if err := s.appendCommands(ctx, k.TowerID, []newCommand{serviceCommand(k.ID, false)}); err != nil {
		return ServiceChange{}, err
	}
	return ServiceChange{From: k.Status, To: to}, nil
}

// ActiveToken is an unexpired, unused token of a possession.
type ActiveToken struct {
	ID        uuid.UUID
	Type      string
	ExpiresAt time.Time
}

// AssignedLocker is a locker in a client's possession with the possession's details.
type AssignedLocker struct {
	Locker        Locker
	Since         *time.Time
	ReservationID *uuid.UUID
	ActiveTokens  []ActiveToken
}

// AssignedLockers lists the lockers the client possesses now: reserved by it, rented,
// occupied, declined, and out of service with its item kept inside.
func (s *Store) AssignedLockers(ctx context.Context, orgID int64, clientID string) ([]AssignedLocker, error) {
	lockers, err := collectLockers(s.db.Query(ctx, lockerSelect+`
		WHERE k.organization_id = $1 AND k.possessor_client_id = $2
		  AND (locker_status(k.status, k.hold_expires_at) IN (2, 3, 4, 5) OR (k.status = 6 AND k.kept_possession))
		ORDER BY k.possession_since, k.id`, orgID, clientID))
	if err != nil {
		return nil, err
	}
	out := make([]AssignedLocker, 0, len(lockers))
	for _, k := range lockers {
		a := AssignedLocker{Locker: k, Since: k.PossessionSince, ReservationID: k.ReservationID, ActiveTokens: []ActiveToken{}}
		rows, err := s.db.Query(ctx, `
			SELECT id, type, expires_at FROM locker_tokens
			WHERE locker_id = $1 AND generation = $2 AND status = 'active' AND expires_at > now()
			ORDER BY expires_at, id`, k.ID, k.Generation)
		if err != nil {
			return nil, fmt.Errorf("list active tokens: %w", translate(err))
		}
		for rows.Next() {
			var t ActiveToken
			if err := rows.Scan(&t.ID, &t.Type, &t.ExpiresAt); err != nil {
				rows.Close()
				return nil, fmt.Errorf("scan active token: %w", err)
			}
			a.ActiveTokens = append(a.ActiveTokens, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("list active tokens: %w", translate(err))
		}
		out = append(out, a)
	}
	return out, nil
}

// LockerIDByName finds a tower locker by its door label (operators address lockers so).
func (s *Store) LockerIDByName(ctx context.Context, towerID, name string) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT id FROM lockers WHERE tower_id = $1 AND name = $2`, strings.ToLower(towerID), name).Scan(&id); err != nil {
		return 0, fmt.Errorf("find locker: %w", translate(err))
	}
	return id, nil
}
