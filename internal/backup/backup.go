// Package backup takes and restores a backup of the whole system (docs/runbook.md, "Backup
// and restore"): Temporal's persistence first, then the application's database, so every
// workflow in the backup has its row in it (rows are committed before their workflows start);
// what the database gained meanwhile is re-armed after a restore (outbox.Rearm, which the
// caller runs). A backup is a directory:
//
//	manifest.json             what was taken, when, from which shape
//	app.dump                  the application's database (pg_dump, custom format)
//	temporal.db               make run's shape: the dev Temporal server's SQLite files,
//	temporal-visibility.db    each a consistent copy (VACUUM INTO) taken while it runs
//	temporal-N.dump           the cluster shape: each Temporal database (pg_dump)
//
// lockernet-admin's backup and restore commands parse their flags and call it.
package backup

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the dev Temporal server's SQLite files
)

const manifestName = "manifest.json"

// Shapes of Temporal's persistence in a backup (Manifest.Shape).
const (
	ShapeSQLite   = "sqlite"   // make run's dev Temporal server
	ShapePostgres = "postgres" // Temporal on its own databases (the cluster shape)
	ShapeNone     = "none"     // Temporal left out
)

// Manifest describes a backup.
type Manifest struct {
	// Shape is ShapeSQLite, ShapePostgres or ShapeNone.
	Shape string `json:"shape"`
	// TemporalTakenAt is when the copy of Temporal's persistence began; AppTakenAt is the
	// moment of the application database's snapshot (every transaction committed before it
	// is in the dump, none that began after it).
	TemporalTakenAt time.Time `json:"temporalTakenAt"`
	AppTakenAt      time.Time `json:"appTakenAt"`
	FinishedAt      time.Time `json:"finishedAt"`
	SchemaVersion   int64     `json:"schemaVersion"`
	// Files maps each file of the backup to what it holds (a database name or a path).
	Files map[string]string `json:"files"`
}

// Temporal names Temporal's persistence: the dev server's SQLite file, or the cluster's
// databases, or none.
type Temporal struct {
	// SQLite is the dev server's SQLite file (its -visibility file beside it goes too).
	SQLite string
	// DBs are the cluster's databases as postgres URLs (the store, then visibility).
	DBs []string
	// None leaves Temporal's persistence out (a restore then re-arms every workflow).
	None bool
}

// Shape is the Manifest.Shape of t.
func (t Temporal) Shape() string {
	switch {
	case t.None:
		return ShapeNone
	case len(t.DBs) > 0:
		return ShapePostgres
	default:
		return ShapeSQLite
	}
}

// Take writes a backup to dir (created; it must be empty) of Temporal's persistence t and the
// application database at databaseURL, whose schema is at schemaVersion, and tells out what
// it does.
func Take(ctx context.Context, dir, databaseURL string, schemaVersion int64, t Temporal, out io.Writer) (Manifest, error) {
	if err := emptyDir(dir); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Shape: t.Shape(), SchemaVersion: schemaVersion, Files: map[string]string{}}
	m.TemporalTakenAt = time.Now().UTC()
	switch m.Shape {
	case ShapeSQLite:
		for name, src := range sqliteFiles(t.SQLite) {
			if err := copySQLite(ctx, out, src, filepath.Join(dir, name)); err != nil {
				return m, err
			}
			m.Files[name] = src
		}
	case ShapePostgres:
		for i, u := range t.DBs {
			name := fmt.Sprintf("temporal-%d.dump", i+1)
			if err := pgDump(ctx, out, "temporal database "+dbName(u), u, filepath.Join(dir, name)); err != nil {
				return m, err
			}
			m.Files[name] = dbName(u)
		}
	}

	// The dump reads a snapshot exported here, so AppTakenAt is exact: every transaction
	// committed before it is in the dump, none that began after it is.
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return m, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return m, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var snapshot string
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot(), clock_timestamp()`).Scan(&snapshot, &m.AppTakenAt); err != nil {
		return m, fmt.Errorf("export snapshot: %w", err)
	}
	m.AppTakenAt = m.AppTakenAt.UTC()
	if err := pgDump(ctx, out, "application database "+dbName(databaseURL), databaseURL, filepath.Join(dir, "app.dump"),
		"--snapshot="+snapshot); err != nil {
		return m, err
	}
	m.Files["app.dump"] = dbName(databaseURL)
	m.FinishedAt = time.Now().UTC()
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, manifestName), append(b, '\n'), 0o600); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

// Read reads the manifest of the backup in dir, and checks that t names as many Temporal
// databases as it holds.
func Read(dir string, t Temporal) (Manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return Manifest{}, fmt.Errorf("%s is not a backup: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", manifestName, err)
	}
	if m.Shape == ShapePostgres && len(t.DBs) != len(m.pgDumps()) {
		return Manifest{}, fmt.Errorf("the backup holds %d Temporal databases; name them with -temporal-db URL,URL", len(m.pgDumps()))
	}
	return m, nil
}

// Restore puts the backup m in dir back: Temporal's persistence t first, then the application
// database at databaseURL. Nothing may be connected to either (the caller checks); the
// workflows the restored Temporal state lacks are the caller's to re-arm.
func Restore(ctx context.Context, dir string, m Manifest, t Temporal, databaseURL string, out io.Writer) error {
	switch m.Shape {
	case ShapeSQLite:
		for name, dst := range sqliteFiles(t.SQLite) {
			if err := replaceSQLite(out, filepath.Join(dir, name), dst); err != nil {
				return err
			}
		}
	case ShapePostgres:
		for i, u := range t.DBs {
			if err := pgRestore(ctx, out, "temporal database "+dbName(u), filepath.Join(dir, fmt.Sprintf("temporal-%d.dump", i+1)), u); err != nil {
				return err
			}
		}
	}
	return pgRestore(ctx, out, "application database "+dbName(databaseURL), filepath.Join(dir, "app.dump"), databaseURL)
}

func (m Manifest) pgDumps() []string {
	var out []string
	for name := range m.Files {
		if strings.HasPrefix(name, "temporal-") && strings.HasSuffix(name, ".dump") {
			out = append(out, name)
		}
	}
	return out
}

// emptyDir creates dir, or accepts it if it exists and is empty: a backup never mixes with
// another's files.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

// libpqURL drops the connection settings only pgx knows (pool_*), which pg_dump would refuse.
func libpqURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// dbName is the database a URL names, for messages (never its password).
func dbName(raw string) string {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return cfg.Database
}

// pgDump writes db's dump (custom format, compressed) to file, showing its progress: the
// tables as pg_dump reaches them and the bytes written so far.
func pgDump(ctx context.Context, out io.Writer, what, db, file string, extra ...string) error {
	args := append([]string{"--format=custom", "--verbose", "--file=" + file, "--dbname=" + libpqURL(db)}, extra...)
	cmd := exec.CommandContext(ctx, "pg_dump", args...)
	return runWithProgress(out, what, cmd, file, "dumping contents of table")
}

// pgRestore empties db's schema public and restores the dump into it in one transaction: a
// failed restore leaves the schema empty, never half restored (run it again).
func pgRestore(ctx context.Context, out io.Writer, what, file, db string) error {
	if _, err := os.Stat(file); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public`)
	_ = conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("empty %s: %w", what, err)
	}
	cmd := exec.CommandContext(ctx, "pg_restore", "--verbose", "--no-owner", "--single-transaction", "--exit-on-error",
		"--dbname="+libpqURL(db), file)
	return runWithProgress(out, what, cmd, "", "processing data for table")
}

