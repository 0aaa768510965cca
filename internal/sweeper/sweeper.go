// Package sweeper is the defence in depth behind the expiry workflows: it writes back any
// reservation or locker hold whose expiry passed a while ago without its workflow having
// done so (a lost outbox item, a workflow stuck in retries). Reads already treat lapsed
// holds as free, so the sweep only tidies state; it logs everything it fixes. The
// partitioned history tables are kept by package partitions.
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
}

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
