package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// issueDropoff rents a demo locker with a drop-off token and returns the token.
func issueDropoff(t *testing.T, st *store.Store, demo seed.Result, lockerID int64) store.LockerToken {
	t.Helper()
	var res store.IssueResult
	require.NoError(t, st.WithTx(context.Background(), func(tx *store.Store) error {
		var err error
		res, err = tx.IssueToken(context.Background(), store.IssueTokenParams{ID: uuid.New(), OrgID: demo.Credentials.OrganizationID,
			ClientID: seed.ClientID, TowerID: demo.Towers[0].ID, LockerID: lockerID, Type: store.TokenDropoff, Duration: time.Hour})
		return err
	}))
	return res.Token
}

// useEvents are the events a tower records for one use, from seq on.
func useEvents(tok store.LockerToken, epoch, seq int64, itemInside bool) []store.TowerEvent {
	at := time.Now().UTC().Truncate(time.Millisecond)
	id := tok.ID
	return []store.TowerEvent{
		{BootEpoch: epoch, Seq: seq, Kind: store.EventTokenUsed, At: at, LockerID: tok.LockerID, TokenID: &id, Generation: tok.Generation},
		{BootEpoch: epoch, Seq: seq + 1, Kind: store.EventDoorOpened, At: at, LockerID: tok.LockerID, TokenID: &id, Generation: tok.Generation},
		{BootEpoch: epoch, Seq: seq + 2, Kind: store.EventDoorClosed, At: at, LockerID: tok.LockerID, TokenID: &id, Generation: tok.Generation, ItemInside: itemInside},
	}
}

func apply(t *testing.T, st *store.Store, tower string, events ...store.TowerEvent) store.ApplyResult {
	t.Helper()
	var res store.ApplyResult
	require.NoError(t, st.WithTx(context.Background(), func(tx *store.Store) error {
		var err error
		res, err = tx.ApplyTowerEvents(context.Background(), tower, events)
		return err
	}))
	return res
}

func lockerStatus(t *testing.T, st *store.Store, id int64) int {
	t.Helper()
	var s int
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT locker_status(status, hold_expires_at) FROM lockers WHERE id = $1`, id).Scan(&s))
	return s
}

func countRows(t *testing.T, st *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

// Whatever order and grouping the events of a use arrive in, the use applies exactly once,
// when its token_used, its door_closed and everything between them are in; replays are
// duplicates.
func TestApplyTowerEventsOrderAndReplays(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	tower := demo.Towers[0]
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for i, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			lockerID := tower.LockerIDs[i]
			tok := issueDropoff(t, st, demo, lockerID)
			events := useEvents(tok, int64(100+i), 1, true)
			uses := 0
			for n, j := range order {
				res := apply(t, st, tower.ID, events[j])
				assert.Equal(t, 1, res.Accepted)
				assert.Zero(t, res.Duplicates)
				uses += len(res.Uses)
				if n == len(order)-1 {
					assert.Equal(t, store.StatusOccupied, store.LockerStatus(lockerStatus(t, st, lockerID)), "after all events")
				} else {
					// Half a use changes nothing, nor does a use with a gap before its door_closed.
					assert.Equal(t, store.StatusRented, store.LockerStatus(lockerStatus(t, st, lockerID)), "after %d events", n+1)
				}
			}
			assert.Equal(t, 1, uses, "the use is applied once")

			res := apply(t, st, tower.ID, events...)
			assert.Equal(t, store.ApplyResult{Duplicates: 3}, res)
			assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, tok.ID))
			assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM transactions WHERE token_id = $1`, tok.ID))
		})
	}

	t.Run("the same events twice in one upload", func(t *testing.T) {
		lockerID := tower.LockerIDs[len(orders)]
		tok := issueDropoff(t, st, demo, lockerID)
		events := useEvents(tok, 200, 1, true)
		res := apply(t, st, tower.ID, append(events, events...)...)
		assert.Equal(t, 3, res.Accepted)
		assert.Equal(t, 3, res.Duplicates)
		require.Len(t, res.Uses, 1)
		assert.Equal(t, store.UseOccupied, res.Uses[0].Outcome)
	})
}

// Two uploads that each carry one half of a use, at the same time: the use must still
// apply (the second upload must see the first one's half).
func TestApplyTowerEventsConcurrentHalves(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	tower := demo.Towers[0]
	ctx := context.Background()
	lockerID := tower.LockerIDs[0]
	tok := issueDropoff(t, st, demo, lockerID)
	events := useEvents(tok, 1, 1, true)

	var dbName string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&dbName))
	second := make(chan error, 1)
	require.NoError(t, st.WithTx(ctx, func(tx *store.Store) error {
		if _, err := tx.ApplyTowerEvents(ctx, tower.ID, events[:2]); err != nil {
			return err
		}
		// While this upload is not committed, the other half arrives on another connection.
		go func() {
			second <- st.WithTx(ctx, func(tx2 *store.Store) error {
				_, err := tx2.ApplyTowerEvents(ctx, tower.ID, events[2:])
				return err
			})
		}()
		// Commit once the second upload has either finished or is waiting for this one.
		require.Eventually(t, func() bool {
			if len(second) > 0 {
				return true
			}
			var waiting int
			require.NoError(t, st.Pool().QueryRow(ctx, `
				SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, dbName).Scan(&waiting))
			return waiting > 0
		}, 30*time.Second, 10*time.Millisecond)
		return nil
	}))
	require.NoError(t, <-second)

	assert.Equal(t, store.StatusOccupied, store.LockerStatus(lockerStatus(t, st, lockerID)), "the use applied")
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, tok.ID))
}

// A use pairs with its own door_closed, never with a later one that happened to arrive
// first: while events between its token_used and a door_closed are missing, it waits.
func TestApplyTowerEventsWaitsForGaps(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	tower := demo.Towers[0]

	t.Run("a later use's door_closed arrives before the earlier use's", func(t *testing.T) {
		lockerID := tower.LockerIDs[0]
		d1 := issueDropoff(t, st, demo, lockerID)
		d2 := issueDropoff(t, st, demo, lockerID)
		first := useEvents(d1, 1, 1, true)   // the item goes in
		second := useEvents(d2, 1, 4, false) // the door is opened again and closed
		apply(t, st, tower.ID, second...)
		apply(t, st, tower.ID, first[0], first[1])
		res := apply(t, st, tower.ID, first[2])
		require.Len(t, res.Uses, 1)
		assert.Equal(t, d1.ID, res.Uses[0].TokenID)
		assert.Equal(t, store.UseOccupied, res.Uses[0].Outcome, "the first use closed with the item inside")
		assert.Equal(t, store.StatusOccupied, store.LockerStatus(lockerStatus(t, st, lockerID)))
		assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id IN ($1, $2)`, d1.ID, d2.ID))
	})

	t.Run("the door_opened between them arrives last", func(t *testing.T) {
		lockerID := tower.LockerIDs[1]
		d := issueDropoff(t, st, demo, lockerID)
		ev := useEvents(d, 2, 1, true)
		assert.Empty(t, apply(t, st, tower.ID, ev[0]).Uses)
		assert.Empty(t, apply(t, st, tower.ID, ev[2]).Uses)
		res := apply(t, st, tower.ID, ev[1])
		require.Len(t, res.Uses, 1)
		assert.Equal(t, store.UseOccupied, res.Uses[0].Outcome)
		assert.Equal(t, store.StatusOccupied, store.LockerStatus(lockerStatus(t, st, lockerID)))
	})
}
