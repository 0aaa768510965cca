package apiserver

import (
	"context"
	"fmt"
	"time"
)

// RunGatewayCloud listens for gateway request outcomes until ctx is done (listening again
// after a lost connection). The reconciler (ReconcileGatewayRequests) is a background loop
// of its own (internal/maintenance).
func (s *Server) RunGatewayCloud(ctx context.Context) {
	s.requests.listen(ctx)
}

// ReconcileGatewayRequests starts the workflow of every request stored but never sent for
// longer than grace (one pass of the reconciler's loop): the apiserver may stop between
// storing a request and starting its workflow, and Temporal may be briefly unreachable.
// Starting is idempotent (fixed workflow ids), so every instance may run it.
func (s *Server) ReconcileGatewayRequests(ctx context.Context, grace time.Duration) error {
	n, err := s.requests.reconcile(ctx, grace)
	if err != nil {
		return fmt.Errorf("reconcile gateway requests: %w", err)
	}
	if n > 0 {
		s.logger.InfoContext(ctx, "started the workflows of stalled gateway requests", "count", n)
	}
	return nil
}

// reconcile starts the workflows of up to 100 requests stalled for longer than grace.
func (g *gatewayRequests) reconcile(ctx context.Context, grace time.Duration) (int, error) {
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
