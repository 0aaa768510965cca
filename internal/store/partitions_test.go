package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// Migration 00021 turns the history tables into partitioned ones without losing a row (a
// delivery takes its event's created_at), and its down migration turns them back.
func TestHistoryPartitionMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	require.NoError(t, store.MigrateTo(ctx, st, 20))
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := st.Pool().Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	var partitioned int
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	partitioned = count(`SELECT count(*) FROM pg_partitioned_table`)
	require.Zero(t, partitioned, "down to 20: plain tables")

	var org, loc int64
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO organizations (name) VALUES ('m') RETURNING id`).Scan(&org))
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO locations (organization_id, name, lat, lon, address1, city, state, zip, country)
		VALUES ($1, 'l', 0, 0, 'a', 'c', 's', 'z', 'FJ') RETURNING id`, org).Scan(&loc))
	exec(`INSERT INTO towers (id, organization_id, location_id, name, secret_sealed) VALUES ('00000000000000aa', $1, $2, 't', 'x')`, org, loc)
	old := time.Now().AddDate(0, -3, 0).UTC().Truncate(time.Microsecond)
	exec(`INSERT INTO tower_events (tower_id, boot_epoch, seq, kind, tower_time, locker_id, generation)
		VALUES ('00000000000000aa', 1, 1, 'door_opened', $1, 1, 1), ('00000000000000aa', 1, 2, 'door_closed', now(), 1, 1)`, old)
	exec(`INSERT INTO transactions (id, organization_id, type, status, created_at, request_id) VALUES ($1, $2, 'dropoff', 'completed', $3, $4)`,
		uuid.New(), org, old, uuid.New())
	ep, ev := uuid.New(), uuid.New()
	exec(`INSERT INTO webhook_endpoints (id, organization_id, url, secret_sealed) VALUES ($1, $2, 'https://example.com/', 'x')`, ep, org)
	exec(`INSERT INTO webhook_events (id, organization_id, type, data, created_at) VALUES ($1, $2, 'webhook.test', '{}', $3)`, ev, org, old)
	exec(`INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, created_at) VALUES ($1, $2, $3, $4, now())`,
		uuid.New(), ep, ev, org)

	require.NoError(t, store.MigrateTo(ctx, st, 21))
	assert.Equal(t, 4, count(`SELECT count(*) FROM pg_partitioned_table`))
	assert.Equal(t, 2, count(`SELECT count(*) FROM tower_events`))
	assert.Equal(t, 1, count(`SELECT count(*) FROM transactions`))
	assert.Equal(t, 1, count(`SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id AND e.created_at = d.created_at`),
		"the delivery has its event's created_at")
	month := old.Format("200601")
	for _, p := range []string{"tower_events_p", "transactions_p", "webhook_events_p", "webhook_deliveries_p"} {
		assert.Equal(t, 1, count(`SELECT count(*) FROM pg_class WHERE relname = $1`, p+month), "%s%s: the oldest row's month", p, month)
	}
	assert.Equal(t, 1, count(`SELECT count(*) FROM tower_events_p`+month))
	// A replayed tower event is still a duplicate.
	tag, err := st.Pool().Exec(ctx, `INSERT INTO tower_events (tower_id, boot_epoch, seq, kind, tower_time, locker_id, generation)
		VALUES ('00000000000000aa', 1, 1, 'door_opened', $1, 1, 1) ON CONFLICT DO NOTHING`, old)
	require.NoError(t, err)
	assert.Zero(t, tag.RowsAffected())

	require.NoError(t, store.MigrateTo(ctx, st, 20))
	assert.Zero(t, count(`SELECT count(*) FROM pg_partitioned_table`))
	assert.Equal(t, 2, count(`SELECT count(*) FROM tower_events`))
	assert.Equal(t, 1, count(`SELECT count(*) FROM webhook_deliveries`))
	require.NoError(t, store.MigrateTo(ctx, st, 21))
}
