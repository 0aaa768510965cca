package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/partitions"
	"github.com/lockernet/lockernet/internal/store"
)

// The history tables are partitioned by month; the history loop drops a month past its
// table's retention (its rows with it), keeps the months within it, and creates the months
// ahead. A table without a retention keeps its old months.
func TestHistoryLoopDropsPastRetentionAndCreatesAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.NewDatabase(t), store.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	var tables []string
	rows, err := st.Pool().Query(ctx, `SELECT partrelid::regclass::text FROM pg_partitioned_table ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"gateway_requests", "locker_token_history", "reservation_history", "token_use_history", "tower_events",
		"transactions", "webhook_deliveries", "webhook_events"}, tables)

	now := time.Now().UTC()
	month := func(t time.Time) string { return t.UTC().Format("200601") }
	old := now.AddDate(0, 0, -100)   // a month that ended more than 30 days ago
	recent := now.AddDate(0, 0, -20) // within 30 days
	ahead := now.AddDate(0, partitions.HistoryMonthsAhead, 0)
	for _, table := range []string{store.HistoryTransactions, store.HistoryTowerEvents, store.HistoryGatewayRequests,
		store.HistoryReservations, store.HistoryTokenUses, store.HistoryTokens} {
		_, err := st.EnsurePartitions(ctx, table, old, old)
		require.NoError(t, err)
	}
	var org int64
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO organizations (name) VALUES ('history') RETURNING id`).Scan(&org))
	addTx := func(at time.Time) uuid.UUID {
		id := uuid.New()
		_, err := st.Pool().Exec(ctx, `INSERT INTO transactions (id, organization_id, type, status, created_at) VALUES ($1, $2, 'dropoff', 'completed', $3)`,
			id, org, at)
		require.NoError(t, err)
		return id
	}
	oldTx, recentTx := addTx(old), addTx(recent)
	// A row dated years back lands in the default partition, and goes when past retention.
	strayTx := addTx(now.AddDate(-5, 0, 0))
	// Gateway requests, settled, one made 100 days ago and one 20 days ago.
	var loc, gw int64
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO locations (organization_id, name, lat, lon, address1, city, state, zip, country)
		VALUES ($1, 'l', 0, 0, 'a', 'c', 's', 'z', 'FJ') RETURNING id`, org).Scan(&loc))
	require.NoError(t, st.Pool().QueryRow(ctx, `INSERT INTO gateways (serial, organization_id, location_id, base_url, secret_sealed)
		VALUES ('GW-H', $1, $2, 'http://127.0.0.1:1', 'x') RETURNING id`, org, loc).Scan(&gw))
	addRequest := func(at time.Time) uuid.UUID {
		r, _, err := st.CreateGatewayRequest(ctx, store.NewGatewayRequest{ID: uuid.New(), OrganizationID: org, LocationID: loc,
			GatewayID: gw, GatewaySerial: "GW-H", Kind: "list-lockers", Class: "read", Method: "GET", Path: "/p", GatewayPath: "/lockers"}, nil)
		require.NoError(t, err)
		_, err = st.FinishGatewayRequest(ctx, r.ID, org, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200}, store.GatewaySeenUnknown, false)
		require.NoError(t, err)
		_, err = st.Pool().Exec(ctx, `UPDATE gateway_requests SET created_at = $2 WHERE id = $1`, r.ID, at)
		require.NoError(t, err)
		return r.ID
	}
	oldReq, recentReq := addRequest(old), addRequest(recent)
	// Closed reservations and tokens (with a token's use) moved to the history, one closed 100
	// days ago and one 20 days ago each.
	addClosed := func(at time.Time) uuid.UUID {
		id := uuid.New()
		_, err := st.Pool().Exec(ctx, `INSERT INTO reservation_history (id, organization_id, client_id, locker_id, tower_id, status,
			duration_seconds, created_at, expires_at, ended_at, closed_at) VALUES ($1, $2, 'c', 1, 't', 'expired', 60, $3, $3, $3, $3)`,
			id, org, at)
		require.NoError(t, err)
		_, err = st.Pool().Exec(ctx, `INSERT INTO locker_token_history (id, organization_id, client_id, locker_id, tower_id, type,
			generation, status, created_at, expires_at, used_at, closed_at) VALUES ($1, $2, 'c', 1, 't', 'dropoff', 1, 'used', $3, $3, $3, $3)`,
			id, org, at)
		require.NoError(t, err)
		_, err = st.Pool().Exec(ctx, `INSERT INTO token_use_history (token_id, tower_id, boot_epoch, used_seq, closed_seq, item_inside,
			outcome, closed_at) VALUES ($1, 't', 1, 1, 2, true, 'occupied', $2)`, id, at)
		require.NoError(t, err)
		return id
	}
	oldClosed, recentClosed := addClosed(old), addClosed(recent)

	reg := prometheus.NewRegistry()
	m := maintenance.NewMetrics(reg)
	reg.MustRegister(partitions.NewHistoryCollector(st, slog.New(slog.DiscardHandler)))
	keep := maintenance.HistoryRetention(config.Retention{Transactions: config.MinRetention, WebhookEvents: config.MinRetention,
		GatewayRequests: config.MinRetention, Reservations: config.MinRetention, Tokens: config.MinRetention})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		maintenance.Run(runCtx, m, slog.New(slog.DiscardHandler), maintenance.HistoryPartitions(time.Hour, st, slog.New(slog.DiscardHandler), keep))
		close(done)
	}()
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.Runs("history_partitions")) == 1 }, 30*time.Second, 50*time.Millisecond)
	cancel()
	<-done
	assert.Zero(t, testutil.ToFloat64(m.Errors("history_partitions")))

	exists := func(name string) bool {
		var ok bool
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok))
		return ok
	}
	assert.False(t, exists("transactions_p"+month(old)), "the month past retention is dropped")
	assert.False(t, exists("gateway_requests_p"+month(old)), "the gateway requests' month past retention is dropped")
	assert.True(t, exists("gateway_requests_p"+month(recent)), "a gateway requests' month within retention stays")
	_, err = st.GatewayRequestByID(ctx, oldReq)
	assert.ErrorIs(t, err, store.ErrNotFound, "the request went with its month")
	_, err = st.GatewayRequestByID(ctx, recentReq)
	assert.NoError(t, err, "the recent request stays")
	assert.True(t, exists("transactions_p"+month(recent)), "a month within retention stays")
	assert.True(t, exists("tower_events_p"+month(old)), "tower events have no retention here: kept")
	for _, table := range store.HistoryTables {
		assert.True(t, exists(table+"_p"+month(ahead)), "%s: the month %d ahead is created", table, partitions.HistoryMonthsAhead)
	}
	count := func(id uuid.UUID) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM transactions WHERE id = $1`, id).Scan(&n))
		return n
	}
	assert.Zero(t, count(oldTx))
	assert.Equal(t, 1, count(recentTx))
	assert.Zero(t, count(strayTx), "the default partition's rows past retention are deleted")
	for _, table := range []string{store.HistoryReservations, store.HistoryTokenUses, store.HistoryTokens} {
		assert.False(t, exists(table+"_p"+month(old)), "%s: the month past retention is dropped", table)
		assert.True(t, exists(table+"_p"+month(recent)), "%s: a month within retention stays", table)
	}
	closedRows := func(id uuid.UUID) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM reservation_history WHERE id = $1)
			+ (SELECT count(*) FROM locker_token_history WHERE id = $1) + (SELECT count(*) FROM token_use_history WHERE token_id = $1)`,
			id).Scan(&n))
		return n
	}
	assert.Zero(t, closedRows(oldClosed), "the reservation, the token and its use went with their month")
	assert.Equal(t, 3, closedRows(recentClosed))

	// The metrics: each table's size, partitions, oldest partition, and how far ahead.
	out, err := testutil.CollectAndFormat(partitions.NewHistoryCollector(st, slog.New(slog.DiscardHandler)), expfmt.TypeTextPlain,
		"lockernet_history_oldest_partition_age_seconds", "lockernet_history_ahead_seconds", "lockernet_history_bytes")
	require.NoError(t, err)
	for _, table := range store.HistoryTables {
		assert.Contains(t, string(out), `lockernet_history_bytes{table="`+table+`"}`)
		assert.Contains(t, string(out), `lockernet_history_ahead_seconds{table="`+table+`"}`)
	}
	stats, err := st.HistoryStats(ctx, store.HistoryTransactions)
	require.NoError(t, err)
	require.NotEmpty(t, stats.Partitions)
	assert.Equal(t, month(recent), stats.Partitions[0].Month.Format("200601"), "the oldest month left")
	assert.True(t, strings.HasPrefix(stats.Partitions[len(stats.Partitions)-1].Name, "transactions_p"+month(ahead)))
}
