// Command devstack is the dev entrypoint behind `make run` and `make run-cluster`: the whole
// Locker Network Service on this machine, with a real Temporal server embedded (make run),
// or the production shape of docker/compose.yaml as separate processes (-cluster). It is the
// only binary that links the Temporal server. Settings: see package internal/dev/devstack.
//
// With -deploy DIR it asks the cluster shape running on LOCKERNET_DATA_DIR to roll its
// workers and apiservers to the apiserver and worker binaries in DIR, one at a time
// (make deploy-cluster; docs/runbook.md, "Rolling deploy"), prints the progress and exits 0
// once every one runs DIR's build; rolling back is the same with the previous build's folder.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockernet/lockernet/internal/dev/devstack"
)

func main() {
	cluster := flag.Bool("cluster", false, "run the production shape: Temporal server, apiservers and workers behind nginx, supervised")
	deploy := flag.String("deploy", "", "roll the running cluster shape's workers and apiservers to the binaries in this folder, one at a time")
	drain := flag.Duration("drain", 0, "with -deploy: how long an apiserver out of nginx is given for its requests in flight (default 35s)")
	stopGrace := flag.Duration("stop-grace", 0, "with -deploy: SIGKILL a process this long after SIGTERM (default 30s)")
	readyTimeout := flag.Duration("ready-timeout", 0, "with -deploy: how long a new process has to answer /readyz (default 90s)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *deploy != "" {
		s, err := devstack.LoadSettings()
		if err != nil {
			fmt.Fprintln(os.Stderr, "devstack:", err)
			os.Exit(2)
		}
		_, err = devstack.Deploy(ctx, s.DataDir, devstack.DeployOptions{BinDir: *deploy, Drain: *drain, StopGrace: *stopGrace, ReadyTimeout: *readyTimeout}, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "devstack: deploy:", err)
			os.Exit(1)
		}
		return
	}
	if *cluster {
		s, err := devstack.LoadClusterSettings()
		if err != nil {
			fmt.Fprintln(os.Stderr, "devstack:", err)
			os.Exit(2)
		}
		logger := s.Logger().With("process", "devstack")
		if err := devstack.RunCluster(ctx, s, logger, os.Stdout); err != nil {
			logger.Error("devstack stopped", "err", err)
			os.Exit(1)
		}
		return
	}
	s, err := devstack.LoadSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(2)
	}
	logger := s.Logger().With("process", "devstack")
	if err := devstack.Run(ctx, s, logger, os.Stdout); err != nil {
		logger.Error("devstack stopped", "err", err)
		os.Exit(1)
	}
}
