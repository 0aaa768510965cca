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

// Token types and statuses.
const (
	TokenDropoff = "dropoff"
	TokenPickup  = "pickup"
	TokenRelease = "release"

	TokenActive  = "active"
	TokenUsed    = "used"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// ReleaseGrace is how long a declined locker stays with its possessor before it is free.
const ReleaseGrace = 10 * time.Minute

// LockerToken is a drop-off, pickup or release token.
type LockerToken struct {
	ID         uuid.UUID
	OrgID      int64
	ClientID   string
	LockerID   int64
	TowerID    string
	LocationID int64
	Type       string
	Generation int32
	ClientInfo *string
	Status     string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UsedAt     *time.Time
}

// lockedLocker is a locker row read FOR UPDATE, with its effective status.
type lockedLocker struct {
	ID             int64
	LocationID     int64
	TowerID        string
	Name           string
	Raw            LockerStatus // the stored status
	Status         LockerStatus // with a lapsed hold counted as available
	HoldExpiresAt  *time.Time
	ReservationID  *uuid.UUID
	Possessor      *string
	Since          *time.Time
	Generation     int32
	KeptPossession bool
	Now            time.Time
}

// possessedBy reports whether client holds the locker now (a lapsed hold is no possession).
func (k lockedLocker) possessedBy(client string) bool {
	return k.Status != StatusAvailable && k.Possessor != nil && *k.Possessor == client
}

const lockedSelect = `
	SELECT id, location_id, tower_id, name, status, locker_status(status, hold_expires_at), hold_expires_at,
	       reservation_id, possessor_client_id, possession_since, generation, kept_possession, now()
	FROM lockers`

func scanLocked(row pgx.Row) (lockedLocker, error) {
	var k lockedLocker
	err := row.Scan(&k.ID, &k.LocationID, &k.TowerID, &k.Name, &k.Raw, &k.Status, &k.HoldExpiresAt, &k.ReservationID,
		&k.Possessor, &k.Since, &k.Generation, &k.KeptPossession, &k.Now)
	return k, err
}

// lockLocker reads a locker of the organization FOR UPDATE (orgID 0: any organization, for
// operators), so the transition that follows is decided and written under the row lock.
func (s *Store) lockLocker(ctx context.Context, orgID int64, towerID string, lockerID int64) (lockedLocker, error) {
	q := lockedSelect + ` WHERE id = $1 AND tower_id = $2 AND ($3 = 0 OR organization_id = $3) FOR UPDATE`
	k, err := scanLocked(s.db.QueryRow(ctx, q, lockerID, strings.ToLower(towerID), orgID))
	if err != nil {
		return lockedLocker{}, fmt.Errorf("lock locker: %w", translate(err))
	}
	return k, nil
}

// rules is the locker as lockerrules.Decide sees it, for the client asking.
func (k lockedLocker) rules(client string) lockerrules.Locker {
	return lockerrules.Locker{ID: k.ID, Status: k.Status, Mine: k.possessedBy(client), KeptPossession: k.KeptPossession}
}

// issueActions are the rules' actions of issuing each token type.
var issueActions = map[string]lockerrules.Action{
	TokenDropoff: lockerrules.IssueDropoff,
	TokenPickup:  lockerrules.IssuePickup,
	TokenRelease: lockerrules.IssueRelease,
}

// IssueTokenParams describe a token to issue.
type IssueTokenParams struct {
	ID         uuid.UUID
	OrgID      int64
	ClientID   string
	TowerID    string
	LockerID   int64
	Type       string
	Duration   time.Duration
	ClientInfo *string
}

// IssueResult is a new token and what issuing it changed.
type IssueResult struct {
	Token LockerToken
	// ConsumedReservation is the reservation a drop-off token used up, if any, and
	// ConsumedReservationExpiresAt its expiry (its workflow's input, should the signal that
	// it ended be the first the workflow hears).
	ConsumedReservation          *uuid.UUID
	ConsumedReservationExpiresAt time.Time
	From, To                     LockerStatus
}

// IssueToken applies the token transitions of DESIGN §4.1 under the locker's row lock and
// records the token. Call it inside WithTx. A drop-off token needs the locker available,
// reserved by the caller, or rented, declined or occupied by the caller; a pickup token an
// occupied locker of the caller; a release token a declined locker of the caller. Anything
// else is a *StatusConflictError naming the current status.
func (s *Store) IssueToken(ctx context.Context, p IssueTokenParams) (IssueResult, error) {
	k, err := s.lockLocker(ctx, p.OrgID, p.TowerID, p.LockerID)
	if err != nil {
		return IssueResult{}, err
	}
	action, ok := issueActions[p.Type]
	if !ok {
		return IssueResult{}, fmt.Errorf("issue token: unknown type %q", p.Type)
	}
	d, err := lockerrules.Decide(k.rules(p.ClientID), action)
	if err != nil {
		return IssueResult{}, err
	}
	res := IssueResult{From: d.From, To: d.To}
	generation := k.Generation
	if d.NewGeneration {
		// A new possession: its generation makes every earlier customer's token stale.
		generation++
	}
	if d.EndsReservation {
		res.ConsumedReservation = k.ReservationID
		if k.HoldExpiresAt != nil {
			res.ConsumedReservationExpiresAt = *k.HoldExpiresAt
		}
	}

	now := time.Now().UTC()
	t := LockerToken{ID: p.ID, OrgID: p.OrgID, ClientID: p.ClientID, LockerID: k.ID, TowerID: k.TowerID,
		LocationID: k.LocationID, Type: p.Type, Generation: generation, ClientInfo: p.ClientInfo, Status: TokenActive,
		// Expiry on a whole second: the token payload carries unix seconds.
		CreatedAt: now.Truncate(time.Microsecond), ExpiresAt: now.Truncate(time.Second).Add(p.Duration)}
	res.Token = t
	// A drop-off token of a locker not yet occupied rents it (again): the hold follows the
	// latest drop-off token.
	rents := d.To == StatusRented

	// The writes go out in one pipelined batch: one round trip for the token, the consumed
	// reservation and the locker.
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO locker_tokens (id, organization_id, client_id, locker_id, tower_id, type, generation, client_info, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10)`,
		t.ID, t.OrgID, t.ClientID, t.LockerID, t.TowerID, t.Type, t.Generation, t.ClientInfo, t.CreatedAt, t.ExpiresAt)
	if res.ConsumedReservation != nil {
		b.Queue(`UPDATE reservations SET status = 'consumed', ended_at = now() WHERE id = $1 AND status = 'active'`, *res.ConsumedReservation)
	}
	if rents {
		// Rented: the possession lasts until the last drop-off token of this generation expires.
		b.Queue(`
			UPDATE lockers SET status = $6, generation = $2, reservation_id = NULL,
			       possessor_client_id = $3,
			       possession_since = CASE WHEN $4 THEN now() ELSE coalesce(possession_since, now()) END,
			       hold_expires_at = (SELECT max(expires_at) FROM locker_tokens
			                          WHERE locker_id = $1 AND generation = $2 AND type = 'dropoff' AND status <> 'revoked'),
			       updated_at = now()
			WHERE id = $1 AND status = $5`,
			k.ID, generation, p.ClientID, k.Status == StatusAvailable, k.Raw, d.To)
	}
	// A new possession moves the generation: the tower's command log gets the floor in the
	// same round trip, after the locker's row lock (commands.go).
	bumped := generation != k.Generation
	if bumped {
		b.Queue(appendCommandsSQL, commandArgs(k.TowerID, []newCommand{floorCommand(k.ID, generation)})...)
	}
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return IssueResult{}, fmt.Errorf("insert token: %w", translate(err))
	}
	if res.ConsumedReservation != nil {
		if _, err := br.Exec(); err != nil {
			return IssueResult{}, fmt.Errorf("consume reservation: %w", translate(err))
		}
	}
	if rents {
		tag, err := br.Exec()
		if err != nil {
			return IssueResult{}, fmt.Errorf("rent locker: %w", translate(err))
		}
		if tag.RowsAffected() != 1 {
			return IssueResult{}, fmt.Errorf("rent locker %d: the row changed under its lock", k.ID)
		}
	}
	if bumped {
		if _, err := br.Exec(); err != nil {
			return IssueResult{}, fmt.Errorf("append tower command: %w", translate(err))
		}
	}
	return res, nil
}

// ReleaseLocker gives a rented locker back before using it (rented → declined): the caller
// keeps it for the release grace, during which a drop-off or release token moves it on.
// It records the locker.released event in the same transaction.
func (s *Store) ReleaseLocker(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64) error {
	return s.atomically(ctx, orgID, func(tx *Store) error {
		k, err := tx.lockLocker(ctx, orgID, towerID, lockerID)
		if err != nil {
			return err
		}
		d, err := lockerrules.Decide(k.rules(clientID), lockerrules.Release)
		if err != nil {
			return err
		}
		var org int64
		locker, subOrg, err := scanEventLocker(tx.db.QueryRow(ctx, `
			UPDATE lockers k SET status = $3, hold_expires_at = now() + make_interval(secs => $2), updated_at = now()
			FROM locker_types lt, locations l
			WHERE k.id = $1 AND k.status = $4 AND lt.id = k.locker_type_id AND l.id = k.location_id
			RETURNING `+eventLockerColumns+`, k.organization_id`, k.ID, ReleaseGrace.Seconds(), d.To, d.From), &org)
		if err != nil {
			return fmt.Errorf("release locker: %w", translate(err))
		}
		if _, err := tx.RecordEvent(ctx, Event{OrgID: org, SubOrgID: subOrg, Type: EventTypeLockerReleased, Data: locker}); err != nil {
			return fmt.Errorf("release locker: %w", err)
		}
		return nil
	})
}

// ExpireToken marks an active token expired once its time has come (ErrNotDue before) and
// writes back the end of a rental whose last drop-off token this was. It does nothing to a
// token that was used or revoked.
func (s *Store) ExpireToken(ctx context.Context, id uuid.UUID) (expired bool, err error) {
	err = s.atomically(ctx, 0, func(tx *Store) error {
		var t LockerToken
		var subOrg *int64
		err := tx.db.QueryRow(ctx, `
			UPDATE locker_tokens SET status = 'expired'
			WHERE id = $1 AND status = 'active' AND expires_at <= now()
			RETURNING id, organization_id, locker_id, tower_id, type, generation, client_info, created_at, expires_at, `+
			locationSubOrg("locker_tokens.locker_id"), id).
			Scan(&t.ID, &t.OrgID, &t.LockerID, &t.TowerID, &t.Type, &t.Generation, &t.ClientInfo, &t.CreatedAt, &t.ExpiresAt, &subOrg)
		if err != nil {
			return err
		}
		// The possession ends when its hold has lapsed (its last drop-off token expired).
		_, err = tx.db.Exec(ctx, `
			UPDATE lockers SET status = `+availableSQL+`, possessor_client_id = NULL, possession_since = NULL,
			       hold_expires_at = NULL, reservation_id = NULL, updated_at = now()
			WHERE id = $1 AND generation = $2 AND status IN (`+rentalSQL+`) AND hold_expires_at <= now()`, t.LockerID, t.Generation)
		if err != nil {
			return fmt.Errorf("end lapsed rental: %w", translate(err))
		}
		_, err = tx.RecordEvent(ctx, Event{OrgID: t.OrgID, SubOrgID: subOrg, Type: EventTypeLockerTokenExpired, Data: EventToken{
			ID: t.ID, Type: t.Type, LockerID: t.LockerID, TowerID: t.TowerID, ClientInfo: t.ClientInfo,
			CreatedAt: EventTime(t.CreatedAt), ExpiresAt: EventTime(t.ExpiresAt)}})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, s.notDueIfActive(ctx, "locker_tokens", id, "expire token")
	}
	if err != nil {
		return false, fmt.Errorf("expire token: %w", translate(err))
	}
	return true, nil
}

// revokeActiveTokens revokes the locker's active tokens (their possession ended) and returns
// their ids, so their workflows can be told.
func (s *Store) revokeActiveTokens(ctx context.Context, lockerID int64) ([]uuid.UUID, error) {
	rows, err := s.db.Query(ctx, `UPDATE locker_tokens SET status = 'revoked' WHERE locker_id = $1 AND status = 'active' RETURNING id`, lockerID)
	if err != nil {
		return nil, fmt.Errorf("revoke tokens: %w", translate(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("revoke tokens: %w", translate(err))
	}
	return ids, nil
}

// Token returns a token of the organization (orgID 0: of any organization, for operators),
// live or moved to the history once closed (locker_tokens_all, migration 00037): it answers
// the same either way. The LIMIT inside, on the view alone, stops at the live row: the
// history is probed only for a token not live.
func (s *Store) Token(ctx context.Context, orgID int64, id uuid.UUID) (LockerToken, error) {
	var t LockerToken
	err := s.db.QueryRow(ctx, `
		SELECT t.id, t.organization_id, t.client_id, t.locker_id, t.tower_id, k.location_id, t.type, t.generation,
		       t.client_info, t.status, t.created_at, t.expires_at, t.used_at
		FROM (SELECT * FROM locker_tokens_all WHERE id = $1 AND ($2 = 0 OR organization_id = $2) LIMIT 1) t
		JOIN lockers k ON k.id = t.locker_id`, id, orgID).
		Scan(&t.ID, &t.OrgID, &t.ClientID, &t.LockerID, &t.TowerID, &t.LocationID, &t.Type, &t.Generation,
			&t.ClientInfo, &t.Status, &t.CreatedAt, &t.ExpiresAt, &t.UsedAt)
	if err != nil {
		return LockerToken{}, fmt.Errorf("get token: %w", translate(err))
	}
	return t, nil
}
