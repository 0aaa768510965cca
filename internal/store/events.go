package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// Tower event kinds.
const (
	EventTokenUsed    = "token_used"
	EventDoorOpened   = "door_opened"
	EventDoorClosed   = "door_closed"
	EventSyncCommands = "sync_commands"
)

// TowerEvent is one verified event of a tower.
type TowerEvent struct {
	BootEpoch  int64
	Seq        int64
	Kind       string
	At         time.Time // tower clock
	LockerID   int64     // 0 for sync_commands
	TokenID    *uuid.UUID
	Generation int32
	ItemInside bool
	Command    int64 // sync_commands: the last command number the tower applied
}

// Outcomes of a token use.
const (
	UseOccupied         = "occupied"          // drop-off with the item inside: the locker is occupied
	UseItemAdded        = "item_added"        // drop-off into an occupied locker
	UseConsumed         = "consumed"          // door closed without changing the status
	UsePickedUp         = "picked_up"         // pickup closed empty: the locker is free
	UsePickupIncomplete = "pickup_incomplete" // pickup closed with the item still inside
	UseReleased         = "released"          // release token closed empty: the possession ends
	UseAnomaly          = "anomaly"           // stale generation, unknown token, use after expiry
)

// TokenUse is the applied use of one token.
type TokenUse struct {
	TokenID  uuid.UUID
	LockerID int64
	Outcome  string
	Detail   string
	floor    int32 // the locker's new generation when the use ended its possession
	// closedAt is the token's closed_at when it had been moved to the history (migration
	// 00037): its use is recorded there too, in its token's month.
	closedAt *time.Time
	// Window is the pickup window the use opened (a drop-off that made the locker occupied)
	// or closed (a pickup that freed it), nil if none: its workflow is started or told.
	Window *PickupWindow
}

// ApplyResult reports what an upload of events did.
type ApplyResult struct {
	Accepted   int
	Duplicates int
	Uses       []TokenUse
	// Revoked are tokens whose possession ended with a pickup or release.
	Revoked []uuid.UUID
	// Commands is how many commands the upload appended to the tower's log (generation
	// floors of ended possessions, the acknowledgement of the stored events).
	Commands int
}

// clockSkew is how far a tower's clock may run ahead of the cloud's before a use is late.
const clockSkew = 30 * time.Second

