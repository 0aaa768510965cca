package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// StatusConflictError says why a locker or reservation could not make a transition; it
// matches ErrConflict with errors.Is.
type StatusConflictError = lockerrules.ConflictError

// ErrNotDue means an expiry ran before its time by the database clock; retry shortly.
var ErrNotDue = errors.New("expiry not due yet")

// ReserveParams describe a new reservation.
type ReserveParams struct {
	ID       uuid.UUID
	OrgID    int64
	ClientID string
	TowerID  string
	LockerID int64
	Duration time.Duration
	// Start, when set, is when the reservation begins (it expires Duration later); zero: the
	// database's now().
	Start time.Time
}

// ReserveLocker holds an available locker (a lapsed hold counts as available) for the
// client. Exactly one of any number of concurrent callers wins; the others get a
// *StatusConflictError naming the current status, or ErrNotFound for an unknown locker.
func (s *Store) ReserveLocker(ctx context.Context, p ReserveParams) (Reservation, error) {
	r := Reservation{ID: p.ID, OrganizationID: p.OrgID, ClientID: p.ClientID, LockerID: p.LockerID,
		TowerID: strings.ToLower(p.TowerID), Status: ReservationActive, DurationSeconds: int(p.Duration.Seconds())}
	var start *time.Time
	if !p.Start.IsZero() {
		start = &p.Start
	}
	// One statement: claim the locker if it is available now and record the reservation;
	// then, in the same transaction, its event.
	var subOrg, locationID *int64
	var createdAt, expiresAt *time.Time
	var seen LockerStatus
	claimed := false
	err := s.atomically(ctx, p.OrgID, func(tx *Store) error {
		err := tx.db.QueryRow(ctx, `
		WITH t AS (SELECT coalesce($7::timestamptz, now()) AS start),
		cur AS (
		    -- the locker as the claim decides on it: a concurrent claim's row lock is waited
		    -- for and its committed row read, so a lost claim names the status it lost to
		    SELECT k.id, locker_status(k.status, k.hold_expires_at) AS status
		    FROM lockers k
		    WHERE k.id = $4 AND k.tower_id = $5 AND k.organization_id = $2
		    FOR UPDATE
		),
		claimed AS (
		    UPDATE lockers k SET
		        status = `+reservedSQL+`,
		        reservation_id = $1,
		        hold_expires_at = t.start + make_interval(secs => $6),
		        possessor_client_id = $3,
		        possession_since = t.start,
		        -- a new possession: its generation makes every earlier customer's token stale
		        generation = k.generation + 1,
		        updated_at = now()
		    FROM t, cur
		    WHERE k.id = cur.id AND cur.status IN (`+reservableSQL+`)
		    RETURNING k.id, k.location_id, k.hold_expires_at, k.generation, t.start
		), head AS (
		    -- a new possession: the tower learns the generation floor with its next sync; the
		    -- head row is locked after the locker row, as everywhere (commands.go)
		    INSERT INTO tower_command_heads (tower_id, head) SELECT $5, 1 FROM claimed
		    ON CONFLICT (tower_id) DO UPDATE SET head = tower_command_heads.head + 1
		    RETURNING head
		), cmd AS (
		    INSERT INTO tower_commands (tower_id, number, kind, arg1, arg2)
		    SELECT $5, head.head, 'generation_floor', c.id, c.generation FROM head, claimed c
		), res AS (
		    INSERT INTO reservations (id, organization_id, client_id, locker_id, tower_id, status,
		                              duration_seconds, created_at, expires_at)
		    SELECT $1, $2, $3, c.id, $5, 'active', $6, c.start, c.hold_expires_at FROM claimed c
		    RETURNING created_at, expires_at
		)
		SELECT res.created_at, res.expires_at, c.location_id,
		       (SELECT l.sub_organization_id FROM locations l WHERE l.id = c.location_id),
		       cur.status
		FROM cur LEFT JOIN claimed c ON true LEFT JOIN res ON true`,
			p.ID, p.OrgID, p.ClientID, p.LockerID, r.TowerID, r.DurationSeconds, start).
			Scan(&createdAt, &expiresAt, &locationID, &subOrg, &seen)
		if err != nil {
			return translate(err) // ErrNotFound: no such locker
		}
		if createdAt == nil {
			return nil // not claimed: nothing changed, no event
		}
		r.CreatedAt, r.ExpiresAt, r.LocationID = *createdAt, *expiresAt, *locationID
		claimed = true
		_, err = tx.RecordEvent(ctx, Event{OrgID: p.OrgID, SubOrgID: subOrg, Type: EventTypeReservationCreated, Data: eventReservation(r)})
		return err
	})
	if err != nil {
		return Reservation{}, fmt.Errorf("reserve locker: %w", err)
	}
	if claimed {
		return r, nil
	}
	if _, err := lockerrules.Decide(lockerrules.Locker{ID: p.LockerID, Status: seen}, lockerrules.Reserve); err != nil {
		return Reservation{}, err
	}
	return Reservation{}, fmt.Errorf("reserve locker %d: not claimed while %s", p.LockerID, seen.Name())
}

