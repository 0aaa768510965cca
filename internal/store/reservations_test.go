package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// backdate moves a reservation's expiry (and its locker's hold) into the past, as if its
// time had run out.
func backdate(t *testing.T, st *store.Store, id uuid.UUID) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `
		WITH r AS (UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1 RETURNING id)
		UPDATE lockers SET hold_expires_at = now() - interval '1 second' WHERE reservation_id = $1`, id)
	require.NoError(t, err)
}

// rawStatuses reads what is written, not what reads compute.
func rawStatuses(t *testing.T, st *store.Store, id uuid.UUID) (reservation string, locker int, lockerReservation *uuid.UUID) {
	t.Helper()
	require.NoError(t, st.Pool().QueryRow(context.Background(), `
		SELECT r.status, k.status, k.reservation_id FROM reservations r JOIN lockers k ON k.id = r.locker_id WHERE r.id = $1`, id).
		Scan(&reservation, &locker, &lockerReservation))
	return reservation, locker, lockerReservation
}

func TestExpireReservation(t *testing.T) {
	t.Parallel()
	st, demo, orgID, tower := seededTower(t, 0)
	ctx := context.Background()

	t.Run("not due before the expiry, idempotent after", func(t *testing.T) {
		t.Parallel()
		r := reserve(t, st, demo, tower, tower.LockerIDs[0], time.Hour)

		expired, err := st.ExpireReservation(ctx, r.ID)
		require.ErrorIs(t, err, store.ErrNotDue)
		assert.False(t, expired)
		res, locker, _ := rawStatuses(t, st, r.ID)
		assert.Equal(t, "active", res)
		assert.Equal(t, 2, locker)

		backdate(t, st, r.ID)
		expired, err = st.ExpireReservation(ctx, r.ID)
		require.NoError(t, err)
		assert.True(t, expired)
		res, locker, holder := rawStatuses(t, st, r.ID)
		assert.Equal(t, "expired", res)
		assert.Equal(t, 1, locker)
		assert.Nil(t, holder)

		for range 2 {
			expired, err = st.ExpireReservation(ctx, r.ID)
			require.NoError(t, err)
			assert.False(t, expired, "nothing left to do")
		}
		got, err := st.Reservation(ctx, orgID, r.ID)
		require.NoError(t, err)
		assert.Equal(t, store.ReservationExpired, got.Status)
		require.NotNil(t, got.EndedAt)
		assert.True(t, got.EndedAt.Equal(got.ExpiresAt), "ended when it expired")
	})

	t.Run("a cancelled reservation stays cancelled", func(t *testing.T) {
		t.Parallel()
		r := reserve(t, st, demo, tower, tower.LockerIDs[1], time.Hour)
		_, cancelled, err := st.CancelReservation(ctx, orgID, seed.ClientID, tower.ID, r.LockerID, r.ID)
		require.NoError(t, err)
		require.True(t, cancelled)
		expired, err := st.ExpireReservation(ctx, r.ID)
		require.NoError(t, err)
		assert.False(t, expired)
		res, locker, _ := rawStatuses(t, st, r.ID)
		assert.Equal(t, "cancelled", res)
		assert.Equal(t, 1, locker)
	})

	t.Run("a late expiry leaves the locker's next reservation alone", func(t *testing.T) {
		t.Parallel()
		old := reserve(t, st, demo, tower, tower.LockerIDs[2], time.Hour)
		backdate(t, st, old.ID)
		// The lapsed hold counts as available: someone else takes the locker first.
		next := reserve(t, st, demo, tower, tower.LockerIDs[2], time.Hour)

		_, err := st.ExpireReservation(ctx, old.ID)
		require.NoError(t, err)
		res, _, _ := rawStatuses(t, st, old.ID)
		assert.Equal(t, "expired", res)
		res, locker, holder := rawStatuses(t, st, next.ID)
		assert.Equal(t, "active", res)
		assert.Equal(t, 2, locker)
		require.NotNil(t, holder)
		assert.Equal(t, next.ID, *holder)
	})

	t.Run("an unknown reservation is nothing to do", func(t *testing.T) {
		t.Parallel()
		expired, err := st.ExpireReservation(ctx, uuid.New())
		require.NoError(t, err)
		assert.False(t, expired)
	})

	t.Run("concurrent expiries apply once", func(t *testing.T) {
		t.Parallel()
		r := reserve(t, st, demo, tower, tower.LockerIDs[3], time.Hour)
		backdate(t, st, r.ID)
		results := make([]bool, 8)
		testenv.AtOnce(len(results), func(i int) {
			expired, err := st.ExpireReservation(ctx, r.ID)
			assert.NoError(t, err)
			results[i] = expired
		})
		n := 0
		for _, ok := range results {
			if ok {
				n++
			}
		}
		assert.Equal(t, 1, n)
	})
}

