package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

func TestPoolCollectorShowsAcquiredConnections(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(st.PoolCollector())
	conn, err := st.Pool().Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()

	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metrics:
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if labels[lp.GetName()] != lp.GetValue() {
						continue metrics
					}
				}
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	assert.Equal(t, 4.0, gauge("lockernet_db_pool_max_connections", nil), "the pool's size (MaxConns 4)")
	assert.Equal(t, 1.0, gauge("lockernet_db_pool_connections", map[string]string{"state": "acquired"}))
	assert.GreaterOrEqual(t, gauge("lockernet_db_pool_acquires_total", nil), 1.0)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 8, n, "max, three connection states and four counters")
}

func TestExpiryBacklogCountsHoldsPastExpiry(t *testing.T) {
	t.Parallel()
	st, _ := seeded(t)
	ctx := context.Background()
	n, oldest, err := st.ExpiryBacklog(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a fresh system has nothing overdue")
	assert.Zero(t, oldest)

	// Two reserved lockers: one whose hold lapsed ten minutes ago without being written
	// back, one still held for an hour.
	_, err = st.Pool().Exec(ctx, `
		UPDATE lockers SET status = $1, hold_expires_at = now() + CASE WHEN id = (SELECT min(id) FROM lockers)
		    THEN interval '-10 minutes' ELSE interval '1 hour' END
		WHERE id IN (SELECT id FROM lockers ORDER BY id LIMIT 2)`, store.StatusReserved)
	require.NoError(t, err)
	n, oldest, err = st.ExpiryBacklog(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.GreaterOrEqual(t, oldest, 10*time.Minute)
	assert.Less(t, oldest, 11*time.Minute)
}

func TestGatewaysLastSeen(t *testing.T) {
	t.Parallel()
	st, res := seeded(t)
	ctx := context.Background()
	for _, serial := range []string{"GW-0001", "GW-0002"} {
		_, err := st.UpsertGateway(ctx, store.NewGateway{Serial: serial, LocationID: res.GatewayLocationID[serial],
			BaseURL: "http://127.0.0.1:1", SecretSealed: []byte("sealed")})
		require.NoError(t, err)
	}
	_, err := st.Pool().Exec(ctx, `UPDATE gateways SET last_seen_at = now() - interval '30 seconds' WHERE serial = 'GW-0001'`)
	require.NoError(t, err)

	seen, err := st.GatewaysLastSeen(ctx)
	require.NoError(t, err)
	require.Len(t, seen, 2)
	assert.Equal(t, "GW-0001", seen[0].Serial)
	assert.Equal(t, res.GatewayLocationID["GW-0001"], seen[0].LocationID)
	assert.WithinDuration(t, time.Now().Add(-30*time.Second), seen[0].LastSeen, 5*time.Second)
	assert.Equal(t, "GW-0002", seen[1].Serial)
	assert.Equal(t, time.Unix(0, 0).UTC(), seen[1].LastSeen.UTC(), "never seen")

	_, err = st.Pool().Exec(ctx, `UPDATE gateways SET disabled_at = now() WHERE serial = 'GW-0002'`)
	require.NoError(t, err)
	seen, err = st.GatewaysLastSeen(ctx)
	require.NoError(t, err)
	require.Len(t, seen, 1, "a disabled gateway is not watched")
}
