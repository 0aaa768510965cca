package store

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
)

// A Postgres that is restarting, shutting down or unreachable is unavailable: 503 +
// Retry-After through every surface's mapper, never 500; a caller's own end stays its own.
func TestUnavailableIsOverload(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"admin_shutdown":       &pgconn.PgError{Code: "57P01", Severity: "FATAL"},
		"crash_shutdown":       &pgconn.PgError{Code: "57P02", Severity: "FATAL"},
		"cannot_connect_now":   &pgconn.PgError{Code: "57P03", Severity: "FATAL"},
		"connection_failure":   &pgconn.PgError{Code: "08006"},
		"too_many_connections": &pgconn.PgError{Code: "53300"},
		"refused":              fmt.Errorf("begin: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
		"broken connection":    fmt.Errorf("query: %w", io.ErrUnexpectedEOF),
	} {
		assert.ErrorIs(t, translate(err), ErrOverloaded, name)
	}
	assert.ErrorIs(t, translate(&pgconn.PgError{Code: "23505"}), ErrConflict)
	assert.NotErrorIs(t, translate(&pgconn.PgError{Code: "42601"}), ErrOverloaded, "a syntax error is ours")
	assert.NotErrorIs(t, translate(fmt.Errorf("query: %w", context.Canceled)), ErrOverloaded, "the caller left")
}
