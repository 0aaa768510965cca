// Command devstack is the dev entrypoint behind `make run`: the whole Locker Network Service
// on this machine, with a real Temporal server embedded. It is the only binary that links
// the Temporal server. Settings: see package internal/devstack.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockernet/lockernet/internal/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
