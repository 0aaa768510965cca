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

// ErrInvalidInput means Postgres refused a value as text it cannot store (a NUL character,
// bytes that are not UTF-8): the caller's input, never a server fault.
var ErrInvalidInput = errors.New("invalid input: text with a NUL character or bytes that are not UTF-8")

// ErrOverloaded means Postgres turned the work away for want of capacity (too many
// connections, the server starting or shutting down): the caller should answer 503 with
// Retry-After, never 500 (DESIGN §8).
var ErrOverloaded = errors.New("database overloaded")

// overloadCodes are the SQLSTATEs of a Postgres that has no room for us right now:
// too_many_connections, configuration_limit_exceeded, cannot_connect_now.
var overloadCodes = map[string]bool{"53300": true, "53400": true, "57P03": true}

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
	// 22021 character_not_in_repertoire (a NUL or non-UTF-8 byte in text), 22P05
	// untranslatable_character (\u0000 in jsonb).
	if errors.As(err, &pgErr) && overloadCodes[pgErr.Code] {
		return fmt.Errorf("%w (%s)", ErrOverloaded, pgErr.Code)
	}
	if errors.As(err, &pgErr) && (pgErr.Code == "22021" || pgErr.Code == "22P05") {
		return fmt.Errorf("%w (%s)", ErrInvalidInput, pgErr.Code)
	}
	return err
}
