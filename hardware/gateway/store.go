package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// migrations are applied in order; PRAGMA user_version records how many ran.
// Append only: never edit a migration that has shipped.
var migrations = []string{
	`
CREATE TABLE locker_state (
	locker_id      INTEGER PRIMARY KEY,
	out_of_service INTEGER NOT NULL DEFAULT 0 CHECK (out_of_service IN (0, 1)),
	reason_code    TEXT,
	reason         TEXT,
	updated_at     TEXT NOT NULL
);
CREATE TABLE transactions (
	transaction_id     TEXT PRIMARY KEY,
	locker_id          INTEGER NOT NULL,
	locker_type_id     INTEGER,
	bank_type_id       INTEGER,
	require_low_locker INTEGER NOT NULL DEFAULT 0,
	created_at         TEXT NOT NULL,
	released_at        TEXT
);
-- The durable guarantee that a locker is never assigned twice.
CREATE UNIQUE INDEX transactions_one_active_per_locker ON transactions (locker_id) WHERE released_at IS NULL;
CREATE INDEX transactions_created_at ON transactions (created_at);
CREATE TABLE event_log (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	ts      TEXT NOT NULL,
	level   TEXT NOT NULL,
	message TEXT NOT NULL,
	fields  TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE device_heartbeats (
	device_id   TEXT PRIMARY KEY,
	kind        TEXT NOT NULL,
	status      TEXT NOT NULL,
	device_time TEXT,
	received_at TEXT NOT NULL
);
`,
}

// keepLogEntries bounds the event log's operational entries, keepSecurityEntries its
// security entries (fields.category = "security": admin logins, failed ones included); each
// kind is pruned on its own, so a flood of failed logins never pushes out door opens.
var (
	keepLogEntries      = 10000
	keepSecurityEntries = 1000
)

// CategorySecurity marks event-log entries about access to the gateway.
const CategorySecurity = "security"

var (
	errNotFound = errors.New("not found")
	// errBusy means SQLite could not take its write lock in time, or a
	// uniqueness check lost a race.
	errBusy = errors.New("database busy")
)

// store is the gateway's embedded SQLite database.
type store struct {
	db *sql.DB
}

func openStore(ctx context.Context, path string) (*store, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Every transaction takes the write lock up front, so a read-then-insert
	// (locker assignment) cannot interleave with another.
	q.Set("_txlock", "immediate")
	// A URI filename: escape what SQLite would read as URI syntax.
	uriPath := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+uriPath+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	s := &store{db: db}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() error { return s.db.Close() }

func (s *store) ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}

func (s *store) migrate(ctx context.Context) error {
	return s.withTx(ctx, func(tx *sql.Tx) error {
		var version int
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this gateway (%d)", version, len(migrations))
		}
		for i := version; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("apply migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	})
}

// withTx runs fn in a transaction. The rollback runs even when ctx is already
// cancelled.
func (s *store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", interpretError(err))
	}
	return nil
}

// interpretError translates SQLite's lock and uniqueness failures once, here.
func interpretError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CONSTRAINT:
			return fmt.Errorf("%w: %w", errBusy, err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFound
	}
	return err
}

// formatTime is the one timestamp format of the gateway: RFC 3339, UTC,
// milliseconds. It sorts as text.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t.UTC()
}

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
		released = t
		return nil
	})
	return released, err
}

// logEntry is a row of the event log.
type logEntry struct {
	Timestamp time.Time
	Level     string
	Message   string
	Fields    map[string]any
}

func (s *store) appendLog(ctx context.Context, e logEntry) error {
	fields, err := json.Marshal(e.Fields)
	if err != nil || e.Fields == nil {
		fields = []byte("{}")
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO event_log (ts, level, message, fields) VALUES (?, ?, ?, ?)`,
		formatTime(e.Timestamp), e.Level, e.Message, string(fields))
	if err != nil {
		return fmt.Errorf("append log entry: %w", interpretError(err))
	}
	if id, err := res.LastInsertId(); err == nil && id%100 == 0 {
		if _, err := s.db.ExecContext(ctx, `
			DELETE FROM event_log WHERE coalesce(json_extract(fields, '$.category'), '') <> 'security' AND id < (
			    SELECT coalesce(min(id), 0) FROM (SELECT id FROM event_log WHERE coalesce(json_extract(fields, '$.category'), '') <> 'security'
			                                      ORDER BY id DESC LIMIT ?))`, keepLogEntries); err != nil {
			return fmt.Errorf("prune log: %w", interpretError(err))
		}
		if _, err := s.db.ExecContext(ctx, `
			DELETE FROM event_log WHERE json_extract(fields, '$.category') = 'security' AND id < (
			    SELECT coalesce(min(id), 0) FROM (SELECT id FROM event_log WHERE json_extract(fields, '$.category') = 'security'
			                                      ORDER BY id DESC LIMIT ?))`, keepSecurityEntries); err != nil {
			return fmt.Errorf("prune security log: %w", interpretError(err))
		}
	}
	return nil
}

// logs returns up to limit entries, newest first, and whether more matched.
func (s *store) logs(ctx context.Context, limit int) ([]logEntry, bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ts, level, message, fields FROM event_log ORDER BY id DESC LIMIT ?`, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("query logs: %w", err)
	}
	defer rows.Close()
	var out []logEntry
	for rows.Next() {
		var (
			e      logEntry
			ts     string
			fields string
		)
		if err := rows.Scan(&ts, &e.Level, &e.Message, &fields); err != nil {
			return nil, false, fmt.Errorf("scan log entry: %w", err)
		}
		e.Timestamp = parseTime(ts)
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil || e.Fields == nil {
			e.Fields = map[string]any{}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("query logs: %w", err)
	}
	truncated := len(out) > limit
	if truncated {
		out = out[:limit]
	}
	return out, truncated, nil
}

// heartbeat is a device's last report.
type heartbeat struct {
	DeviceID   string
	Kind       string
	Status     string
	DeviceTime *time.Time
}

// recordHeartbeat stores a heartbeat and reports the previous status ("" when
// the device is new), so callers log only changes.
func (s *store) recordHeartbeat(ctx context.Context, hb heartbeat, now time.Time) (previous string, err error) {
	var deviceTime *string
	if hb.DeviceTime != nil {
		t := formatTime(*hb.DeviceTime)
		deviceTime = &t
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT status FROM device_heartbeats WHERE device_id = ?`, hb.DeviceID).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("get heartbeat: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
INSERT INTO device_heartbeats (device_id, kind, status, device_time, received_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, status = excluded.status,
	device_time = excluded.device_time, received_at = excluded.received_at`,
			hb.DeviceID, hb.Kind, hb.Status, deviceTime, formatTime(now))
		if err != nil {
			return fmt.Errorf("store heartbeat: %w", interpretError(err))
		}
		return nil
	})
	return previous, err
}

// isBusy reports a lost race for SQLite's write lock or a unique index.
func isBusy(err error) bool { return errors.Is(err, errBusy) }
