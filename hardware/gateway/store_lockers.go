package gateway

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// lockerState is the mutable part of a locker.
type lockerState struct {
	OutOfService bool
	ReasonCode   *string
	Reason       *string
}

func (s *store) lockerStates(ctx context.Context) (map[int]lockerState, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT locker_id, out_of_service, reason_code, reason FROM locker_state`)
	if err != nil {
		return nil, fmt.Errorf("query locker states: %w", err)
	}
	defer rows.Close()
	out := map[int]lockerState{}
	for rows.Next() {
		var (
			id  int
			st  lockerState
			rc  sql.NullString
			rsn sql.NullString
		)
		if err := rows.Scan(&id, &st.OutOfService, &rc, &rsn); err != nil {
			return nil, fmt.Errorf("scan locker state: %w", err)
		}
		if rc.Valid {
			st.ReasonCode = &rc.String
		}
		if rsn.Valid {
			st.Reason = &rsn.String
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query locker states: %w", err)
	}
	return out, nil
}

func (s *store) setLockerState(ctx context.Context, lockerID int, st lockerState, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `
INSERT INTO locker_state (locker_id, out_of_service, reason_code, reason, updated_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (locker_id) DO UPDATE SET
	out_of_service = excluded.out_of_service,
	reason_code = excluded.reason_code,
	reason = excluded.reason,
	updated_at = excluded.updated_at`,
		lockerID, st.OutOfService, st.ReasonCode, st.Reason, formatTime(now))
	if err != nil {
		return fmt.Errorf("update locker %d state: %w", lockerID, interpretError(err))
	}
	return nil
}
