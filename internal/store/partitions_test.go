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

// execSQL runs a statement and requires it to succeed.
func execSQL(t *testing.T, st *store.Store, sql string, args ...any) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// insertOrgLocation inserts an organization and a location of it with plain SQL (the schema
// of any migration has both), and returns their ids.
func insertOrgLocation(t *testing.T, st *store.Store) (org, loc int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO organizations (name) VALUES ('m') RETURNING id`).Scan(&org))
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO locations (organization_id, name, lat, lon, address1, city, state, zip, country)
		VALUES ($1, 'l', 0, 0, 'a', 'c', 's', 'z', 'FJ') RETURNING id`, org).Scan(&loc))
	return org, loc
}

// Migration 00021 turns the history tables into partitioned ones without losing a row (a
// delivery takes its event's created_at), and its down migration turns them back.
func TestHistoryPartitionMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	require.NoError(t, store.MigrateTo(ctx, st, 20))
	var partitioned int
	partitioned = countRows(t, st, `SELECT count(*) FROM pg_partitioned_table`)
	require.Zero(t, partitioned, "down to 20: plain tables")

	org, loc := insertOrgLocation(t, st)
	execSQL(t, st, `INSERT INTO towers (id, organization_id, location_id, name, secret_sealed) VALUES ('00000000000000aa', $1, $2, 't', 'x')`, org, loc)
	old := time.Now().AddDate(0, -3, 0).UTC().Truncate(time.Microsecond)
	execSQL(t, st, `INSERT INTO tower_events (tower_id, boot_epoch, seq, kind, tower_time, locker_id, generation)
		VALUES ('00000000000000aa', 1, 1, 'door_opened', $1, 1, 1), ('00000000000000aa', 1, 2, 'door_closed', now(), 1, 1)`, old)
	execSQL(t, st, `INSERT INTO transactions (id, organization_id, type, status, created_at, request_id) VALUES ($1, $2, 'dropoff', 'completed', $3, $4)`,
		uuid.New(), org, old, uuid.New())
	ep, ev := uuid.New(), uuid.New()
	execSQL(t, st, `INSERT INTO webhook_endpoints (id, organization_id, url, secret_sealed) VALUES ($1, $2, 'https://example.com/', 'x')`, ep, org)
	execSQL(t, st, `INSERT INTO webhook_events (id, organization_id, type, data, created_at) VALUES ($1, $2, 'webhook.test', '{}', $3)`, ev, org, old)
	execSQL(t, st, `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, created_at) VALUES ($1, $2, $3, $4, now())`,
		uuid.New(), ep, ev, org)

	require.NoError(t, store.MigrateTo(ctx, st, 21))
	assert.Equal(t, 4, countRows(t, st, `SELECT count(*) FROM pg_partitioned_table`))
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM tower_events`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM transactions`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id AND e.created_at = d.created_at`),
		"the delivery has its event's created_at")
	month := old.Format("200601")
	for _, p := range []string{"tower_events_p", "transactions_p", "webhook_events_p", "webhook_deliveries_p"} {
		assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_class WHERE relname = $1`, p+month), "%s%s: the oldest row's month", p, month)
	}
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM tower_events_p`+month))
	// A replayed tower event is still a duplicate.
	tag, err := st.Pool().Exec(ctx, `INSERT INTO tower_events (tower_id, boot_epoch, seq, kind, tower_time, locker_id, generation)
		VALUES ('00000000000000aa', 1, 1, 'door_opened', $1, 1, 1) ON CONFLICT DO NOTHING`, old)
	require.NoError(t, err)
	assert.Zero(t, tag.RowsAffected())

	require.NoError(t, store.MigrateTo(ctx, st, 20))
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM pg_partitioned_table`))
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM tower_events`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM webhook_deliveries`))
	require.NoError(t, store.MigrateTo(ctx, st, 21))
}

// Migration 00036 turns gateway_requests into a partitioned table without losing a request,
// its outcome or the idempotency key standing for it; every request keeps its id claim, so it
// is found by id and its id stays taken. Its down migration turns it back.
func TestGatewayRequestPartitionMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	require.NoError(t, store.MigrateTo(ctx, st, 35))
	org, loc := insertOrgLocation(t, st)
	var gw int64
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO gateways (serial, organization_id, location_id, base_url, secret_sealed)
		VALUES ('GW-M', $1, $2, 'http://127.0.0.1:1', 'x') RETURNING id`, org, loc).Scan(&gw))
	old := time.Now().AddDate(0, -3, 0).UTC().Truncate(time.Microsecond)
	oldID, openID := uuid.New(), uuid.New()
	execSQL(t, st, `INSERT INTO gateway_requests (id, organization_id, location_id, gateway_id, gateway_serial, kind, class, method, path,
		gateway_path, status, created_at, completed_at, http_status, response_body)
		VALUES ($1, $2, $3, $4, 'GW-M', 'list-lockers', 'read', 'GET', '/p', '/lockers', 'completed', $5, $5, 200, 'answer')`,
		oldID, org, loc, gw, old)
	execSQL(t, st, `INSERT INTO gateway_requests (id, organization_id, location_id, gateway_id, gateway_serial, kind, class, method, path,
		gateway_path) VALUES ($1, $2, $3, $4, 'GW-M', 'open-locker', 'hardware', 'POST', '/p', '/lockers/1/open')`, openID, org, loc, gw)
	execSQL(t, st, `INSERT INTO gateway_idempotency_keys (organization_id, key, request_hash, request_id, expires_at)
		VALUES ($1, 'k', 'h', $2, now() + interval '1 day')`, org, openID)

	require.NoError(t, store.MigrateTo(ctx, st, 36))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM pg_partitioned_table WHERE partrelid = 'gateway_requests'::regclass`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM gateway_requests_p`+old.Format("200601")), "the oldest request's month")
	r, err := st.GatewayRequestByID(ctx, oldID)
	require.NoError(t, err)
	assert.Equal(t, []byte("answer"), r.Outcome.Body)
	assert.True(t, r.CreatedAt.Equal(old))
	_, err = st.GatewayRequest(ctx, org, openID)
	require.NoError(t, err)
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM gateway_idempotency_keys WHERE request_id = $1`, openID))
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM gateway_request_ids`))
	// An id is still taken, whatever month a new request would go to.
	_, err = st.Pool().Exec(ctx, `INSERT INTO gateway_request_ids (id, created_at) VALUES ($1, now())`, oldID)
	assert.ErrorIs(t, store.Translate(err), store.ErrConflict)

	require.NoError(t, store.MigrateTo(ctx, st, 35))
	assert.Zero(t, countRows(t, st, `SELECT count(*) FROM pg_partitioned_table WHERE partrelid = 'gateway_requests'::regclass`))
	assert.Equal(t, 2, countRows(t, st, `SELECT count(*) FROM gateway_requests`))
	assert.Equal(t, 1, countRows(t, st, `SELECT count(*) FROM gateway_idempotency_keys`))
	require.NoError(t, store.MigrateTo(ctx, st, 36))
	_, err = st.GatewayRequestByID(ctx, openID)
	require.NoError(t, err)
}
