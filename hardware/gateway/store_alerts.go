package gateway

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// keepAlerts bounds the alerts table; the oldest go first. A reader that fell further behind
// than that (GET /alerts?after=) gets the oldest kept.
var keepAlerts = 10000

// alertRow is a row of the alerts table.
type alertRow struct {
	Seq           int64
	Kind          string
	LockerID      *int
	BankID        int
	ControllerID  string
	At            time.Time
	Message       string
	TransactionID *string
}

// alertChange is what is written with an alert, in its transaction.
type alertChange struct {
	// outOfService takes the alert's locker out of service with this state.
	outOfService *lockerState
	// pickupDone ends the pickup check of the alert's locker.
	pickupDone bool
}

// insertAlert stores an alert, and the change it reports, in one transaction; it returns the
// alert's seq.
func (s *store) insertAlert(ctx context.Context, a alertRow, ch alertChange) (int64, error) {
	var seq int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
INSERT INTO alerts (kind, locker_id, bank_id, controller_id, at, message, transaction_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			a.Kind, a.LockerID, a.BankID, a.ControllerID, formatTime(a.At), a.Message, a.TransactionID)
		if err != nil {
			return fmt.Errorf("insert alert: %w", interpretError(err))
		}
		if seq, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("insert alert: %w", err)
		}
		if ch.outOfService != nil && a.LockerID != nil {
			st := ch.outOfService
			if _, err := tx.ExecContext(ctx, `
INSERT INTO locker_state (locker_id, out_of_service, reason_code, reason, updated_at) VALUES (?, 1, ?, ?, ?)
ON CONFLICT (locker_id) DO UPDATE SET out_of_service = 1, reason_code = excluded.reason_code,
	reason = excluded.reason, updated_at = excluded.updated_at`,
				*a.LockerID, st.ReasonCode, st.Reason, formatTime(a.At)); err != nil {
				return fmt.Errorf("take locker %d out of service: %w", *a.LockerID, interpretError(err))
			}
		}
		if ch.pickupDone && a.LockerID != nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM pickup_checks WHERE locker_id = ?`, *a.LockerID); err != nil {
				return fmt.Errorf("end pickup check: %w", interpretError(err))
			}
		}
		if seq%100 == 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM alerts WHERE seq <= ?`, seq-int64(keepAlerts)); err != nil {
				return fmt.Errorf("prune alerts: %w", interpretError(err))
			}
		}
		return nil
	})
	return seq, err
}

// alertLog is the alert log's identity and the last seq it ever gave (0 before the first).
func (s *store) alertLog(ctx context.Context) (stream string, last int64, err error) {
	err = s.db.QueryRowContext(ctx, `
SELECT (SELECT id FROM alert_stream), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'alerts'), 0)`).Scan(&stream, &last)
	if err != nil {
		return "", 0, fmt.Errorf("read the alert log: %w", err)
	}
	return stream, last, nil
}

// alertsAfter returns up to limit alerts with seq > after, oldest first.
func (s *store) alertsAfter(ctx context.Context, after int64, limit int) ([]alertRow, error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT seq, kind, locker_id, bank_id, controller_id, at, message, transaction_id FROM alerts WHERE seq > ? ORDER BY seq LIMIT ?`,
		after, limit)
	if err != nil {
		return nil, fmt.Errorf("query alerts: %w", err)
	}
	defer rows.Close()
	var out []alertRow
	for rows.Next() {
		var (
			a      alertRow
			locker sql.NullInt64
			at     string
			txID   sql.NullString
		)
		if err := rows.Scan(&a.Seq, &a.Kind, &locker, &a.BankID, &a.ControllerID, &at, &a.Message, &txID); err != nil {
			return nil, fmt.Errorf("scan alert: %w", err)
		}
		if locker.Valid {
			id := int(locker.Int64)
			a.LockerID = &id
		}
		if txID.Valid {
			a.TransactionID = &txID.String
		}
		a.At = parseTime(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query alerts: %w", err)
	}
	return out, nil
}

// markOpened records that a transaction's door was opened under it.
func (s *store) markOpened(ctx context.Context, transactionID string, now time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE transactions SET opened_at = ? WHERE transaction_id = ?`,
		formatTime(now), transactionID); err != nil {
		return fmt.Errorf("mark transaction opened: %w", interpretError(err))
	}
	return nil
}

// pickupCheck is a released transaction whose door is still to be read shut.
type pickupCheck struct {
	LockerID      int
	TransactionID string
	ReleasedAt    time.Time
}

func (s *store) pickupChecks(ctx context.Context) (map[int]pickupCheck, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT locker_id, transaction_id, released_at FROM pickup_checks`)
	if err != nil {
		return nil, fmt.Errorf("query pickup checks: %w", err)
	}
	defer rows.Close()
	out := map[int]pickupCheck{}
	for rows.Next() {
		var (
			p  pickupCheck
			at string
		)
		if err := rows.Scan(&p.LockerID, &p.TransactionID, &at); err != nil {
			return nil, fmt.Errorf("scan pickup check: %w", err)
		}
		p.ReleasedAt = parseTime(at)
		out[p.LockerID] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query pickup checks: %w", err)
	}
	return out, nil
}

// dropPickupCheck drops a locker's pickup check, whichever transaction it is of: the locker
// is being opened by the gateway.
func (s *store) dropPickupCheck(ctx context.Context, lockerID int) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM pickup_checks WHERE locker_id = ?`, lockerID); err != nil {
		return fmt.Errorf("drop pickup check: %w", interpretError(err))
	}
	return nil
}

// pickupArmed reports whether p is still the locker's pickup check (it is read again right
// before it is judged, as an open may have dropped it since the pass read the checks). A failed
// read counts as not armed: the next pass judges it.
func (s *store) pickupArmed(ctx context.Context, p pickupCheck) bool {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pickup_checks WHERE locker_id = ? AND transaction_id = ?`,
		p.LockerID, p.TransactionID).Scan(&n)
	return err == nil && n == 1
}

// endPickupCheck drops a locker's pickup check (its door read shut and empty).
func (s *store) endPickupCheck(ctx context.Context, lockerID int, transactionID string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM pickup_checks WHERE locker_id = ? AND transaction_id = ?`,
		lockerID, transactionID); err != nil {
		return fmt.Errorf("end pickup check: %w", interpretError(err))
	}
	return nil
}
