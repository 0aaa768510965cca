package pgcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/pgcluster"
)

// The fallback when no server runs: a private cluster made with the machine's initdb and
// pg_ctl (as an unprivileged user when running as root), reused when already running.
func TestPrivateCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs initdb")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lockernet-pgcluster-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port, err := pgcluster.FreePort()
	require.NoError(t, err)

	c, err := pgcluster.EnsureRunning(ctx, dir, port)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.True(t, pgcluster.Reachable(ctx, c.URL(), 5*time.Second))

	require.NoError(t, pgcluster.CreateDatabase(ctx, c.URL(), "lockernet"))
	require.NoError(t, pgcluster.CreateDatabase(ctx, c.URL(), "lockernet"), "creating it again is a no-op")
	u, err := pgcluster.WithDatabase(c.URL(), "lockernet")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	assert.Equal(t, "lockernet", db)
	require.NoError(t, conn.Close(ctx))

	again, err := pgcluster.EnsureRunning(ctx, dir, port)
	require.NoError(t, err, "a running cluster is reused")
	assert.Equal(t, c.URL(), again.URL())

	require.NoError(t, c.Stop(ctx))
	assert.False(t, pgcluster.Reachable(ctx, c.URL(), 500*time.Millisecond))
	c2, err := pgcluster.EnsureRunning(ctx, dir, port)
	require.NoError(t, err, "restarts on the existing data")
	assert.True(t, pgcluster.Reachable(ctx, c2.URL(), 2*time.Second))
}
