package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// ErrNotFound means the row does not exist (or belongs to another organization, which the
// caller must not be able to tell apart).
var ErrNotFound = errors.New("not found")

// ErrConflict means a uniqueness rule or a state precondition was violated. It is the
// sentinel the locker rules refuse with, so a refusal of lockerrules.Decide matches it.
var ErrConflict = lockerrules.ErrConflict

// ErrInvalidInput means Postgres refused a value as text it cannot store (a NUL character,
// bytes that are not UTF-8): the caller's input, never a server fault.
var ErrInvalidInput = errors.New("invalid input: text with a NUL character or bytes that are not UTF-8")

// ErrOverloaded means Postgres cannot take the work now: it turned it away for want of
// capacity (too many connections, no pool connection free within the acquire timeout), or
// it is unreachable, starting or shutting down (a restart, a failover). The caller should
// answer 503 with Retry-After, never 500 (DESIGN §8).
var ErrOverloaded = errors.New("database overloaded or unavailable")

// unavailableCodes are the SQLSTATEs of a Postgres that has no room for us right now or is
// going away: too_many_connections, configuration_limit_exceeded, admin_shutdown,
// crash_shutdown, cannot_connect_now; and the whole class 08, connection_exception.
var unavailableCodes = map[string]bool{"53300": true, "53400": true, "57P01": true, "57P02": true, "57P03": true}

// translate maps pgx errors to the package's sentinels. It is the only place that knows
// Postgres error codes.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if errors.Is(err, ErrOverloaded) {
		return err // the pool's acquire timeout
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
		case unavailableCodes[pgErr.Code] || strings.HasPrefix(pgErr.Code, "08"):
			return fmt.Errorf("%w (%s): %w", ErrOverloaded, pgErr.Code, err)
		// 22021 character_not_in_repertoire (a NUL or non-UTF-8 byte in text), 22P05
		// untranslatable_character (\u0000 in jsonb).
		case pgErr.Code == "22021" || pgErr.Code == "22P05":
			return fmt.Errorf("%w (%s)", ErrInvalidInput, pgErr.Code)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller's own end, not the database's
	}
	// No SQLSTATE: the server could not be reached, or the connection broke under the
	// statement (refused, reset, closed while Postgres restarts).
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", ErrOverloaded, err)
	}
	return err
}
