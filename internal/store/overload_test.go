package store_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
)

// A Postgres with no room for another connection is overload, not a fault: the store calls it
// ErrOverloaded, which every surface answers 503 with Retry-After (never 500).
func TestNoRoomIsOverload(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.NewDatabase(t)
	st, err := store.Open(ctx, dbURL, store.Options{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	role := fmt.Sprintf("lockernet_full_%d", time.Now().UnixNano())
	_, err = st.Pool().Exec(ctx, `CREATE ROLE `+role+` LOGIN CONNECTION LIMIT 0`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = st.Pool().Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.User(role)
	_, err = pgx.Connect(ctx, u.String())
	require.Error(t, err, "the role may not connect at all: like a server at max_connections")
	require.ErrorIs(t, store.Translate(err), store.ErrOverloaded, "%v", err)
	require.NotErrorIs(t, store.Translate(fmt.Errorf("other: %w", context.DeadlineExceeded)), store.ErrOverloaded)
}

// A saturated pool answers overload within the acquire timeout instead of queueing the caller
// until its own deadline; the statement itself is not bounded by that timeout, and a caller
// whose own deadline ends first gets its own error, not an overload.
func TestSaturatedPoolIsOverload(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.NewDatabase(t), store.Options{MaxConns: 1, AcquireTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	_, err = st.Pool().Exec(ctx, `SELECT pg_sleep(0.5)`)
	require.NoError(t, err, "a statement longer than the acquire timeout runs to its end")

	held, err := st.Pool().Acquire(ctx)
	require.NoError(t, err)
	released := false
	release := func() {
		if !released {
			released = true
			held.Release()
		}
	}
	t.Cleanup(release)

	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"query row", func(ctx context.Context) error {
			_, err := st.OrganizationByName(ctx, "Demo Logistics")
			return err
		}},
		{"query", func(ctx context.Context) error {
			_, err := st.ListLocations(ctx, 1, 0, 10)
			return err
		}},
		{"transaction", func(ctx context.Context) error {
			return st.WithTx(ctx, func(*store.Store) error { return nil })
		}},
		{"ping", st.Ping},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := c.call(cctx)
			require.ErrorIs(t, err, store.ErrOverloaded, "%v", err)
			var timeout *store.AcquireTimeoutError
			require.ErrorAs(t, err, &timeout)
			assert.Equal(t, 200*time.Millisecond, timeout.Wait)
			assert.NoError(t, cctx.Err(), "answered before the caller's own deadline")
		})
	}

	t.Run("caller deadline first", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := st.OrganizationByName(cctx, "Demo Logistics")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, store.ErrOverloaded, "the caller gave up; the pool did not refuse")
	})

	release()
	_, err = st.ListLocations(ctx, 1, 0, 10)
	require.NoError(t, err, "the pool serves again once the connection is back")
}

// Nothing listening where Postgres should be: the pool's calls fail as ErrOverloaded.
func TestUnreachablePostgresIsOverload(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.Open(ctx, "postgres://postgres@"+addr+"/none?sslmode=disable&connect_timeout=2", store.Options{MaxConns: 1, AppName: "test"})
	if err != nil {
		assert.ErrorIs(t, err, store.ErrOverloaded)
		return
	}
	defer st.Close()
	err = st.WithTx(ctx, func(*store.Store) error { return nil })
	assert.ErrorIs(t, err, store.ErrOverloaded)
}
