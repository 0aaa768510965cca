package partitions

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMover has backlog rows of each kind to move and counts the batches asked for.
type fakeMover struct {
	reservations, tokens int
	resBatches, tokBatch int
	tokErr               error
	after                []time.Duration
}

func take(left *int, limit int) int {
	n := min(*left, limit)
	*left -= n
	return n
}

func (f *fakeMover) MoveClosedReservations(_ context.Context, after time.Duration, limit int) (int, error) {
	f.resBatches++
	f.after = append(f.after, after)
	return take(&f.reservations, limit), nil
}

func (f *fakeMover) MoveClosedTokens(_ context.Context, after time.Duration, limit int) (int, error) {
	f.tokBatch++
	f.after = append(f.after, after)
	if f.tokErr != nil {
		return 0, f.tokErr
	}
	return take(&f.tokens, limit), nil
}

// A pass moves batch after batch until one comes back short, and stops at its bound.
func TestMoveClosedToHistoryBatches(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	f := &fakeMover{reservations: 2*HistoryMoveBatch + 5, tokens: HistoryMoveBatch}
	require.NoError(t, MoveClosedToHistory(ctx, f, logger, 24*time.Hour))
	assert.Equal(t, 3, f.resBatches, "two full batches and a short one")
	assert.Equal(t, 2, f.tokBatch, "a full batch, then an empty one")
	assert.Zero(t, f.reservations)
	for _, a := range f.after {
		assert.Equal(t, 24*time.Hour, a)
	}

	// A backlog larger than a pass's bound is left for the next pass.
	f = &fakeMover{reservations: (historyMoveBatches + 10) * HistoryMoveBatch}
	require.NoError(t, MoveClosedToHistory(ctx, f, logger, time.Hour))
	assert.Equal(t, historyMoveBatches, f.resBatches)
	assert.Equal(t, 10*HistoryMoveBatch, f.reservations)
}

// A failing kind is reported after the other kind has been moved.
func TestMoveClosedToHistoryReportsFailures(t *testing.T) {
	boom := errors.New("lock timeout")
	f := &fakeMover{reservations: 3, tokErr: boom}
	err := MoveClosedToHistory(context.Background(), f, slog.New(slog.DiscardHandler), time.Hour)
	require.ErrorIs(t, err, boom)
	assert.Zero(t, f.reservations, "the reservations were moved")
	assert.Equal(t, 1, f.tokBatch, "a failed batch ends the kind's pass")
}
