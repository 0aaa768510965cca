package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

func TestClosestLocationAcrossTheAntimeridian(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	both := ensureOrg(t, st, "Both sides")
	westOnly := ensureOrg(t, st, "West side only")
	addTowerLocation(t, st, both.ID, "East", "00000000000000e1", 0, 179.95)
	addTowerLocation(t, st, both.ID, "West", "00000000000000f1", 0, -179.95)
	addTowerLocation(t, st, westOnly.ID, "West", "00000000000000f2", 0, -179.95)

	cases := []struct {
		name     string
		org      int64
		lat, lon float64
		radius   float64
		want     string
		km       float64
	}{
		{"from the east side, the east location", both.ID, 0, 179.99, 20, "East", 4.448},
		{"from the west side, the west location", both.ID, 0, -179.99, 20, "West", 4.448},
		{"across the antimeridian from the east", westOnly.ID, 0, 179.99, 20, "West", 6.672},
		{"across the antimeridian from the west", both.ID, 0, -179.90, 20, "West", 5.560},
		{"on the antimeridian", westOnly.ID, 0, 180, 20, "West", 5.560},
		{"on the antimeridian, written -180", westOnly.ID, 0, -180, 20, "West", 5.560},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := st.ClosestLocation(ctx, tc.org, tc.lat, tc.lon, tc.radius)
			require.NoError(t, err)
			assert.Equal(t, tc.want, l.Name)
			assert.InDelta(t, tc.km, l.DistanceKm, 0.01)
		})
	}

	t.Run("a radius short of the other side finds nothing", func(t *testing.T) {
		_, err := st.ClosestLocation(ctx, westOnly.ID, 0, 179.99, 6)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
	t.Run("another organization's locations are never found", func(t *testing.T) {
		other := ensureOrg(t, st, "Nobody here")
		_, err := st.ClosestLocation(ctx, other.ID, 0, 179.99, 20)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
	t.Run("in-area does not wrap", func(t *testing.T) {
		locs, err := st.LocationsInArea(ctx, both.ID, store.Box{MinLat: -1, MinLon: 179, MaxLat: 1, MaxLon: 180})
		require.NoError(t, err)
		require.Len(t, locs, 1)
		assert.Equal(t, "East", locs[0].Name)
	})
}

// explainDB answers every query by EXPLAINing it on the pool and recording the plan.
type explainDB struct {
	store.DBTX
	plans *[]string
}

var errExplained = errors.New("explained, not run")

func (d explainDB) explain(ctx context.Context, sql string, args ...any) {
	rows, err := d.DBTX.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		*d.plans = append(*d.plans, "EXPLAIN failed: "+err.Error())
		return
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		*d.plans = append(*d.plans, "EXPLAIN failed: "+err.Error())
		return
	}
	*d.plans = append(*d.plans, strings.Join(lines, "\n"))
}

func (d explainDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	d.explain(ctx, sql, args...)
	return nil, errExplained
}

func (d explainDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	d.explain(ctx, sql, args...)
	return errRow{}
}

func (d explainDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errExplained
}

type errRow struct{}

func (errRow) Scan(...any) error { return errExplained }

func TestGeoQueriesUseTheIndex(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	org := ensureOrg(t, st, "Worldwide")
	// ~5,000 locations spread over the world, every tenth with a tower.
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO locations (organization_id, name, lat, lon, address1, city, state, zip, country)
		SELECT $1, 'loc ' || g, -80 + 160 * random(), -180 + 360 * random(), 'a', 'c', 's', 'z', 'XX'
		FROM generate_series(1, 5000) g`, org.ID)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `
		INSERT INTO towers (id, organization_id, location_id, name, secret_sealed)
		SELECT lpad(to_hex(id), 16, '0'), organization_id, id, 'tower', '\x00'
		FROM locations WHERE id % 10 = 0`)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	var plans []string
	x := store.WithDB(st, explainDB{DBTX: st.Pool(), plans: &plans})

	_, err = x.LocationsInArea(ctx, org.ID, store.Box{MinLat: 33.9, MinLon: -118.6, MaxLat: 34.2, MaxLon: -118.1})
	require.ErrorIs(t, err, errExplained)
	_, err = x.ClosestLocation(ctx, org.ID, 34.05, -118.24, 20)
	require.ErrorIs(t, err, errExplained)
	_, err = x.ClosestLocation(ctx, org.ID, 0, 179.99, 20) // two boxes
	require.ErrorIs(t, err, errExplained)

	require.Len(t, plans, 3)
	for i, name := range []string{"in-area", "closest", "closest across the antimeridian"} {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, plans[i], "locations_position", "plan:\n%s", plans[i])
			assert.NotRegexp(t, `Seq Scan on locations\b`, plans[i], "plan:\n%s", plans[i])
		})
	}
}
