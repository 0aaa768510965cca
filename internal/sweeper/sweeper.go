// Package sweeper is the defence in depth behind the expiry workflows: it writes back any
// reservation or locker hold whose expiry passed a while ago without its workflow having
// done so (a lost outbox item, a workflow stuck in retries). Reads already treat lapsed
// holds as free, so the sweep only tidies state; it logs everything it fixes. It also drops
// webhook events past their 30 days.
package sweeper

import (
	"context"
	"fmt"
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

// ReleaseLapsedHolds is the expiry sweep's pass: it writes back the holds lapsed for longer
// than grace (left to their workflows until then).
func ReleaseLapsedHolds(ctx context.Context, st Store, logger *slog.Logger, grace time.Duration) error {
	res, lockers, err := st.ReleaseLapsedHolds(ctx, grace)
	if err != nil {
		return fmt.Errorf("sweep lapsed holds: %w", err)
	}
	if res > 0 || lockers > 0 {
		logger.WarnContext(ctx, "sweeper released lapsed holds their workflows had not", "reservations", res, "lockers", lockers)
	}
	return nil
}

// PruneWebhookEvents drops events past WebhookEventRetention, at most 5,000 a pass, so a
// backlog of old events drains without a long statement.
func PruneWebhookEvents(ctx context.Context, st Store, logger *slog.Logger) error {
	n, err := st.PruneWebhookEvents(ctx, WebhookEventRetention, 5000)
	if err != nil {
		return fmt.Errorf("prune webhook events: %w", err)
	}
	if n > 0 {
		logger.InfoContext(ctx, "pruned webhook events past their retention", "events", n)
	}
	return nil
}
