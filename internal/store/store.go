// Package store is the PostgreSQL layer: one tuned pgxpool whose connection wait is bounded
// (ErrOverloaded past it), migrations embedded in the binary, pgx errors translated once
// into ErrNotFound and ErrConflict, and a WithTx helper. Status changes are conditional
// updates, so two concurrent callers can never both win.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockernet/lockernet/internal/telemetry"
)

// DBTX is what queries run on: the pool or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs the service's queries. Inside WithTx it is bound to the transaction.
type Store struct {
	pool *pgxpool.Pool
	db   DBTX
	// hooked knows which organizations have webhook endpoints (shared by a store and the
	// transactions it opens).
	hooked *hookedOrgs
	// handoff takes the delivery workflows of committed webhook events (shared like hooked);
	// committed, inside WithTx, collects them until the commit.
	handoff   *eventHandoff
	committed *[]OutboxItem
}

// listRows runs a query and collects its rows with scan; what names the list in errors
// ("list <what>: ...").
func listRows[T any](ctx context.Context, s *Store, what string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, translate(err))
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, translate(err))
	}
	return out, nil
}

// scanAll reads the rows a query returned (err is the query's) with scan, appending to out
// (nil or an empty list, as the caller answers when there is no row). Errors name the
// statement as what ("list gateway keys: ...") and a row as item ("scan gateway key: ...").
func scanAll[T any](rows pgx.Rows, err error, what, item string, out []T, scan func(pgx.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", item, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	return out, nil
}

// exec runs a statement; what names it in errors ("<what>: ...").
func (s *Store) exec(ctx context.Context, what, sql string, args ...any) error {
	if _, err := s.db.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", what, translate(err))
	}
	return nil
}

// execOne runs a statement that must change a row: ErrNotFound when it changed none.
func (s *Store) execOne(ctx context.Context, what, sql string, args ...any) error {
	tag, err := s.db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// Options tune the pool; zero values take the defaults.
type Options struct {
	MaxConns int32
	AppName  string
	// AcquireTimeout bounds the wait for a free connection [DefaultAcquireTimeout]; past it
	// the call fails with ErrOverloaded instead of queueing until the caller's deadline.
	AcquireTimeout time.Duration
}

// Open connects a pool to databaseURL. This is the one place the pool is tuned.
func Open(ctx context.Context, databaseURL string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.MaxConns = 20
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MinConns = 2
	cfg.MaxConnLifetime = time.Hour
	cfg.MaxConnLifetimeJitter = 6 * time.Minute
	cfg.MaxConnIdleTime = 10 * time.Minute
	cfg.HealthCheckPeriod = 30 * time.Second
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	if opts.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.AppName
	}
	// Timestamps are compared and returned in UTC; a stuck statement can't hold a connection forever.
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "30000"
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "60000"
	wait := DefaultAcquireTimeout
	if opts.AcquireTimeout > 0 {
		wait = opts.AcquireTimeout
	}
	tracers := []pgx.QueryTracer{acquireLimit{wait: wait}}
	if t := telemetry.PgxTracer(); t != nil {
		tracers = append(tracers, t)
	}
	cfg.ConnConfig.Tracer = multitracer.New(tracers...)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return &Store{pool: pool, db: pool, hooked: &hookedOrgs{}, handoff: &eventHandoff{}}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for the few callers that need it directly (LISTEN, tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// WithTx runs fn in a transaction, committing when fn returns nil. The rollback runs even
// when ctx is already cancelled, so a cancelled request never leaves a transaction open.
func (s *Store) WithTx(ctx context.Context, fn func(tx *Store) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", translate(err))
	}
	defer rollbackWithoutCancel(ctx, tx)
	var committed []OutboxItem
	if err := fn(&Store{pool: s.pool, db: tx, hooked: s.hooked, handoff: s.handoff, committed: &committed}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", translate(err))
	}
	s.handoff.dispatch(committed)
	return nil
}

func rollbackWithoutCancel(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		_ = err // the connection is discarded by pgx when a rollback fails
	}
}