// reservationByID reads a reservation of an organization ($1, $2) wherever it is: live, or
// moved to the history once closed (reservations_all, migration 00037), with the same columns
// either way. The LIMIT inside, on the view alone, stops at the live row: the history is
// probed only for a row not live.
const reservationByID = `
	SELECT r.id, r.organization_id, r.client_id, r.locker_id, r.tower_id, k.location_id,
	       CASE WHEN r.status = 'active' AND r.expires_at <= now() THEN 'expired' ELSE r.status END,
	       r.duration_seconds, r.created_at, r.expires_at, r.ended_at
	FROM (SELECT * FROM reservations_all WHERE id = $1 AND organization_id = $2 LIMIT 1) r
	JOIN lockers k ON k.id = r.locker_id`

// Reservation returns a reservation of the organization, with a lapsed one shown expired. A
// closed one moved to the history answers as it did before the move.
func (s *Store) Reservation(ctx context.Context, orgID int64, id uuid.UUID) (Reservation, error) {
	var r Reservation
	err := s.db.QueryRow(ctx, reservationByID, id, orgID).
		Scan(&r.ID, &r.OrganizationID, &r.ClientID, &r.LockerID, &r.TowerID, &r.LocationID, &r.Status,
			&r.DurationSeconds, &r.CreatedAt, &r.ExpiresAt, &r.EndedAt)
	if err != nil {
		return Reservation{}, fmt.Errorf("get reservation: %w", translate(err))
	}
	return r, nil
}

// CancelReservation cancels an active reservation of the client and frees its locker.
// cancelled is false when it had already been cancelled (a repeated DELETE). A reservation of
// another locker or organization is ErrNotFound; one of another client of the organization,
// or one no longer active, is a *StatusConflictError.
func (s *Store) CancelReservation(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64, id uuid.UUID) (r Reservation, cancelled bool, err error) {
	r, err = s.Reservation(ctx, orgID, id)
	if err != nil {
		return Reservation{}, false, err
	}
	if r.LockerID != lockerID || r.TowerID != strings.ToLower(towerID) {
		return Reservation{}, false, fmt.Errorf("cancel reservation: %w", ErrNotFound)
	}
	if r.ClientID != clientID {
		return Reservation{}, false, &StatusConflictError{Msg: "the reservation belongs to another client"}
	}
	var subOrg *int64
	err = s.atomically(ctx, orgID, func(tx *Store) error {
		err := tx.db.QueryRow(ctx, `
			UPDATE reservations SET status = 'cancelled', ended_at = now()
			WHERE id = $1 AND status = 'active' AND expires_at > now()
			RETURNING ended_at, `+locationSubOrg("reservations.locker_id"), id).Scan(&r.EndedAt, &subOrg)
		if err != nil {
			return translate(err)
		}
		cancelled = true
		if err := tx.releaseReservedLocker(ctx, id); err != nil {
			return err
		}
		r.Status = ReservationCancelled
		_, err = tx.RecordEvent(ctx, Event{OrgID: r.OrganizationID, SubOrgID: subOrg, Type: EventTypeReservationCancelled,
			Data: eventReservation(r)})
		return err
	})
	if errors.Is(err, ErrNotFound) && !cancelled {
		cur, err := s.Reservation(ctx, orgID, id)
		if err != nil {
			return Reservation{}, false, err
		}
		if cur.Status == ReservationCancelled {
			return cur, false, nil
		}
		return Reservation{}, false, &StatusConflictError{Msg: fmt.Sprintf("the reservation is %s", cur.Status)}
	}
	if err != nil {
		return Reservation{}, false, fmt.Errorf("cancel reservation: %w", err)
	}
	return r, true, nil
}