func TestReserveLocker(t *testing.T) {
	t.Parallel()
	st, demo, orgID, tower := seededTower(t, 1)
	ctx := context.Background()
	params := func(lockerID int64) store.ReserveParams {
		return store.ReserveParams{ID: uuid.New(), OrgID: orgID, ClientID: seed.ClientID, TowerID: tower.ID, LockerID: lockerID, Duration: time.Minute}
	}

	r, err := st.ReserveLocker(ctx, params(tower.LockerIDs[0]))
	require.NoError(t, err)
	assert.Equal(t, store.ReservationActive, r.Status)
	assert.Equal(t, 60, r.DurationSeconds)
	assert.Equal(t, time.Minute, r.ExpiresAt.Sub(r.CreatedAt))
	assert.Equal(t, tower.LocationID, r.LocationID)

	_, err = st.ReserveLocker(ctx, params(tower.LockerIDs[0]))
	var conflict *store.StatusConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, store.StatusReserved, conflict.Status)
	assert.ErrorIs(t, err, store.ErrConflict)

	for name, p := range map[string]store.ReserveParams{
		"unknown locker":          params(999999),
		"locker of another tower": params(demo.Towers[0].LockerIDs[0]),
		"another organization":    func() store.ReserveParams { p := params(tower.LockerIDs[1]); p.OrgID = orgID + 100; return p }(),
	} {
		_, err := st.ReserveLocker(ctx, p)
		assert.ErrorIs(t, err, store.ErrNotFound, name)
	}
}

// TestReserveLockerLostToShortHold: a claim that waited for a concurrent holder's row lock and
// lost names the holder's status as of the claim, even when that hold lapses a moment later
// (a drop-off token of one second does); it never answers "available, not available".
func TestReserveLockerLostToShortHold(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	tower := demo.Towers[1]
	lockerID := tower.LockerIDs[2]

	// The holder: a transaction that has the locker's row lock.
	holder, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below; rollback after commit is a no-op
	_, err = holder.Exec(ctx, `SELECT 1 FROM lockers WHERE id = $1 FOR UPDATE`, lockerID)
	require.NoError(t, err)

	// The claim starts and waits for the lock.
	lost := make(chan error, 1)
	go func() {
		_, err := st.ReserveLocker(ctx, store.ReserveParams{ID: uuid.New(), OrgID: demo.Credentials.OrganizationID,
			ClientID: seed.ClientID, TowerID: tower.ID, LockerID: lockerID, Duration: time.Minute})
		lost <- err
	}()
	var claimStarted time.Time
	require.Eventually(t, func() bool {
		return st.Pool().QueryRow(ctx, `
			SELECT xact_start FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%claimed AS%' AND datname = current_database()`).
			Scan(&claimStarted) == nil
	}, 10*time.Second, 10*time.Millisecond, "the claim waits for the holder's lock")

	// The holder rents the locker with a hold that ends just after the claim's clock, and
	// commits only once that hold has lapsed.
	_, err = holder.Exec(ctx, `UPDATE lockers SET status = $3, hold_expires_at = $2::timestamptz + interval '20 milliseconds' WHERE id = $1`,
		lockerID, claimStarted, store.StatusRented)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, holder.Commit(ctx))

	err = <-lost
	var conflict *store.StatusConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, store.StatusRented, conflict.Status, "the status the claim lost to")
	assert.Contains(t, err.Error(), "is rented, not available")
}
