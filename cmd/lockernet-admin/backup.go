package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/lockernet/lockernet/internal/outbox"
)

// A backup (docs/runbook.md, "Backup and restore") is a directory:
//
//	manifest.json             what was taken, when, from which shape
//	app.dump                  the application's database (pg_dump, custom format)
//	temporal.db               make run's shape: the dev Temporal server's SQLite files,
//	temporal-visibility.db    each a consistent copy (VACUUM INTO) taken while it runs
//	temporal-N.dump           the cluster shape: each Temporal database (pg_dump)
//
// Temporal's persistence is taken first, the application's database second: every workflow
// in the backup then has its row in it (rows are committed before their workflows start),
// and what the database gained meanwhile is re-armed by restore (outbox.Rearm).

const manifestName = "manifest.json"

// manifest describes a backup.
type manifest struct {
	// Shape is "sqlite" (make run's dev Temporal server) or "postgres" (Temporal on its own
	// databases), or "none" when Temporal was left out.
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

// temporalFlags name Temporal's persistence: the dev server's SQLite file, or the cluster's
// databases.
type temporalFlags struct {
	sqlite string
	dbs    string
	none   bool
}

func (t *temporalFlags) register(fs *flag.FlagSet, dataDir string) {
	fs.StringVar(&t.sqlite, "temporal-sqlite", filepath.Join(dataDir, "temporal.db"),
		"make run's dev Temporal server's SQLite file (its -visibility file beside it goes too)")
	fs.StringVar(&t.dbs, "temporal-db", "",
		"the cluster's Temporal databases instead, as comma-separated postgres URLs (the store, then visibility)")
	fs.BoolVar(&t.none, "no-temporal", false, "leave Temporal's persistence out (restore then re-arms every workflow)")
}

func (t *temporalFlags) shape() string {
	switch {
	case t.none:
		return "none"
	case t.dbs != "":
		return "postgres"
	default:
		return "sqlite"
	}
}

func (t *temporalFlags) urls() []string {
	var out []string
	for _, u := range strings.Split(t.dbs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func backup(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the backup to (created; must be empty)")
	var tf temporalFlags
	tf.register(fs, env.cfg.DataDir)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("backup: -out DIR is required")
	}
	if err := emptyDir(*out); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	version, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	m := manifest{Shape: tf.shape(), SchemaVersion: version, Files: map[string]string{}}
	start := time.Now()

	m.TemporalTakenAt = time.Now().UTC()
	switch m.Shape {
	case "sqlite":
		for name, src := range sqliteFiles(tf.sqlite) {
			if err := copySQLite(ctx, env.out, src, filepath.Join(*out, name)); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			m.Files[name] = src
		}
	case "postgres":
		for i, u := range tf.urls() {
			name := fmt.Sprintf("temporal-%d.dump", i+1)
			if err := pgDump(ctx, env.out, "temporal database "+dbName(u), u, filepath.Join(*out, name)); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			m.Files[name] = dbName(u)
		}
	}

	// The dump reads a snapshot exported here, so AppTakenAt is exact: every transaction
	// committed before it is in the dump, none that began after it is.
	conn, err := pgx.Connect(ctx, env.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var snapshot string
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot(), clock_timestamp()`).Scan(&snapshot, &m.AppTakenAt); err != nil {
		return fmt.Errorf("backup: export snapshot: %w", err)
	}
	m.AppTakenAt = m.AppTakenAt.UTC()
	if err := pgDump(ctx, env.out, "application database "+dbName(env.cfg.DatabaseURL), env.cfg.DatabaseURL, filepath.Join(*out, "app.dump"),
		"--snapshot="+snapshot); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	m.Files["app.dump"] = dbName(env.cfg.DatabaseURL)
	m.FinishedAt = time.Now().UTC()
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, manifestName), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("backup: write manifest: %w", err)
	}
	fmt.Fprintf(env.out, "backup written to %s in %s (schema version %d, Temporal: %s)\n", *out,
		time.Since(start).Round(time.Millisecond), version, m.Shape)
	return nil
}

func restore(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", "", "directory of a backup written by lockernet-admin backup")
	force := fs.Bool("force", false, "restore even though apiservers or workers are connected to the database")
	var tf temporalFlags
	tf.register(fs, env.cfg.DataDir)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" {
		return errors.New("restore: -from DIR is required")
	}
	raw, err := os.ReadFile(filepath.Join(*from, manifestName))
	if err != nil {
		return fmt.Errorf("restore: %s is not a backup: %w", *from, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("restore: read %s: %w", manifestName, err)
	}
	if m.Shape == "postgres" && len(tf.urls()) != len(pgDumps(m)) {
		return fmt.Errorf("restore: the backup holds %d Temporal databases; name them with -temporal-db URL,URL", len(pgDumps(m)))
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	if !*force {
		var running []string
		rows, err := st.Pool().Query(ctx, `SELECT DISTINCT application_name FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name IN ('apiserver', 'worker', 'devstack')`)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		running, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if len(running) > 0 {
			return fmt.Errorf("restore: %s still connected to the database: stop the system first (or -force)", strings.Join(running, ", "))
		}
	}
	start := time.Now()
	fmt.Fprintf(env.out, "restoring the backup of %s (Temporal %s; application database as of %s)\n", *from, m.Shape,
		m.AppTakenAt.Format(time.RFC3339))
	// The pool's connections would hold locks on the schema being replaced.
	env.close()
	env.st = nil

	switch m.Shape {
	case "sqlite":
		for name, dst := range sqliteFiles(tf.sqlite) {
			if err := replaceSQLite(env.out, filepath.Join(*from, name), dst); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
		}
	case "postgres":
		for i, u := range tf.urls() {
			if err := pgRestore(ctx, env.out, "temporal database "+dbName(u), filepath.Join(*from, fmt.Sprintf("temporal-%d.dump", i+1)), u); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
		}
	}
	if err := pgRestore(ctx, env.out, "application database "+dbName(env.cfg.DatabaseURL), filepath.Join(*from, "app.dump"), env.cfg.DatabaseURL); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := rearm(ctx, env); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(env.out, "restored in %s; start the system: the outbox starts the workflows the restored Temporal state lacks\n",
		time.Since(start).Round(time.Millisecond))
	return nil
}

// reconcile re-arms the workflows of the active rows (after restoring the database alone).
func reconcile(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return rearm(ctx, env)
}

func rearm(ctx context.Context, env *adminEnv) error {
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	res, err := outbox.Rearm(ctx, st)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.out, "re-armed %d workflows: %d reservations, %d tokens, %d access codes, %d webhook deliveries\n",
		res.Total(), res.Reservations, res.Tokens, res.AccessCodes, res.WebhookDeliveries)
	return nil
}

func pgDumps(m manifest) []string {
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
	return map[string]string{"temporal.db": main, "temporal-visibility.db": visibilityPath(main)}
}

// visibilityPath is the dev Temporal server's visibility file beside its main file
// (internal/dev/devtemporal.VisibilityPath, not imported: this binary does not link the
// Temporal server).
func visibilityPath(dbPath string) string {
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
