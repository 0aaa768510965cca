package partitions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// HistoryMover is what the history move needs: internal/store's moves of closed reservations
// and tokens into their partitioned history (history_move.go).
type HistoryMover interface {
	MoveClosedReservations(ctx context.Context, after time.Duration, limit int) (int, error)
	MoveClosedTokens(ctx context.Context, after time.Duration, limit int) (int, error)
}

// HistoryMoveBatch is how many rows one move transaction takes: a short transaction that
// holds a few hundred row locks for milliseconds.
const HistoryMoveBatch = 1000

// historyMoveBatches bounds the batches of one kind a pass runs (100,000 rows), so a backlog
// (the first pass over years of closed rows) is worked off over several passes, each ending.
const historyMoveBatches = 100

// MoveClosedToHistory is the history move's pass: it moves the reservations and the locker
// tokens closed more than after ago out of their live tables into the history, a batch per
// transaction, until a batch comes back short. A failure of one kind is logged and returned
// after the other has been done.
func MoveClosedToHistory(ctx context.Context, st HistoryMover, logger *slog.Logger, after time.Duration) error {
	var errs []error
	for _, kind := range []struct {
		name string
		move func(context.Context, time.Duration, int) (int, error)
	}{{"reservations", st.MoveClosedReservations}, {"tokens", st.MoveClosedTokens}} {
		moved := 0
		for range historyMoveBatches {
			n, err := kind.move(ctx, after, HistoryMoveBatch)
			moved += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if n < HistoryMoveBatch {
				break
			}
		}
		if moved > 0 {
			logger.InfoContext(ctx, "moved closed rows to the history", "kind", kind.name, "rows", moved, "closed_before", after.String())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("move closed rows to the history: %w", err)
	}
	return nil
}
