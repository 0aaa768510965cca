package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// moveAfter is the move's threshold in these tests; rows are backdated past it.
const moveAfter = time.Hour

// closeLongAgo dates a closed reservation or token two days back, as if it had closed then.
func closeLongAgo(t *testing.T, st *store.Store, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `
		UPDATE reservations SET created_at = created_at - interval '2 days', expires_at = expires_at - interval '2 days',
		       ended_at = ended_at - interval '2 days'
		WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `
		UPDATE locker_tokens SET created_at = created_at - interval '2 days', expires_at = expires_at - interval '2 days',
		       used_at = used_at - interval '2 days'
		WHERE id = $1`, id)
	require.NoError(t, err)
}

// moveAll runs the moves until nothing is left to move.
func moveAll(t *testing.T, st *store.Store) (reservations, tokens int) {
	t.Helper()
	ctx := context.Background()
	for {
		r, err := st.MoveClosedReservations(ctx, moveAfter, 1000)
		require.NoError(t, err)
		k, err := st.MoveClosedTokens(ctx, moveAfter, 1000)
		require.NoError(t, err)
		reservations, tokens = reservations+r, tokens+k
		if r == 0 && k == 0 {
			return reservations, tokens
		}
	}
}

func where(t *testing.T, st *store.Store, id uuid.UUID) string {
	t.Helper()
	live := countRows(t, st, `SELECT count(*) FROM reservations WHERE id = $1`, id) + countRows(t, st, `SELECT count(*) FROM locker_tokens WHERE id = $1`, id)
	moved := countRows(t, st, `SELECT count(*) FROM reservation_history WHERE id = $1`, id) +
		countRows(t, st, `SELECT count(*) FROM locker_token_history WHERE id = $1`, id)
	switch {
	case live == 1 && moved == 0:
		return "live"
	case live == 0 && moved == 1:
		return "history"
	}
	t.Fatalf("%s: %d live rows, %d history rows", id, live, moved)
	return ""
}

func reserve(t *testing.T, st *store.Store, demo seed.Result, tower seed.Tower, lockerID int64, d time.Duration) store.Reservation {
	t.Helper()
	r, err := st.ReserveLocker(context.Background(), store.ReserveParams{ID: uuid.New(), OrgID: demo.Credentials.OrganizationID,
		ClientID: seed.ClientID, TowerID: tower.ID, LockerID: lockerID, Duration: d})
	require.NoError(t, err)
	return r
}

// cancel cancels the reservation as the demo client.
func cancel(t *testing.T, st *store.Store, demo seed.Result, tower seed.Tower, r store.Reservation) {
	t.Helper()
	_, _, err := st.CancelReservation(context.Background(), demo.Credentials.OrganizationID, seed.ClientID, tower.ID, r.LockerID, r.ID)
	require.NoError(t, err)
}

// The move takes only closed rows closed long enough ago that nothing live refers to: not an
// active reservation or token, not one closed within the threshold, not a reservation a
// locker still names, not a token an open link still valid wraps. A token's use goes with it.
func TestMoveClosedToHistoryTakesOnlyEligibleRows(t *testing.T) {
	t.Parallel()
	st, demo, org, tower := seededTower(t, 0)
	ctx := context.Background()

	active := reserve(t, st, demo, tower, tower.LockerIDs[0], time.Hour)
	cancelledOld := reserve(t, st, demo, tower, tower.LockerIDs[1], time.Hour)
	cancel(t, st, demo, tower, cancelledOld)
	closeLongAgo(t, st, cancelledOld.ID)
	cancelledNow := reserve(t, st, demo, tower, tower.LockerIDs[2], time.Minute)
	cancel(t, st, demo, tower, cancelledNow)
	// An expired reservation whose locker still names it (its write-back not done yet).
	held := reserve(t, st, demo, tower, tower.LockerIDs[3], time.Hour)
	_, err := st.Pool().Exec(ctx, `UPDATE reservations SET status = 'expired', ended_at = expires_at WHERE id = $1`, held.ID)
	require.NoError(t, err)
	closeLongAgo(t, st, held.ID)

	// A drop-off token used (with its use applied), one expired, one still active, one
	// expired but wrapped by an open link still valid.
	used := issueDropoff(t, st, demo, tower.LockerIDs[4])
	apply(t, st, tower.ID, useEvents(used, 1, 1, true)...)
	require.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, used.ID))
	closeLongAgo(t, st, used.ID)
	expired := issueDropoff(t, st, demo, tower.LockerIDs[5])
	_, err = st.Pool().Exec(ctx, `UPDATE locker_tokens SET status = 'expired' WHERE id = $1`, expired.ID)
	require.NoError(t, err)
	closeLongAgo(t, st, expired.ID)
	activeTok := issueDropoff(t, st, demo, tower.LockerIDs[6])
	linked := issueDropoff(t, st, demo, tower.LockerIDs[7])
	_, err = st.Pool().Exec(ctx, `UPDATE locker_tokens SET status = 'expired' WHERE id = $1`, linked.ID)
	require.NoError(t, err)
	closeLongAgo(t, st, linked.ID)
	_, err = st.CreateOpenRequest(ctx, store.OpenRequest{ID: uuid.New(), OrgID: org, ClientID: seed.ClientID, Type: store.TokenDropoff,
		TokenID: linked.ID, LockerID: linked.LockerID, TowerID: tower.ID, LocationID: tower.LocationID, ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)

	r, k := moveAll(t, st)
	assert.Equal(t, 1, r, "reservations moved")
	assert.Equal(t, 2, k, "tokens moved")
	for id, want := range map[uuid.UUID]string{active.ID: "live", cancelledOld.ID: "history", cancelledNow.ID: "live", held.ID: "live",
		used.ID: "history", expired.ID: "history", activeTok.ID: "live", linked.ID: "live"} {
		assert.Equal(t, want, where(t, st, id), "%s", id)
	}
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, used.ID))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM token_use_history u JOIN locker_token_history t
		ON t.id = u.token_id AND t.closed_at = u.closed_at WHERE u.token_id = $1`, used.ID), "the use went with its token, in its month")
	var closedAt, expiresAt time.Time
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT closed_at, greatest(ended_at, expires_at) FROM reservation_history WHERE id = $1`,
		cancelledOld.ID).Scan(&closedAt, &expiresAt))
	assert.True(t, closedAt.Equal(expiresAt), "closed_at is greatest(ended_at, expires_at)")

	// Once the link expires, its token moves (the link stays and is still read).
	_, err = st.Pool().Exec(ctx, `UPDATE locker_open_requests SET expires_at = now() - interval '1 second' WHERE token_id = $1`, linked.ID)
	require.NoError(t, err)
	_, k = moveAll(t, st)
	assert.Equal(t, 1, k)
	assert.Equal(t, "history", where(t, st, linked.ID))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM locker_open_requests WHERE token_id = $1`, linked.ID))
}

