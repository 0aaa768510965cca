package gateway

import (
	"context"
	"database/sql"
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
	// Keyed requests (idempotency.go): a row is written before the request runs and gets its
	// answer once it ran; kept for keepIdempotentAnswers.
	`
CREATE TABLE idempotent_requests (
	key          TEXT PRIMARY KEY,
	request_hash BLOB NOT NULL,
	status       INTEGER,
	content_type TEXT,
	body         BLOB,
	created_at   TEXT NOT NULL,
	completed_at TEXT
);
CREATE INDEX idempotent_requests_created_at ON idempotent_requests (created_at);
`,
	// The request a key's record is the intent of, so a request found interrupted after a
	// restart can be settled by reading its door (idempotency.go). Records written before
	// have none and stay unknown.
	`
ALTER TABLE idempotent_requests ADD COLUMN method TEXT;
ALTER TABLE idempotent_requests ADD COLUMN path TEXT;
`,
	// The watch (watch.go): its alerts, numbered for GET /alerts?after=; when a transaction's
	// door was last opened under it; and the pickups whose door is still to be read shut
	// (a released transaction that was opened: item_left).
	`
CREATE TABLE alerts (
	seq            INTEGER PRIMARY KEY AUTOINCREMENT,
	kind           TEXT NOT NULL,
	locker_id      INTEGER,
	bank_id        INTEGER NOT NULL,
	controller_id  TEXT NOT NULL,
	at             TEXT NOT NULL,
	message        TEXT NOT NULL,
	transaction_id TEXT
);
ALTER TABLE transactions ADD COLUMN opened_at TEXT;
CREATE TABLE pickup_checks (
	locker_id      INTEGER PRIMARY KEY,
	transaction_id TEXT NOT NULL,
	released_at    TEXT NOT NULL
);
`,
	// The alert log's identity (GET /alerts's stream): made once with the database, so a
	// gateway started on a new database (replaced, or its file lost) tells the cloud that its
	// seqs started again.
	`
CREATE TABLE alert_stream (id TEXT NOT NULL);
INSERT INTO alert_stream (id) VALUES (lower(hex(randomblob(16))));
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
	// FULL: a commit is on disk before it returns, power cut included. A keyed door open's
	// intent is committed before the lock is pulsed (idempotency.go); under NORMAL a power
	// cut could lose it after the pulse, and the open's repeat would pulse the lock again.
	// The gateway commits a few rows per request, so the fsync each costs is nothing.
	q.Add("_pragma", "synchronous(FULL)")
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

// isBusy reports a lost race for SQLite's write lock or a unique index.
func isBusy(err error) bool { return errors.Is(err, errBusy) }

// formatTime is the one timestamp format of the gateway: RFC 3339, UTC,
// milliseconds. It sorts as text.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t.UTC()
}
