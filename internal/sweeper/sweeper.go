// Package sweeper is the defence in depth behind the expiry workflows: it writes back any
// reservation or locker hold whose expiry passed a while ago without its workflow having
// done so (a lost outbox item, a workflow stuck in retries). Reads already treat lapsed
// holds as free, so the sweep only tidies state; it logs everything it fixes. It also drops
// webhook events past their 30 days.
package sweeper

import (
	"context"
	"log/slog"
	"time"
)

// Store is what the sweeper needs.
type Store interface {
	ReleaseLapsedHolds(ctx context.Context, olderThan time.Duration) (reservations, lockers int, err error)
	PruneWebhookEvents(ctx context.Context, keep time.Duration, limit int) (int64, error)
}

// WebhookEventRetention is how long the event log keeps an event (DESIGN §10: 30 days); its
// deliveries go with it.
const WebhookEventRetention = 30 * 24 * time.Hour

// Run sweeps every interval until ctx is done. Holds are left to their workflows for grace.
func Run(ctx context.Context, st Store, logger *slog.Logger, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, lockers, err := st.ReleaseLapsedHolds(ctx, grace)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.WarnContext(ctx, "sweep lapsed holds", "err", err)
		case res > 0 || lockers > 0:
			logger.WarnContext(ctx, "sweeper released lapsed holds their workflows had not", "reservations", res, "lockers", lockers)
		}
		// At most 5,000 a sweep, so a backlog of old events drains without a long statement.
		if n, err := st.PruneWebhookEvents(ctx, WebhookEventRetention, 5000); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "prune webhook events", "err", err)
		} else if n > 0 {
			logger.InfoContext(ctx, "pruned webhook events past their retention", "events", n)
		}
	}
}
