package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/backup"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// backup then restore, of make run's shape (the dev Temporal server's SQLite files): what
// was made before the backup is back, what was made after it is gone, and the active rows'
// workflows are asked for again with their original expiry. (t.Setenv rules out t.Parallel.)
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.NewDatabase(t)
	dataDir := t.TempDir()
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("LOCKERNET_DATA_DIR", dataDir)
	t.Setenv("LOCKERNET_LOG_FORMAT", "text")

	st, err := store.Open(ctx, dbURL, store.Options{MaxConns: 2})
	require.NoError(t, err)
	key := make([]byte, keyring.KeySize)
	_, _ = rand.Read(key)
	ring, err := keyring.New(key)
	require.NoError(t, err)
	demo, err := seed.Demo(ctx, st, ring, nil)
	require.NoError(t, err)
	org, client := demo.Credentials.OrganizationID, demo.Credentials.ServiceProvider.ClientID
	var lockers []int64
	var tower string
	rows, err := st.Pool().Query(ctx, `SELECT id, tower_id FROM lockers ORDER BY id LIMIT 2`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id, &tower))
		lockers = append(lockers, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, lockers, 2)
	expires := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	reserve := func(locker int64) uuid.UUID {
		id := uuid.New()
		_, err := st.Pool().Exec(ctx, `
			WITH r AS (INSERT INTO reservations (id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, expires_at)
			           SELECT $1, $2, $3, $4, tower_id, 'active', 3600, $5 FROM lockers WHERE id = $4)
			UPDATE lockers SET status = 2, reservation_id = $1, hold_expires_at = $5 WHERE id = $4`, id, org, client, locker, expires)
		require.NoError(t, err)
		return id
	}
	// The dev Temporal server's files, with one row each.
	temporalDB := filepath.Join(dataDir, "temporal.db")
	sqliteRows := func(path string) int {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM runs`).Scan(&n))
		return n
	}
	addSQLiteRow := func(path string) {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(`CREATE TABLE IF NOT EXISTS runs (id integer); INSERT INTO runs VALUES (1)`)
		require.NoError(t, err)
	}
	addSQLiteRow(temporalDB)
	addSQLiteRow(backup.VisibilityPath(temporalDB))

	before := reserve(lockers[0])
	dir := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"backup", "-out", dir}, &out))
	assert.Contains(t, out.String(), "application database")
	for _, f := range []string{"manifest.json", "app.dump", "temporal.db", "temporal-visibility.db"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	var m backup.Manifest
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &m))
	assert.Equal(t, "sqlite", m.Shape)
	assert.False(t, m.AppTakenAt.Before(m.TemporalTakenAt), "Temporal first, the database second")
	assert.Error(t, run(ctx, []string{"backup", "-out", dir}, &out), "a backup never writes into another's directory")

	after := reserve(lockers[1])
	addSQLiteRow(temporalDB)
	require.Equal(t, 2, sqliteRows(temporalDB))
	st.Close()

	out.Reset()
	require.NoError(t, run(ctx, []string{"restore", "-from", dir}, &out))
	assert.Contains(t, out.String(), "re-armed 1 workflows: 1 reservations")
	assert.Equal(t, 1, sqliteRows(temporalDB), "the Temporal file as backed up")
	assert.NoFileExists(t, temporalDB+"-wal")

	st, err = store.Open(ctx, dbURL, store.Options{MaxConns: 2})
	require.NoError(t, err)
	defer st.Close()
	status := func(id uuid.UUID) string {
		var s string
		err := st.Pool().QueryRow(ctx, `SELECT status FROM reservations WHERE id = $1`, id).Scan(&s)
		if err != nil {
			return "missing"
		}
		return s
	}
	assert.Equal(t, "active", status(before))
	assert.Equal(t, "missing", status(after))
	var lockerStatus int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT status FROM lockers WHERE id = $1`, lockers[1]).Scan(&lockerStatus))
	assert.Equal(t, 1, lockerStatus, "the locker reserved after the backup is available")
	var input []byte
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT input FROM workflow_outbox WHERE workflow_id = $1`,
		contract.ReservationWorkflowID(before.String())).Scan(&input))
	var in contract.ReservationInput
	require.NoError(t, json.Unmarshal(input, &in))
	assert.True(t, expires.Equal(in.ExpiresAt), "the original expiry: %s, not %s", expires, in.ExpiresAt)
	v, err := st.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, m.SchemaVersion, v)

	// Onto another path (another machine's data directory): the files take its names.
	elsewhere := filepath.Join(t.TempDir(), "temporal-elsewhere.db")
	require.NoError(t, run(ctx, []string{"restore", "-from", dir, "-temporal-sqlite", elsewhere}, &out))
	assert.Equal(t, 1, sqliteRows(elsewhere))
	assert.Equal(t, 1, sqliteRows(backup.VisibilityPath(elsewhere)))

	// Unhappy paths: no directory, not a backup, a running system.
	assert.ErrorContains(t, run(ctx, []string{"restore"}, &out), "-from DIR is required")
	assert.ErrorContains(t, run(ctx, []string{"restore", "-from", t.TempDir()}, &out), "is not a backup")
	assert.ErrorContains(t, run(ctx, []string{"backup"}, &out), "-out DIR is required")
	running, err := store.Open(ctx, dbURL, store.Options{MaxConns: 1, AppName: "worker"})
	require.NoError(t, err)
	defer running.Close()
	require.NoError(t, running.Pool().Ping(ctx))
	assert.ErrorContains(t, run(ctx, []string{"restore", "-from", dir}, &out), "worker still connected")
}

// The cluster shape: Temporal's persistence is Postgres databases, dumped and restored like
// the application's, and named on both commands.
func TestBackupRestoreTemporalDatabases(t *testing.T) {
	ctx := context.Background()
	dbURL, temporalURL := testenv.NewDatabase(t), testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("LOCKERNET_DATA_DIR", t.TempDir())
	t.Setenv("LOCKERNET_LOG_FORMAT", "text")
	tdb, err := store.Open(ctx, temporalURL, store.Options{MaxConns: 1})
	require.NoError(t, err)
	_, err = tdb.Pool().Exec(ctx, `CREATE TABLE executions (id text PRIMARY KEY); INSERT INTO executions VALUES ('reservation/a')`)
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"backup", "-out", dir, "-temporal-db", temporalURL}, &out))
	assert.FileExists(t, filepath.Join(dir, "temporal-1.dump"))
	_, err = tdb.Pool().Exec(ctx, `INSERT INTO executions VALUES ('reservation/b')`)
	require.NoError(t, err)
	tdb.Close()

	assert.ErrorContains(t, run(ctx, []string{"restore", "-from", dir}, &out), "name them with -temporal-db",
		"the cluster's databases are named, never guessed")
	require.NoError(t, run(ctx, []string{"restore", "-from", dir, "-temporal-db", temporalURL}, &out))
	tdb, err = store.Open(ctx, temporalURL, store.Options{MaxConns: 1})
	require.NoError(t, err)
	defer tdb.Close()
	var ids []string
	rows, err := tdb.Pool().Query(ctx, `SELECT id FROM executions ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	assert.Equal(t, []string{"reservation/a"}, ids, "Temporal's database as backed up")
}
