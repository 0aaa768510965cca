package apiserver

import (
	"context"
	"sync"
	"time"
)

// RunGatewayCloud runs the gateway requests' background work until ctx is done: the
// listener of request outcomes (listening again after a lost connection) and the reconciler
// of requests whose workflow never started (ReconcileGatewayRequests).
func (s *Server) RunGatewayCloud(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.ReconcileGatewayRequests(ctx, 10*time.Second, 30*time.Second)
	}()
	defer wg.Wait()
	s.requests.listen(ctx)
}

// ReconcileGatewayRequests starts the workflow of every request stored but never sent for
// longer than grace, every interval until ctx is done: the apiserver may stop between
// storing a request and starting its workflow, and Temporal may be briefly unreachable.
// Starting is idempotent (fixed workflow ids), so every instance may run it.
func (s *Server) ReconcileGatewayRequests(ctx context.Context, interval, grace time.Duration) {
	s.requests.reconcileEvery(ctx, interval, grace)
}

func (g *gatewayRequests) reconcileEvery(ctx context.Context, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := g.reconcile(ctx, grace); err != nil && ctx.Err() == nil {
			g.logger.WarnContext(ctx, "reconcile gateway requests", "err", err)
		} else if n > 0 {
			g.logger.InfoContext(ctx, "started the workflows of stalled gateway requests", "count", n)
		}
	}
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