// ApplyTowerEvents stores a tower's verified events and applies each token use whose
// token_used and door_closed events have both arrived, once (DESIGN §4.7). Replays change
// nothing; events of a use may arrive in separate or out-of-order batches. In the same
// transaction it appends to the tower's command log the generation floors of the
// possessions the uses ended and the acknowledgement of the events now stored, and records
// the commands a sync_commands event reports applied (DESIGN §4.8). Call it inside WithTx.
func (s *Store) ApplyTowerEvents(ctx context.Context, towerID string, events []TowerEvent) (ApplyResult, error) {
	towerID = strings.ToLower(towerID)
	// Uploads of one tower take turns: the pairing below reads the events earlier uploads
	// stored, so two concurrent uploads that each carry one half of a use must not both miss
	// the other's half. (NO KEY UPDATE leaves other writers' foreign-key checks unblocked.)
	if _, err := s.db.Exec(ctx, `SELECT 1 FROM towers WHERE id = $1 FOR NO KEY UPDATE`, towerID); err != nil {
		return ApplyResult{}, fmt.Errorf("lock tower: %w", translate(err))
	}
	var res ApplyResult
	var fresh []TowerEvent
	for _, e := range events {
		tag, err := s.db.Exec(ctx, `
			INSERT INTO tower_events (tower_id, boot_epoch, seq, kind, tower_time, locker_id, token_id, generation, item_inside, command_number)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
			towerID, e.BootEpoch, e.Seq, e.Kind, e.At, e.LockerID, e.TokenID, e.Generation, e.ItemInside, nullIfZero(e.Command))
		if err != nil {
			return ApplyResult{}, fmt.Errorf("store tower event: %w", translate(err))
		}
		if tag.RowsAffected() == 0 {
			res.Duplicates++
			continue
		}
		res.Accepted++
		fresh = append(fresh, e)
	}

	// Find the uses the fresh events complete: a token_used and the first door_closed of the
	// same locker after it, in the same boot epoch, once every event between the two has
	// arrived (a missing one could be the use's own door_closed; out-of-order batches must not
	// pair it with a later one). Only windows a fresh event falls in are looked at, so a
	// replay never applies anything twice.
	type pair struct {
		tokenID         uuid.UUID
		epoch           int64
		usedSeq, closed int64
		usedAt          time.Time
		lockerID        int64
		generation      int32
		itemInside      bool
	}
	var ordered []pair
	if len(fresh) > 0 {
		epochs, seqs := make([]int64, len(fresh)), make([]int64, len(fresh))
		for i, e := range fresh {
			epochs[i], seqs[i] = e.BootEpoch, e.Seq
		}
		rows, err := s.db.Query(ctx, `
			WITH f (epoch, seq) AS (SELECT * FROM unnest($2::bigint[], $3::bigint[]))
			SELECT u.token_id, u.boot_epoch, u.seq, c.seq, u.tower_time, u.locker_id, u.generation, c.item_inside
			FROM tower_events u
			CROSS JOIN LATERAL (
			    SELECT c.seq, c.item_inside FROM tower_events c
			    WHERE c.tower_id = u.tower_id AND c.boot_epoch = u.boot_epoch AND c.locker_id = u.locker_id
			      AND c.kind = 'door_closed' AND c.seq > u.seq
			    ORDER BY c.seq LIMIT 1) c
			WHERE u.tower_id = $1 AND u.kind = 'token_used' AND u.token_id IS NOT NULL
			  AND u.boot_epoch IN (SELECT epoch FROM f) AND u.seq <= (SELECT max(seq) FROM f WHERE f.epoch = u.boot_epoch)
			  AND NOT EXISTS (SELECT 1 FROM token_uses x WHERE x.token_id = u.token_id)
			  AND NOT EXISTS (SELECT 1 FROM token_use_history x WHERE x.token_id = u.token_id)
			  AND EXISTS (SELECT 1 FROM f WHERE f.epoch = u.boot_epoch AND f.seq BETWEEN u.seq AND c.seq)
			  AND (SELECT count(*) FROM tower_events g
			       WHERE g.tower_id = u.tower_id AND g.boot_epoch = u.boot_epoch AND g.seq > u.seq AND g.seq < c.seq) = c.seq - u.seq - 1
			ORDER BY u.boot_epoch, u.seq`, towerID, epochs, seqs)
		if err != nil {
			return ApplyResult{}, fmt.Errorf("pair tower events: %w", translate(err))
		}
		ordered, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (pair, error) {
			var p pair
			return p, r.Scan(&p.tokenID, &p.epoch, &p.usedSeq, &p.closed, &p.usedAt, &p.lockerID, &p.generation, &p.itemInside)
		})
		if err != nil {
			return ApplyResult{}, fmt.Errorf("pair tower events: %w", translate(err))
		}
	}
	var cmds []newCommand
	for _, p := range ordered {
		use, revoked, applied, err := s.applyUse(ctx, towerID, p.tokenID, p.lockerID, p.generation, p.usedAt, p.itemInside)
		if err != nil {
			return ApplyResult{}, err
		}
		if !applied {
			continue
		}
		if use.floor != 0 {
			cmds = append(cmds, floorCommand(use.LockerID, use.floor))
		}
		// The use is recorded where its token is: live, or in the history with its token's
		// closed_at (the token's row lock, taken by applyUse, keeps it there until commit).
		if use.closedAt != nil {
			_, err = s.db.Exec(ctx, `
				INSERT INTO token_use_history (token_id, tower_id, boot_epoch, used_seq, closed_seq, item_inside, outcome, closed_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
				ON CONFLICT DO NOTHING`, p.tokenID, towerID, p.epoch, p.usedSeq, p.closed, p.itemInside, use.Outcome, *use.closedAt)
		} else {
			_, err = s.db.Exec(ctx, `
				INSERT INTO token_uses (token_id, tower_id, boot_epoch, used_seq, closed_seq, item_inside, outcome)
				SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM locker_tokens WHERE id = $1)
				ON CONFLICT DO NOTHING`, p.tokenID, towerID, p.epoch, p.usedSeq, p.closed, p.itemInside, use.Outcome)
		}
		if err != nil {
			return ApplyResult{}, fmt.Errorf("record token use: %w", translate(err))
		}
		use.closedAt = nil // where the token is stays inside the store
		res.Uses = append(res.Uses, use)
		res.Revoked = append(res.Revoked, revoked...)
	}

	// The command log last: its head row is locked after every locker row (commands.go).
	epochs := map[int64]bool{}
	var applied int64
	for _, e := range fresh {
		epochs[e.BootEpoch] = true
		if e.Kind == EventSyncCommands {
			applied = max(applied, e.Command)
		}
	}
	for _, epoch := range slices.Sorted(maps.Keys(epochs)) {
		ack, err := s.ackStoredEvents(ctx, towerID, epoch)
		if err != nil {
			return ApplyResult{}, err
		}
		if ack != nil {
			cmds = append(cmds, *ack)
		}
	}
	if err := s.appendCommands(ctx, towerID, cmds); err != nil {
		return ApplyResult{}, err
	}
	res.Commands = len(cmds)
	if applied > 0 {
		if err := s.recordCommandsApplied(ctx, towerID, applied); err != nil {
			return ApplyResult{}, err
		}
	}
	return res, nil
}

func nullIfZero(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// applyUse applies one token use under the locker's row lock. applied is false when this
// token's use was applied before (a replay reached it through another event).
func (s *Store) applyUse(ctx context.Context, towerID string, tokenID uuid.UUID, lockerID int64, generation int32,
	usedAt time.Time, itemInside bool) (use TokenUse, revoked []uuid.UUID, applied bool, err error) {
	use = TokenUse{TokenID: tokenID, LockerID: lockerID}
	var done bool
	if err := s.db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM token_uses WHERE token_id = $1) OR EXISTS (SELECT 1 FROM token_use_history WHERE token_id = $1)`,
		tokenID).Scan(&done); err != nil {
		return use, nil, false, fmt.Errorf("check token use: %w", translate(err))
	}
	if done {
		return use, nil, false, nil
	}
	k, err := scanLocked(s.db.QueryRow(ctx, lockedSelect+` WHERE id = $1 AND tower_id = $2 FOR UPDATE`, lockerID, towerID))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.anomaly(ctx, towerID, use, "unknown_locker", fmt.Sprintf("tower reported locker %d, which it does not have", lockerID))
	}
	if err != nil {
		return use, nil, false, fmt.Errorf("lock locker: %w", translate(err))
	}
	// The token, live or, closed long enough ago, moved to the history (migration 00037): a
	// late event of a moved token is applied as it would be to the live row. The row lock
	// keeps the token where it is found until this transaction ends; a move that took the
	// live row first has committed it to the history by the time the second read runs.
	var t LockerToken
	const tokenColumns = `organization_id, client_id, type, generation, client_info, status, created_at, expires_at`
	scanToken := func(row pgx.Row, extra ...any) error {
		return row.Scan(append([]any{&t.OrgID, &t.ClientID, &t.Type, &t.Generation, &t.ClientInfo, &t.Status, &t.CreatedAt,
			&t.ExpiresAt}, extra...)...)
	}
	err = scanToken(s.db.QueryRow(ctx, `SELECT `+tokenColumns+`
		FROM locker_tokens WHERE id = $1 AND locker_id = $2 AND tower_id = $3 FOR UPDATE`, tokenID, lockerID, towerID))
	if errors.Is(err, pgx.ErrNoRows) {
		var closedAt time.Time
		err = scanToken(s.db.QueryRow(ctx, `SELECT `+tokenColumns+`, closed_at
			FROM locker_token_history WHERE id = $1 AND locker_id = $2 AND tower_id = $3 FOR UPDATE`, tokenID, lockerID, towerID), &closedAt)
		if err == nil {
			use.closedAt = &closedAt
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return s.anomaly(ctx, towerID, use, "unknown_token", "the tower accepted a token the cloud did not issue for this locker")
	}
	if err != nil {
		return use, nil, false, fmt.Errorf("load token: %w", translate(err))
	}
	t.ID, t.LockerID, t.TowerID = tokenID, lockerID, towerID
	markUsed := `UPDATE locker_tokens SET status = 'used', used_at = $2 WHERE id = $1 AND status <> 'used'`
	if use.closedAt != nil {
		// closed_at, the partition key, stays: the row keeps its month.
		markUsed = `UPDATE locker_token_history SET status = 'used', used_at = $2 WHERE id = $1 AND status <> 'used'`
	}
	if _, err := s.db.Exec(ctx, markUsed, tokenID, usedAt); err != nil {
		return use, nil, false, fmt.Errorf("mark token used: %w", translate(err))
	}
	switch {
	case t.Generation != k.Generation:
		return s.anomaly(ctx, towerID, use, "stale_generation",
			fmt.Sprintf("token of generation %d used on locker %d, which is at generation %d", t.Generation, k.ID, k.Generation))
	case usedAt.After(t.ExpiresAt.Add(clockSkew)):
		return s.anomaly(ctx, towerID, use, "used_after_expiry",
			fmt.Sprintf("token expired at %s was used at %s by the tower's clock", t.ExpiresAt.Format(time.RFC3339), usedAt.Format(time.RFC3339)))
	}

	use.Outcome = UseConsumed
	action, ok := useAction(t.Type, itemInside)
	if !ok {
		return use, revoked, true, nil // the door closed as it was: nothing moved
	}
	d, err := lockerrules.Decide(k.rules(t.ClientID), action)
	var refused *StatusConflictError
	if errors.As(err, &refused) {
		return s.anomaly(ctx, towerID, use, "unexpected_status", refused.Msg)
	}
	if err != nil {
		return use, nil, false, fmt.Errorf("apply token use: %w", err)
	}
	switch {
	case action == lockerrules.UseDropoff && d.Unchanged():
		use.Outcome = UseItemAdded
	case action == lockerrules.UseDropoff:
		_, err = s.db.Exec(ctx, `
			UPDATE lockers SET status = $4, possessor_client_id = $2, possession_since = coalesce(possession_since, $3),
			       hold_expires_at = NULL, reservation_id = NULL, updated_at = now()
			WHERE id = $1`, k.ID, t.ClientID, t.CreatedAt, d.To)
		if err != nil {
			return use, nil, false, fmt.Errorf("occupy locker: %w", translate(err))
		}
		use.Outcome = UseOccupied
		if err := s.recordTransaction(ctx, k, t, "dropoff", usedAt); err != nil {
			return use, nil, false, err
		}
		if use.Window, err = s.openPickupWindow(ctx, k, t, usedAt); err != nil {
			return use, nil, false, err
		}
	case action == lockerrules.UsePickupItemLeft:
		use.Outcome = UsePickupIncomplete
	case d.EndsPossession:
		if revoked, use.floor, err = s.endPossession(ctx, k.ID); err != nil {
			return use, nil, false, err
		}
		use.Outcome = UseReleased
		if action == lockerrules.UsePickup {
			use.Outcome = UsePickedUp
			if err := s.recordTransaction(ctx, k, t, "pickup", usedAt); err != nil {
				return use, nil, false, err
			}
			if use.Window, err = s.closePickupWindow(ctx, k, t.ID, usedAt); err != nil {
				return use, nil, false, err
			}
		}
	}
	return use, revoked, true, nil
}

// endPossession frees the locker after a pickup or release: the tower bumps its generation
// on such a use, and so does the cloud. It returns the new generation, the floor every
// tower learns with its next sync (the tower that saw the use has it already).
func (s *Store) endPossession(ctx context.Context, lockerID int64) ([]uuid.UUID, int32, error) {
	var gen int32
	err := s.db.QueryRow(ctx, `
		UPDATE lockers SET status = `+availableSQL+`, generation = generation + 1, possessor_client_id = NULL, possession_since = NULL,
		       hold_expires_at = NULL, reservation_id = NULL, kept_possession = false, updated_at = now()
		WHERE id = $1 RETURNING generation`, lockerID).Scan(&gen)
	if err != nil {
		return nil, 0, fmt.Errorf("end possession: %w", translate(err))
	}
	revoked, err := s.revokeActiveTokens(ctx, lockerID)
	return revoked, gen, err
}

// useAction is the rules' action of a token use by how the door closed; ok is false when
// the use moves nothing whatever the locker's status (a drop-off or release token whose door
// closed as it was).
func useAction(tokenType string, itemInside bool) (a lockerrules.Action, ok bool) {
	switch {
	case tokenType == TokenDropoff && itemInside:
		return lockerrules.UseDropoff, true
	case tokenType == TokenPickup && itemInside:
		return lockerrules.UsePickupItemLeft, true
	case tokenType == TokenPickup:
		return lockerrules.UsePickup, true
	case tokenType == TokenRelease && !itemInside:
		return lockerrules.UseRelease, true
	}
	return 0, false
}

func (s *Store) anomaly(ctx context.Context, towerID string, use TokenUse, kind, detail string) (TokenUse, []uuid.UUID, bool, error) {
	use.Outcome, use.Detail = UseAnomaly, kind+": "+detail
	_, err := s.db.Exec(ctx, `INSERT INTO tower_anomalies (tower_id, locker_id, token_id, kind, detail) VALUES ($1, $2, $3, $4, $5)`,
		towerID, use.LockerID, use.TokenID, kind, detail)
	if err != nil {
		return use, nil, false, fmt.Errorf("record anomaly: %w", translate(err))
	}
	return use, nil, true, nil
}

// recordTransaction writes the organization's transaction row for a drop-off or pickup and,
// in the same statement, reads the locker as the API shows it now for the event that
// reports it (locker.dropoff_completed, locker.pickup_completed), recorded next.
func (s *Store) recordTransaction(ctx context.Context, k lockedLocker, t LockerToken, typ string, at time.Time) error {
	locker, subOrg, err := scanEventLocker(s.db.QueryRow(ctx, `
		WITH ins AS (
		    INSERT INTO transactions (id, organization_id, sub_organization_id, type, status, order_reference,
		                              location_id, location_name, city, pin_code, tower_id, tower_name,
		                              locker_id, locker_number, client_id, client_info, token_id, created_at, completed_at)
		    SELECT $1, $2, l.sub_organization_id, $3, 'completed', $4, l.id, l.name, l.city, l.zip, tw.id, tw.name,
		           $5, $6, $7, $4, $8, $9, $10
		    FROM locations l JOIN towers tw ON tw.location_id = l.id
		    WHERE l.id = $11 AND tw.id = $12
		)
		SELECT `+eventLockerColumns+`
		FROM lockers k JOIN locker_types lt ON lt.id = k.locker_type_id JOIN locations l ON l.id = k.location_id
		WHERE k.id = $5`,
		uuid.New(), t.OrgID, typ, t.ClientInfo, k.ID, k.Name, t.ClientID, t.ID, t.CreatedAt, at, k.LocationID, k.TowerID))
	if err != nil {
		return fmt.Errorf("record transaction: %w", translate(err))
	}
	evType := EventTypeLockerDropoffCompleted
	if typ == TokenPickup {
		evType = EventTypeLockerPickupCompleted
	}
	_, err = s.RecordEvent(ctx, Event{OrgID: t.OrgID, SubOrgID: subOrg, Type: evType,
		Data: EventTokenUse{Locker: locker, TokenID: t.ID, ClientInfo: t.ClientInfo, CompletedAt: EventTime(at)}})
	return err
}
