package gatewayexec

import (
	"context"
	"fmt"
	"time"
)

// Reconcile starts the workflow of every request stored but never sent for longer than
// grace (one pass of the reconciler's loop, internal/maintenance), up to 100 a pass: the
// apiserver may stop between storing a request and starting its workflow, and Temporal may
// be briefly unreachable. Starting is idempotent (fixed workflow ids), so every instance may
// run it.
func (g *Executor) Reconcile(ctx context.Context, grace time.Duration) error {
	n, err := g.reconcile(ctx, grace)
	if err != nil {
		return fmt.Errorf("reconcile gateway requests: %w", err)
	}
	if n > 0 {
		g.logger.InfoContext(ctx, "started the workflows of stalled gateway requests", "count", n)
	}
	return nil
}

// reconcile starts the workflows of up to 100 requests stalled for longer than grace.
func (g *Executor) reconcile(ctx context.Context, grace time.Duration) (int, error) {
	rows, err := g.store.StalledGatewayRequests(ctx, grace, 100)
	if err != nil {
		return 0, err
	}
	for _, row := range rows {
		if _, err := g.start(ctx, row); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}