// ExpireReservation marks an active reservation expired and frees its locker if the
// reservation still holds it. It does nothing for a reservation that ended otherwise, and
// returns ErrNotDue if the database clock has not reached the expiry yet.
func (s *Store) ExpireReservation(ctx context.Context, id uuid.UUID) (expired bool, err error) {
	var due bool
	err = s.atomically(ctx, 0, func(tx *Store) error {
		ev, err := scanExpiredReservation(tx.db.QueryRow(ctx, expireReservationsSQL(`id = $1 AND expires_at <= now()`), id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return translate(err)
		}
		due = true
		if err := tx.releaseReservedLocker(ctx, id); err != nil {
			return err
		}
		_, err = tx.RecordEvent(ctx, ev)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("expire reservation: %w", err)
	}
	if !due {
		return false, s.notDueIfActive(ctx, "reservations", id, "expire reservation")
	}
	return true, nil
}

// expireReservationsSQL is the one statement that writes active reservations expired (their
// end is their expiry), those that cond selects besides, returning what
// scanExpiredReservation reads: by its workflow's timer (ExpireReservation) or by the sweep
// of holds lapsed long ago (ReleaseLapsedHolds).
func expireReservationsSQL(cond string) string {
	return `UPDATE reservations SET status = 'expired', ended_at = expires_at
		WHERE status = 'active' AND ` + cond + `
		RETURNING id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, created_at, expires_at,
		          ended_at, ` + locationSubOrg("reservations.locker_id")
}

// scanExpiredReservation reads a row of expireReservationsSQL as its reservation.expired event.
func scanExpiredReservation(row pgx.Row) (Event, error) {
	var r Reservation
	ev := Event{Type: EventTypeReservationExpired}
	err := row.Scan(&r.ID, &r.OrganizationID, &r.ClientID, &r.LockerID, &r.TowerID, &r.Status, &r.DurationSeconds,
		&r.CreatedAt, &r.ExpiresAt, &r.EndedAt, &ev.SubOrgID)
	ev.OrgID, ev.Data = r.OrganizationID, eventReservation(r)
	return ev, err
}

// releaseReservedLocker frees the locker only if this reservation still holds it.
func (s *Store) releaseReservedLocker(ctx context.Context, reservationID uuid.UUID) error {
	_, err := s.db.Exec(ctx, `
		UPDATE lockers SET status = `+availableSQL+`, reservation_id = NULL, hold_expires_at = NULL,
		       possessor_client_id = NULL, possession_since = NULL, updated_at = now()
		WHERE reservation_id = $1 AND status IN (`+endsReservationSQL+`)`, reservationID)
	return translate(err)
}

// ReleaseLapsedHolds writes back reservations and locker holds whose expiry passed more than
// olderThan ago. The generation stays: the next possession bumps it, and until then a late
// drop-off event of the lapsed possession can still apply (DESIGN §4.7). The reservations
// and tokens it expires record reservation.expired and locker_token.expired in the same
// transaction, as their workflows would have.
func (s *Store) ReleaseLapsedHolds(ctx context.Context, olderThan time.Duration) (reservations, lockers int, err error) {
	err = s.atomically(ctx, 0, func(tx *Store) error {
		var events []Event
		rows, err := tx.db.Query(ctx, expireReservationsSQL(`expires_at <= now() - make_interval(secs => $1)`), olderThan.Seconds())
		if err != nil {
			return fmt.Errorf("release lapsed reservations: %w", translate(err))
		}
		events, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) { return scanExpiredReservation(row) })
		if err != nil {
			return fmt.Errorf("release lapsed reservations: %w", translate(err))
		}
		reservations = len(events)
		tag, err := tx.db.Exec(ctx, `
			UPDATE lockers SET status = `+availableSQL+`, reservation_id = NULL, hold_expires_at = NULL, possessor_client_id = NULL,
			       possession_since = NULL, updated_at = now()
			WHERE status IN (`+lapsingSQL+`) AND hold_expires_at <= now() - make_interval(secs => $1)`, olderThan.Seconds())
		if err != nil {
			return fmt.Errorf("release lapsed lockers: %w", translate(err))
		}
		lockers = int(tag.RowsAffected())
		rows, err = tx.db.Query(ctx, `
			UPDATE locker_tokens SET status = 'expired'
			WHERE status = 'active' AND expires_at <= now() - make_interval(secs => $1)
			RETURNING id, organization_id, type, locker_id, tower_id, client_info, created_at, expires_at, `+
			locationSubOrg("locker_tokens.locker_id"), olderThan.Seconds())
		if err != nil {
			return fmt.Errorf("expire lapsed tokens: %w", translate(err))
		}
		tokens, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
			var t EventToken
			var created, expires time.Time
			ev := Event{Type: EventTypeLockerTokenExpired}
			err := row.Scan(&t.ID, &ev.OrgID, &t.Type, &t.LockerID, &t.TowerID, &t.ClientInfo, &created, &expires, &ev.SubOrgID)
			t.CreatedAt, t.ExpiresAt = EventTime(created), EventTime(expires)
			ev.Data = t
			return ev, err
		})
		if err != nil {
			return fmt.Errorf("expire lapsed tokens: %w", translate(err))
		}
		for _, ev := range append(events, tokens...) {
			if _, err := tx.RecordEvent(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return reservations, lockers, nil
}
