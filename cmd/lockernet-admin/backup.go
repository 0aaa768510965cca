package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/backup"
	"github.com/lockernet/lockernet/internal/outbox"
)

// Backup and restore (docs/runbook.md, "Backup and restore"): the commands parse their flags
// and call internal/backup; a restore then re-arms the workflows the restored Temporal state
// lacks (outbox.Rearm).

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

// temporal is the persistence the flags name.
func (t *temporalFlags) temporal() backup.Temporal {
	out := backup.Temporal{SQLite: t.sqlite, None: t.none}
	for _, u := range strings.Split(t.dbs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out.DBs = append(out.DBs, u)
		}
	}
	return out
}

func backupCmd(ctx context.Context, env *adminEnv, args []string) error {
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
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	version, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := backup.Take(ctx, *out, env.cfg.DatabaseURL, version, tf.temporal(), env.out)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(env.out, "backup written to %s in %s (schema version %d, Temporal: %s)\n", *out,
		time.Since(start).Round(time.Millisecond), version, m.Shape)
	return nil
}

func restoreCmd(ctx context.Context, env *adminEnv, args []string) error {
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
	m, err := backup.Read(*from, tf.temporal())
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	if !*force {
		rows, err := st.Pool().Query(ctx, `SELECT DISTINCT application_name FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name IN ('apiserver', 'worker', 'devstack')`)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		running, err := pgx.CollectRows(rows, pgx.RowTo[string])
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
	if err := backup.Restore(ctx, *from, m, tf.temporal(), env.cfg.DatabaseURL, env.out); err != nil {
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
	fmt.Fprintf(env.out, "re-armed %d workflows: %d reservations, %d tokens, %d access codes, %d pickup windows, %d webhook deliveries\n",
		res.Total(), res.Reservations, res.Tokens, res.AccessCodes, res.PickupWindows, res.WebhookDeliveries)
	return nil
}
