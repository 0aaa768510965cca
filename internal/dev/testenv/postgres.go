// Package testenv is the integration-test harness: a private database per test (copied from
// a migrated template), an embedded Temporal server, and a running apiserver and worker on
// free ports, all real, talking real HTTP and gRPC. Later capabilities extend Env.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/store"
)

// privatePort is where the private test cluster listens when no server runs on :5432.
const privatePort = 55432

var (
	adminOnce sync.Once
	adminURL  string
	adminErr  error
)

// AdminURL returns a superuser connection string of the test Postgres server:
// LOCKERNET_TEST_DATABASE_URL, else the local server on 127.0.0.1:5432, else a private
// cluster started in the temp dir (shared by every test package; left running).
func AdminURL(t testing.TB) string {
	t.Helper()
	adminOnce.Do(func() {
		ctx := context.Background()
		if u := os.Getenv("LOCKERNET_TEST_DATABASE_URL"); u != "" {
			adminURL = u
			return
		}
		if pgcluster.Reachable(ctx, pgcluster.LocalURL, 2*time.Second) {
			adminURL = pgcluster.LocalURL
			return
		}
		dir := filepath.Join(os.TempDir(), "lockernet-test-postgres")
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			adminErr = err
			return
		}
		defer unlock()
		c, err := pgcluster.EnsureRunning(ctx, dir, privatePort)
		if err != nil {
			adminErr = err
			return
		}
		adminURL = c.URL()
	})
	if adminErr != nil {
		t.Fatalf("no test postgres: %v", adminErr)
	}
	return adminURL
}

// NewDatabase creates a fresh database for one test, copied from a template that has every
// migration applied, and drops it when the test ends. It returns its connection string.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	admin := AdminURL(t)
	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("prepare template database: %v", err)
	}
	name := fmt.Sprintf("lockernet_test_%d_%s", time.Now().Unix(), randomHex(4))
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize()))
		// Another package may be connected to the template for a moment; try again.
		if err == nil || attempt > 50 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize()))
	})
	u, err := pgcluster.WithDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var templateMu sync.Mutex

// ensureTemplate creates the migrated template database named after a hash of the
// migrations, under an advisory lock so parallel test packages build it once.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	name := "lockernet_tmpl_" + migrationsHash()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(4242001)`); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(4242001)`) //nolint:errcheck
	var ready bool
	err = conn.QueryRow(ctx, `SELECT coalesce(shobj_description(oid, 'pg_database') = 'ready', false) FROM pg_database WHERE datname = $1`, name).Scan(&ready)
	if err == nil && ready {
		return name, nil
	}
	dropLeftovers(ctx, conn, name)
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	u, err := pgcluster.WithDatabase(admin, name)
	if err != nil {
		return "", err
	}
	st, err := store.Open(ctx, u, store.Options{MaxConns: 2})
	if err != nil {
		return "", err
	}
	err = st.Migrate(ctx, slog.New(slog.DiscardHandler))
	st.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS 'ready'", pgx.Identifier{name}.Sanitize())); err != nil {
		return "", fmt.Errorf("mark template ready: %w", err)
	}
	return name, nil
}

// dropLeftovers removes test databases of runs that ended without cleaning up (killed runs)
// and all but the newest few templates of other migration sets: another test run, on
// another checkout or with a migration being edited, may still be copying one of them.
func dropLeftovers(ctx context.Context, conn *pgx.Conn, current string) {
	rows, err := conn.Query(ctx, `
		SELECT datname, datname LIKE 'lockernet\_tmpl\_%' FROM pg_database
		WHERE datname LIKE 'lockernet\_test\_%' OR datname LIKE 'lockernet\_tmpl\_%'
		ORDER BY oid DESC`)
	if err != nil {
		return
	}
	type db struct {
		name     string
		template bool
	}
	dbs, _ := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db, error) {
		var d db
		return d, r.Scan(&d.name, &d.template)
	})
	cutoff := time.Now().Add(-3 * time.Hour).Unix()
	templates := 0
	for _, d := range dbs {
		stale := false
		if d.template {
			templates++
			stale = d.name != current && templates > 4 // newest first: keep the four newest
		} else if parts := strings.Split(d.name, "_"); len(parts) >= 3 {
			if ts, err := strconv.ParseInt(parts[2], 10, 64); err == nil && ts < cutoff {
				stale = true
			}
		}
		if stale {
			_, _ = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{d.name}.Sanitize()))
		}
	}
}

func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(store.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(store.Migrations(), path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