// Two moves running at once take different rows: every row ends in the history exactly once.
func TestMoveClosedToHistoryConcurrentRuns(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	tower := demo.Towers[0]
	const n = 60
	for range n {
		_, err := st.Pool().Exec(ctx, `
			INSERT INTO reservations (id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, created_at, expires_at, ended_at)
			VALUES ($1, $2, $3, $4, $5, 'cancelled', 60, now() - interval '3 days', now() - interval '3 days' + interval '60 seconds',
			        now() - interval '3 days' + interval '10 seconds')`,
			uuid.New(), demo.Credentials.OrganizationID, seed.ClientID, tower.LockerIDs[0], tower.ID)
		require.NoError(t, err)
	}
	moved := make([]int, 2)
	errs := make([]error, 2)
	testenv.AtOnce(2, func(i int) {
		for {
			m, err := st.MoveClosedReservations(ctx, moveAfter, 7)
			if err != nil {
				errs[i] = err
				return
			}
			moved[i] += m
			if m == 0 {
				return
			}
		}
	})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, n, moved[0]+moved[1])
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM reservations`))
	assert.Equal(t, n, countRows(t, st, `SELECT count(*) FROM reservation_history`))
	assert.Equal(t, n, countRows(t, st, `SELECT count(DISTINCT id) FROM reservation_history`))
	r, err := st.MoveClosedReservations(ctx, moveAfter, 7)
	require.NoError(t, err)
	assert.Zero(t, r, "a further run finds nothing")
}

// Every reader by id answers a closed reservation or token the same before and after it
// moved to the history, and a late writer (a repeated cancel, an expiry whose workflow ran
// late) answers as it did for the closed live row.
func TestHistoryReadersAnswerTheSameAfterTheMove(t *testing.T) {
	t.Parallel()
	st, demo, org, tower := seededTower(t, 0)
	ctx := context.Background()
	other := org + 1000 // an organization that is not the row's

	cancelled := reserve(t, st, demo, tower, tower.LockerIDs[0], time.Hour)
	cancel(t, st, demo, tower, cancelled)
	expiredRes := reserve(t, st, demo, tower, tower.LockerIDs[1], time.Hour)
	backdate(t, st, expiredRes.ID)
	_, err := st.ExpireReservation(ctx, expiredRes.ID)
	require.NoError(t, err)
	consumed := reserve(t, st, demo, tower, tower.LockerIDs[2], time.Hour)
	usedTok := issueDropoff(t, st, demo, tower.LockerIDs[2]) // consumes the reservation
	useOfUsedTok := useEvents(usedTok, 7, 1, true)
	apply(t, st, tower.ID, useOfUsedTok...)
	expiredTok := issueDropoff(t, st, demo, tower.LockerIDs[3])
	_, err = st.Pool().Exec(ctx, `UPDATE locker_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, expiredTok.ID)
	require.NoError(t, err)
	_, err = st.ExpireToken(ctx, expiredTok.ID)
	require.NoError(t, err)
	ids := []uuid.UUID{cancelled.ID, expiredRes.ID, consumed.ID, usedTok.ID, expiredTok.ID}
	for _, id := range ids {
		closeLongAgo(t, st, id)
	}

	type answer struct {
		Value any
		Err   string
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	type reader struct {
		name string
		read func() answer
	}
	var readers []reader
	for _, r := range []store.Reservation{cancelled, expiredRes, consumed} {
		readers = append(readers,
			reader{"Reservation " + r.ID.String(), func() answer {
				got, err := st.Reservation(ctx, org, r.ID)
				return answer{got, errText(err)}
			}},
			reader{"Reservation of another organization " + r.ID.String(), func() answer {
				got, err := st.Reservation(ctx, other, r.ID)
				return answer{got, errText(err)}
			}},
			reader{"late CancelReservation " + r.ID.String(), func() answer {
				got, ok, err := st.CancelReservation(ctx, org, seed.ClientID, tower.ID, r.LockerID, r.ID)
				return answer{[]any{got, ok}, errText(err)}
			}},
			reader{"late ExpireReservation " + r.ID.String(), func() answer {
				ok, err := st.ExpireReservation(ctx, r.ID)
				return answer{ok, errText(err)}
			}},
		)
	}
	for _, tok := range []store.LockerToken{usedTok, expiredTok} {
		readers = append(readers,
			reader{"Token " + tok.ID.String(), func() answer {
				got, err := st.Token(ctx, org, tok.ID)
				return answer{got, errText(err)}
			}},
			reader{"Token of any organization " + tok.ID.String(), func() answer {
				got, err := st.Token(ctx, 0, tok.ID)
				return answer{got, errText(err)}
			}},
			reader{"Token of another organization " + tok.ID.String(), func() answer {
				got, err := st.Token(ctx, other, tok.ID)
				return answer{got, errText(err)}
			}},
			reader{"late ExpireToken " + tok.ID.String(), func() answer {
				ok, err := st.ExpireToken(ctx, tok.ID)
				return answer{ok, errText(err)}
			}},
		)
	}
	// The replay of a used token's events applies nothing, live or moved.
	readers = append(readers, reader{"replayed use", func() answer {
		res := apply(t, st, tower.ID, useOfUsedTok...)
		return answer{[]any{res.Accepted, res.Duplicates, len(res.Uses)}, ""}
	}})

	before := make([]answer, len(readers))
	for i, r := range readers {
		before[i] = r.read()
	}
	_, _ = moveAll(t, st)
	for _, id := range ids {
		require.Equal(t, "history", where(t, st, id))
	}
	for i, r := range readers {
		assert.Equal(t, before[i], r.read(), r.name)
	}
	assert.Equal(t, "", before[0].Err, "the reservation was read")
}

