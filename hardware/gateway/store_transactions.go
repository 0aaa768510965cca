package gateway

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// transaction is a row of the transactions table.
type transaction struct {
	ID         string
	LockerID   int
	CreatedAt  time.Time
	ReleasedAt *time.Time
}

const transactionColumns = `transaction_id, locker_id, created_at, released_at`

func scanTransaction(row interface{ Scan(...any) error }) (transaction, error) {
	var (
		t        transaction
		created  string
		released sql.NullString
	)
	if err := row.Scan(&t.ID, &t.LockerID, &created, &released); err != nil {
		return transaction{}, interpretError(err)
	}
	t.CreatedAt = parseTime(created)
	if released.Valid {
		r := parseTime(released.String)
		t.ReleasedAt = &r
	}
	return t, nil
}

func queryTransactions(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) ([]transaction, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query transactions: %w", err)
	}
	defer rows.Close()
	var out []transaction
	for rows.Next() {
		t, err := scanTransaction(rows)
		if err != nil {
			return nil, fmt.Errorf("scan transaction: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query transactions: %w", err)
	}
	return out, nil
}

func (s *store) activeTransactions(ctx context.Context) ([]transaction, error) {
	return queryTransactions(ctx, s.db, `SELECT `+transactionColumns+` FROM transactions
WHERE released_at IS NULL ORDER BY created_at, transaction_id`)
}

func (s *store) recentTransactions(ctx context.Context, limit int) ([]transaction, error) {
	return queryTransactions(ctx, s.db, `SELECT `+transactionColumns+` FROM transactions
ORDER BY created_at DESC, transaction_id DESC LIMIT ?`, limit)
}

// transaction returns a transaction, released or not.
func (s *store) transaction(ctx context.Context, id string) (transaction, error) {
	t, err := scanTransaction(s.db.QueryRowContext(ctx, `SELECT `+transactionColumns+` FROM transactions WHERE transaction_id = ?`, id))
	if err != nil {
		return transaction{}, fmt.Errorf("get transaction: %w", err)
	}
	return t, nil
}

// assignRequest is what a create asks for, already validated.
type assignRequest struct {
	TransactionID    string
	LockerID         *int
	LockerTypeID     *int
	BankTypeID       *int
	RequireLowLocker bool
	// Candidates are the lockers that match the request, in order of
	// preference; the store picks the first that is in service and free.
	Candidates []int
}

var errNoLocker = errors.New("no available locker")

// transactionExistsError carries the transaction a create collided with.
type transactionExistsError struct{ existing transaction }

func (e *transactionExistsError) Error() string {
	return fmt.Sprintf("transaction %q exists", e.existing.ID)
}

// assign creates the transaction on the first free candidate, atomically:
// the whole read-check-insert runs under SQLite's write lock, and the unique
// index on active lockers backs it up.
func (s *store) assign(ctx context.Context, req assignRequest, now time.Time) (transaction, error) {
	var created transaction
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		existing, err := scanTransaction(tx.QueryRowContext(ctx, `SELECT `+transactionColumns+` FROM transactions WHERE transaction_id = ?`, req.TransactionID))
		switch {
		case err == nil:
			return &transactionExistsError{existing: existing}
		case !errors.Is(err, errNotFound):
			return fmt.Errorf("look up transaction: %w", err)
		}

		taken := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `
SELECT locker_id FROM transactions WHERE released_at IS NULL
UNION SELECT locker_id FROM locker_state WHERE out_of_service = 1`)
		if err != nil {
			return fmt.Errorf("query taken lockers: %w", interpretError(err))
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("scan taken locker: %w", err)
			}
			taken[id] = true
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("query taken lockers: %w", err)
		}
		lockerID := 0
		for _, c := range req.Candidates {
			if !taken[c] {
				lockerID = c
				break
			}
		}
		if lockerID == 0 {
			return errNoLocker
		}
		if _, err := tx.ExecContext(ctx, `
INSERT INTO transactions (transaction_id, locker_id, locker_type_id, bank_type_id, require_low_locker, created_at)
VALUES (?, ?, ?, ?, ?, ?)`,
			req.TransactionID, lockerID, req.LockerTypeID, req.BankTypeID, req.RequireLowLocker, formatTime(now)); err != nil {
			return fmt.Errorf("insert transaction: %w", interpretError(err))
		}
		created = transaction{ID: req.TransactionID, LockerID: lockerID, CreatedAt: parseTime(formatTime(now))}
		return nil
	})
	return created, err
}

// release ends an active transaction; errNotFound if there is none by that id.
func (s *store) release(ctx context.Context, id string, now time.Time) (transaction, error) {
	var released transaction
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		t, err := scanTransaction(tx.QueryRowContext(ctx, `SELECT `+transactionColumns+` FROM transactions WHERE transaction_id = ? AND released_at IS NULL`, id))
		if err != nil {
			return fmt.Errorf("get transaction: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE transactions SET released_at = ? WHERE transaction_id = ?`, formatTime(now), id); err != nil {
			return fmt.Errorf("release transaction: %w", interpretError(err))
		}
		// A transaction opened at least once ends in a pickup: its door is to be read shut
		// and empty (the watch's item_left).
		if _, err := tx.ExecContext(ctx, `
INSERT INTO pickup_checks (locker_id, transaction_id, released_at)
SELECT locker_id, transaction_id, ? FROM transactions WHERE transaction_id = ? AND opened_at IS NOT NULL
ON CONFLICT (locker_id) DO UPDATE SET transaction_id = excluded.transaction_id, released_at = excluded.released_at`,
			formatTime(now), id); err != nil {
			return fmt.Errorf("arm pickup check: %w", interpretError(err))
		}
		released = t
		return nil
	})
	return released, err
}
