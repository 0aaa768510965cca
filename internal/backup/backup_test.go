package backup

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The whole backup and restore, against real Postgres and Temporal's files, is tested through
// lockernet-admin (cmd/lockernet-admin/backup_test.go); these are the package's own rules.

func TestTemporalShape(t *testing.T) {
	t.Parallel()
	assert.Equal(t, ShapeSQLite, Temporal{SQLite: "/x/temporal.db"}.Shape())
	assert.Equal(t, ShapePostgres, Temporal{SQLite: "/x/temporal.db", DBs: []string{"postgres://a", "postgres://b"}}.Shape())
	assert.Equal(t, ShapeNone, Temporal{DBs: []string{"postgres://a"}, None: true}.Shape())
}

// A backup never mixes with another's files: Take refuses a folder that is not empty before
// it touches anything.
func TestTakeRefusesAFolderInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.dump"), []byte("old"), 0o600))
	_, err := Take(context.Background(), dir, "postgres://127.0.0.1:1/none", 1, Temporal{None: true}, io.Discard)
	require.ErrorContains(t, err, "is not empty")
	got, err := os.ReadFile(filepath.Join(dir, "app.dump"))
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
}

func TestReadRefusesWhatIsNoBackupOrLacksDatabases(t *testing.T) {
	t.Parallel()
	_, err := Read(t.TempDir(), Temporal{})
	require.ErrorContains(t, err, "is not a backup")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, manifestName),
		[]byte(`{"shape":"postgres","files":{"temporal-1.dump":"t","temporal-2.dump":"v","app.dump":"a"}}`), 0o600))
	_, err = Read(dir, Temporal{DBs: []string{"postgres://only-one"}})
	require.ErrorContains(t, err, "holds 2 Temporal databases")
	m, err := Read(dir, Temporal{DBs: []string{"postgres://t", "postgres://v"}})
	require.NoError(t, err)
	assert.Equal(t, ShapePostgres, m.Shape)
}

func TestPgToolsGetLibpqURLs(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "postgres://u@h:5432/db?sslmode=disable",
		libpqURL("postgres://u@h:5432/db?pool_max_conns=8&sslmode=disable&pool_min_conns=1"))
	assert.Equal(t, "db", dbName("postgres://u:secret@h:5432/db"), "a message names the database, never the password")
	assert.Equal(t, "/d/temporal-visibility.db", VisibilityPath("/d/temporal.db"))
}