// A tower that was offline uploads, days later, the use of a token closed and moved since:
// the use is applied exactly as it is to a closed token still live, and recorded once.
func TestLateTokenUseOfMovedToken(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	tower := demo.Towers[0]

	// Two lockers in the same state: a drop-off token issued, then revoked; one token moves.
	outcome := func(move bool, lockerID int64, epoch int64) (store.ApplyResult, string, int) {
		tok := issueDropoff(t, st, demo, lockerID)
		events := useEvents(tok, epoch, 1, false) // the door closed as it was
		_, err := st.Pool().Exec(ctx, `UPDATE locker_tokens SET status = 'revoked' WHERE id = $1`, tok.ID)
		require.NoError(t, err)
		closeLongAgo(t, st, tok.ID)
		if move {
			_, k := moveAll(t, st)
			require.Equal(t, 1, k)
		}
		res := apply(t, st, tower.ID, events...)
		for i := range res.Uses {
			res.Uses[i].TokenID = uuid.Nil
			res.Uses[i].LockerID = 0
			// the anomaly's kind; its text carries each token's own times
			res.Uses[i].Detail, _, _ = strings.Cut(res.Uses[i].Detail, ":")
		}
		got, err := st.Token(ctx, 0, tok.ID)
		require.NoError(t, err)
		again := apply(t, st, tower.ID, events...)
		uses := countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, tok.ID) +
			countRows(t, st, `SELECT count(*) FROM token_use_history WHERE token_id = $1`, tok.ID)
		assert.Empty(t, again.Uses, "a replay applies nothing")
		return res, got.Status, uses
	}
	liveRes, liveStatus, liveUses := outcome(false, tower.LockerIDs[8], 21)
	movedRes, movedStatus, movedUses := outcome(true, tower.LockerIDs[9], 22)
	assert.Equal(t, liveRes, movedRes)
	assert.Equal(t, liveStatus, movedStatus)
	assert.Equal(t, store.TokenUsed, movedStatus)
	assert.Equal(t, 1, liveUses)
	assert.Equal(t, 1, movedUses)
}

