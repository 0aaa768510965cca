package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/histories"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

// historiesCmd exports the histories of the workflows Temporal runs, and replays a folder of
// them against this build's workflows (docs/runbook.md, "Replay what runs"):
//
//	lockernet-admin histories export -out DIR [-since 24h] [-per-type 5] [-running=false]
//	lockernet-admin histories replay -dir DIR
//
// export reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE; replay needs no running system.
func historiesCmd(ctx context.Context, env *adminEnv, args []string) error {
	const usage = "usage: histories export -out DIR [-since 24h] [-per-type N] [-running=false] | histories replay -dir DIR"
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "export":
		return exportHistories(ctx, env, args[1:])
	case "replay":
		return replayHistories(env, args[1:])
	default:
		return errors.New(usage)
	}
}

func exportHistories(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("histories export", flag.ContinueOnError)
	out := fs.String("out", "", "folder to write <WorkflowType>/<workflow id>_<run id>.json into (created if missing)")
	since := fs.Duration("since", 24*time.Hour, "take the executions closed within this long")
	perType := fs.Int("per-type", 5, "at most this many closed executions of each workflow type, newest first, and as many running ones")
	running := fs.Bool("running", true, "also take the running executions, whenever they started: their history so far")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("histories export needs -out DIR")
	}
	tc, err := temporalclient.Dial(ctx, env.cfg.TemporalAddress, env.cfg.TemporalNS, env.logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	res, err := histories.Export(ctx, tc, histories.ExportOptions{Dir: *out, ClosedSince: *since, PerType: *perType, Running: *running})
	for _, e := range res.Written {
		fmt.Fprintf(env.out, "%-16s %-15s %4d events  %s\n", e.WorkflowType, e.Status, e.Events, e.File)
	}
	if err != nil {
		return err
	}
	types := map[string]bool{}
	for _, e := range res.Written {
		types[e.WorkflowType] = true
	}
	fmt.Fprintf(env.out, "%d histories of %d workflow types written to %s (namespace %s)\n", len(res.Written), len(types), *out, env.cfg.TemporalNS)
	if n := len(res.Undecided); n > 0 {
		fmt.Fprintf(env.out, "%d running executions left out: no workflow task of theirs has completed yet\n", n)
	}
	return nil
}

func replayHistories(env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("histories replay", flag.ContinueOnError)
	dir := fs.String("dir", "", "folder of histories (*.json, subfolders too), as histories export writes them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("histories replay needs -dir DIR")
	}
	// The SDK logs a failed replay's panic at length; its error, on the FAIL line, says it all.
	rep, err := histories.ReplayDir(*dir, nil)
	if err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Err != nil {
			fmt.Fprintf(env.out, "FAIL %s (%s, %d events): %v\n", r.File, r.WorkflowType, r.Events, r.Err)
			continue
		}
		fmt.Fprintf(env.out, "ok   %s (%s, %d events)\n", r.File, r.WorkflowType, r.Events)
	}
	failed := rep.Failed()
	if len(failed) > 0 {
		files := make([]string, len(failed))
		for i, r := range failed {
			files[i] = r.File
		}
		return fmt.Errorf("%d of %d histories do not replay on this build: %s", len(failed), len(rep.Results), strings.Join(files, ", "))
	}
	fmt.Fprintf(env.out, "all %d histories replay on this build\n", len(rep.Results))
	return nil
}
