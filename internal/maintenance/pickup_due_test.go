package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/store"
)

// One pass of the due pass, begun before two windows end within its interval, marks each
// when it ends (never before) and hands off each round's delivery starts after the round;
// a window ending after the interval is left to the next pass.
func TestPickupDuePassWaitsForEndsWithinItsInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seeded := testenv.NewSeeded(ctx, t, store.Options{MaxConns: 4})
	st, demo := seeded.Store, seeded.Demo
	org := demo.Credentials.OrganizationID
	taken := &testenv.HandedOff{}
	st.HandOffEvents(taken, time.Hour)
	_, err := st.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{ID: uuid.New(), OrgID: org, URL: "http://127.0.0.1:9/",
		EventTypes: []string{"parcel.overdue"}, Enabled: true, SecretSealed: []byte("s")})
	require.NoError(t, err)

	// Three windows on the demo tower's first lockers, ending 0.4 s, 0.8 s and 3 s from now
	// by the database's clock.
	lockers := demo.Towers[0].LockerIDs[:3]
	rows, err := st.Pool().Query(ctx, `
		INSERT INTO pickup_windows (id, organization_id, location_id, tower_id, locker_id, client_id, dropoff_token_id,
		                            opened_at, pickup_by, window_seconds, reminder_offsets_seconds, max_extensions,
		                            extension_seconds, on_expiry)
		SELECT gen_random_uuid(), k.organization_id, k.location_id, k.tower_id, k.id, 'test', gen_random_uuid(),
		       clock_timestamp(), clock_timestamp() + make_interval(secs => e.secs), 60, '{}', 0, 0, 'notify'
		FROM unnest($1::bigint[], $2::float8[]) AS e (locker, secs) JOIN lockers k ON k.id = e.locker
		RETURNING id`, lockers, []float64{0.4, 0.8, 3})
	require.NoError(t, err)
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, 3)

	require.NoError(t, maintenance.PickupDue(time.Second, st).Pass(ctx))
	for i, id := range ids {
		var status string
		var events int
		var early bool
		require.NoError(t, st.Pool().QueryRow(ctx, `
			SELECT w.status, count(e.id), coalesce(bool_or(e.created_at < w.pickup_by), false)
			FROM pickup_windows w LEFT JOIN webhook_events e ON e.type = 'parcel.overdue' AND e.data->'window'->>'id' = w.id::text
			WHERE w.id = $1 GROUP BY w.status`, id).Scan(&status, &events, &early))
		want, wantEvents := store.WindowOverdue, 1
		if i == 2 {
			want, wantEvents = store.WindowOpen, 0
		}
		assert.Equal(t, want, status, "window %d", i)
		assert.Equal(t, wantEvents, events, "window %d: its parcel.overdue events", i)
		assert.False(t, early, "window %d marked before its end", i)
	}
	assert.Len(t, taken.Take(), 2, "each marked window's delivery start handed off")
}