// Migration 00037 adds the partitioned history without touching a live row (its months
// reach back to the oldest closed row's); its down
// migration puts the moved rows back into the live tables (with their uses), and the
// foreign key of the open links returns.
func TestReservationTokenHistoryMigration(t *testing.T) {
	t.Parallel()
	st, demo, org, tower := seededTower(t, 0)
	ctx := context.Background()
	r := reserve(t, st, demo, tower, tower.LockerIDs[0], time.Hour)
	cancel(t, st, demo, tower, r)
	tok := issueDropoff(t, st, demo, tower.LockerIDs[1])
	apply(t, st, tower.ID, useEvents(tok, 3, 1, true)...)
	_, err := st.CreateOpenRequest(ctx, store.OpenRequest{ID: uuid.New(), OrgID: org, ClientID: seed.ClientID, Type: store.TokenDropoff,
		TokenID: tok.ID, LockerID: tok.LockerID, TowerID: tower.ID, LocationID: tower.LocationID, ExpiresAt: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	closeLongAgo(t, st, r.ID)
	closeLongAgo(t, st, tok.ID)

	require.NoError(t, store.MigrateTo(ctx, st, 36))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_constraint WHERE conname = 'locker_open_requests_token_id_fkey'`))
	require.NoError(t, store.MigrateTo(ctx, st, 37))
	for _, table := range []string{"reservation_history", "locker_token_history", "token_use_history"} {
		assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_partitioned_table WHERE partrelid = $1::regclass`, table))
		assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_class WHERE relname = $1`, table+"_p"+time.Now().AddDate(0, 0, -2).UTC().Format("200601")),
			"%s: the oldest closed row's month", table)
	}
	assert.Equal(t, "live", where(t, st, r.ID))
	assert.Equal(t, "live", where(t, st, tok.ID))
	_, err = st.Pool().Exec(ctx, `UPDATE locker_open_requests SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	rm, km := moveAll(t, st)
	assert.Equal(t, 1, rm)
	assert.Equal(t, 1, km)
	got, err := st.Reservation(ctx, org, r.ID)
	require.NoError(t, err)
	assert.Equal(t, store.ReservationCancelled, got.Status)

	require.NoError(t, store.MigrateTo(ctx, st, 36))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM reservations WHERE id = $1 AND status = 'cancelled'`, r.ID))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM locker_tokens WHERE id = $1 AND status = 'used'`, tok.ID))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM token_uses WHERE token_id = $1`, tok.ID))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_constraint WHERE conname = 'locker_open_requests_token_id_fkey'`))
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM pg_class WHERE relname = 'reservation_history'`))
	require.NoError(t, store.MigrateTo(ctx, st, 37))
}

// The move's pace on a backlog: batches of 1,000 closed reservations, each a transaction,
// from a live table of 200,000 closed rows and 1,000 active ones.
//
//	go test ./internal/store/ -run '^$' -bench BenchmarkMoveClosedReservations -benchtime 100x
func BenchmarkMoveClosedReservations(b *testing.B) {
	ctx := context.Background()
	st, demo := seeded(b)
	tower := demo.Towers[0]
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO reservations (id, organization_id, client_id, locker_id, tower_id, status, duration_seconds, created_at, expires_at, ended_at)
		SELECT gen_random_uuid(), $1, $2, $3, $4, CASE WHEN i % 200 = 0 THEN 'active' ELSE 'cancelled' END, 60,
		       now() - make_interval(secs => 86400 * 3 + i), now() - make_interval(secs => 86400 * 3 + i - 60),
		       CASE WHEN i % 200 = 0 THEN NULL ELSE now() - make_interval(secs => 86400 * 3 + i - 10) END
		FROM generate_series(1, 201000) i`,
		demo.Credentials.OrganizationID, seed.ClientID, tower.LockerIDs[0], tower.ID)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE reservations`)
	require.NoError(b, err)
	b.ResetTimer()
	moved := 0
	for b.Loop() {
		n, err := st.MoveClosedReservations(ctx, moveAfter, 1000)
		require.NoError(b, err)
		moved += n
	}
	b.ReportMetric(float64(moved)/b.Elapsed().Seconds(), "rows/s")
}
