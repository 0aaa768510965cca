package store

import (
	"context"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// WithDB returns a copy of s that runs its queries on db, so a test can see the SQL a
// method sends (e.g. to EXPLAIN it) without a second copy of the query text.
func WithDB(s *Store, db DBTX) *Store { return &Store{pool: s.pool, db: db, hooked: s.hooked} }

// Translate exposes translate to the tests.
func Translate(err error) error { return translate(err) }

// MigrateTo moves s's schema to version, up or down.
func MigrateTo(ctx context.Context, s *Store, version int64) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if version < current {
		_, err = p.DownTo(ctx, version)
	} else {
		_, err = p.UpTo(ctx, version)
	}
	return err
}
