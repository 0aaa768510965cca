package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotFound means the row does not exist (or belongs to another organization, which the
// caller must not be able to tell apart).
var ErrNotFound = errors.New("not found")

// ErrConflict means a uniqueness rule or a state precondition was violated.
var ErrConflict = errors.New("conflict")

// translate maps pgx errors to the package's sentinels. It is the only place that knows
// Postgres error codes.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
	}
	return err
}
