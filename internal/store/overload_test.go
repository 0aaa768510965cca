package store_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/testenv"
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
