// Command devstack is the dev entrypoint behind `make run` and `make run-cluster`: the whole
// Locker Network Service on this machine, with a real Temporal server embedded (make run),
// or the production shape of docker/compose.yaml as separate processes (-cluster). It is the
// only binary that links the Temporal server. Settings: see package internal/dev/devstack.
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
