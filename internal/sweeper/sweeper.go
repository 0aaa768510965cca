// Package sweeper is the defence in depth behind the expiry workflows: it writes back any
// reservation or locker hold whose expiry passed a while ago without its workflow having
// done so (a lost outbox item, a workflow stuck in retries). Reads already treat lapsed
// holds as free, so the sweep only tidies state; it logs everything it fixes.
package sweeper

import (
	"context"
	"log/slog"
	"time"
)

// Store is what the sweeper needs.
type Store interface {
	ReleaseLapsedHolds(ctx context.Context, olderThan time.Duration) (reservations, lockers int, err error)
}

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
	}
}