// runWithProgress runs cmd and prints, every two seconds, how many tables it has reached
// (lines of its verbose output containing marker) and, for a dump, the bytes written.
func runWithProgress(out io.Writer, what string, cmd *exec.Cmd, file, marker string) error {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(out, "%s: %s started\n", what, cmd.Args[0])
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w (is the PostgreSQL client installed?)", what, err)
	}
	var tables int
	var tail []string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	report := func() {
		msg := fmt.Sprintf("%s: %d tables, %s", what, tables, time.Since(start).Round(time.Second))
		if file != "" {
			if fi, err := os.Stat(file); err == nil {
				msg += fmt.Sprintf(", %.1f MB written", float64(fi.Size())/1e6)
			}
		}
		fmt.Fprintln(out, msg)
	}
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			if strings.Contains(l, marker) {
				tables++
			}
			tail = append(tail, l)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		case <-tick.C:
			report()
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %s: %w: %s", what, cmd.Args[0], err, strings.Join(tail, "; "))
	}
	report()
	fmt.Fprintf(out, "%s: done\n", what)
	return nil
}

// copySQLite writes a consistent copy of the SQLite file src to dst while its server may be
// writing to it (VACUUM INTO reads one snapshot).
func copySQLite(ctx context.Context, out io.Writer, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("temporal file %s: %w (the cluster shape: -temporal-db; none: -no-temporal)", src, err)
	}
	start := time.Now()
	db, err := sql.Open("sqlite", "file:"+src+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "temporal file %s: %.1f MB copied in %s\n", filepath.Base(src), float64(fi.Size())/1e6, time.Since(start).Round(time.Millisecond))
	return nil
}

// sqliteFiles maps the backup's names of the dev Temporal server's two files to their paths
// (main is the -temporal-sqlite file), so a backup restores onto any path.
func sqliteFiles(main string) map[string]string {
	return map[string]string{"temporal.db": main, "temporal-visibility.db": VisibilityPath(main)}
}

// VisibilityPath is the dev Temporal server's visibility file beside its main file
// (internal/dev/devtemporal.VisibilityPath, not imported: this binary does not link the
// Temporal server).
func VisibilityPath(dbPath string) string {
	ext := filepath.Ext(dbPath)
	return strings.TrimSuffix(dbPath, ext) + "-visibility" + ext
}

// replaceSQLite puts the backup's copy in place of dst, with dst's write-ahead log and shared
// memory files removed (they belong to the file being replaced).
func replaceSQLite(out io.Writer, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".restoring"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, in)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	for _, side := range []string{dst + "-wal", dst + "-shm"} {
		if err := os.Remove(side); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	fmt.Fprintf(out, "temporal file %s: %.1f MB restored\n", filepath.Base(dst), float64(n)/1e6)
	return nil
}
