package store

import (
	"context"
	"fmt"
	"time"
)

// Closed reservations and locker tokens move out of the live tables into their partitioned
// history (migration 00037, decision 0014): reservation_history, locker_token_history and,
// with each token, its use in token_use_history. A row moves once it has been closed for a
// while (closedAt below), in a short transaction that deletes it from the live table and
// inserts it into the history, so it is in exactly one of the two at any time. Readers by id
// read both (reservations_all, locker_tokens_all).

// historyMoveLockTimeout bounds how long a move waits for a lock: past it the batch gives up
// (and the next pass tries again) rather than hold up live traffic. Rows locked by a live
// writer are skipped, not waited for.
const historyMoveLockTimeout = "1s"

// The moves' statements. The candidates are the oldest closed rows (the partial indexes
// reservations_closed and locker_tokens_closed), locked with SKIP LOCKED so that two
// concurrent moves take different rows and a row a live writer holds is left for later.
const (
	// A reservation moves once it is consumed, cancelled or expired, past its expiry, and no
	// locker still names it (lockers.reservation_id).
	moveReservationsSQL = `
		WITH picked AS (
		    SELECT r.id FROM reservations r
		    WHERE r.status <> 'active' AND greatest(r.ended_at, r.expires_at) <= now() - make_interval(secs => $1)
		      AND NOT EXISTS (SELECT 1 FROM lockers k WHERE k.reservation_id = r.id)
		    ORDER BY greatest(r.ended_at, r.expires_at)
		    LIMIT $2
		    FOR UPDATE OF r SKIP LOCKED
		), moved AS (
		    DELETE FROM reservations r USING picked p WHERE r.id = p.id
		    RETURNING r.id, r.organization_id, r.client_id, r.locker_id, r.tower_id, r.status, r.duration_seconds,
		              r.created_at, r.expires_at, r.ended_at
		)
		INSERT INTO reservation_history (id, organization_id, client_id, locker_id, tower_id, status, duration_seconds,
		                                 created_at, expires_at, ended_at, closed_at)
		SELECT id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, created_at, expires_at, ended_at,
		       greatest(ended_at, expires_at)
		FROM moved`

	// A token moves once it is used, expired or revoked, past its expiry, and no open link
	// that is still valid wraps it; its use (token_uses) goes with it, dated as the token.
	moveTokensSQL = `
		WITH picked AS (
		    SELECT t.id, greatest(t.used_at, t.expires_at) AS closed_at FROM locker_tokens t
		    WHERE t.status <> 'active' AND greatest(t.used_at, t.expires_at) <= now() - make_interval(secs => $1)
		      AND NOT EXISTS (SELECT 1 FROM locker_open_requests o WHERE o.token_id = t.id AND o.expires_at > now())
		    ORDER BY greatest(t.used_at, t.expires_at)
		    LIMIT $2
		    FOR UPDATE OF t SKIP LOCKED
		), uses AS (
		    DELETE FROM token_uses u USING picked p WHERE u.token_id = p.id
		    RETURNING u.token_id, u.tower_id, u.boot_epoch, u.used_seq, u.closed_seq, u.item_inside, u.outcome, u.applied_at,
		              p.closed_at
		), used AS (
		    INSERT INTO token_use_history (token_id, tower_id, boot_epoch, used_seq, closed_seq, item_inside, outcome,
		                                   applied_at, closed_at)
		    SELECT token_id, tower_id, boot_epoch, used_seq, closed_seq, item_inside, outcome, applied_at, closed_at FROM uses
		), moved AS (
		    DELETE FROM locker_tokens t USING picked p WHERE t.id = p.id
		    RETURNING t.id, t.organization_id, t.client_id, t.locker_id, t.tower_id, t.type, t.generation, t.client_info,
		              t.status, t.created_at, t.expires_at, t.used_at, p.closed_at
		)
		INSERT INTO locker_token_history (id, organization_id, client_id, locker_id, tower_id, type, generation, client_info,
		                                  status, created_at, expires_at, used_at, closed_at)
		SELECT id, organization_id, client_id, locker_id, tower_id, type, generation, client_info, status, created_at,
		       expires_at, used_at, closed_at
		FROM moved`
)

// MoveClosedReservations moves up to limit reservations closed more than after ago into
// reservation_history, in one short transaction, and returns how many it moved.
func (s *Store) MoveClosedReservations(ctx context.Context, after time.Duration, limit int) (int, error) {
	n, err := s.moveToHistory(ctx, moveReservationsSQL, after, limit)
	if err != nil {
		return 0, fmt.Errorf("move closed reservations: %w", err)
	}
	return n, nil
}

// MoveClosedTokens moves up to limit locker tokens closed more than after ago, with their
// uses, into locker_token_history and token_use_history, in one short transaction, and
// returns how many tokens it moved.
func (s *Store) MoveClosedTokens(ctx context.Context, after time.Duration, limit int) (int, error) {
	n, err := s.moveToHistory(ctx, moveTokensSQL, after, limit)
	if err != nil {
		return 0, fmt.Errorf("move closed tokens: %w", err)
	}
	return n, nil
}

func (s *Store) moveToHistory(ctx context.Context, sql string, after time.Duration, limit int) (int, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SET LOCAL lock_timeout = '`+historyMoveLockTimeout+`'`); err != nil {
			return translate(err)
		}
		tag, err := tx.db.Exec(ctx, sql, after.Seconds(), limit)
		if err != nil {
			return translate(err)
		}
		n = tag.RowsAffected()
		return nil
	})
	return int(n), err
}
