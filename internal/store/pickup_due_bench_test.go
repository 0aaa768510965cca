package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/lockernet/lockernet/internal/store"
)

// BenchmarkMarkDuePickupWindows measures the due pass alone on Postgres (no Temporal, no
// workflow steps beside it): n open windows of one organization with one endpoint for
// parcel.overdue, all past their end, marked as the worker's pass marks them (parallel
// transactions of a batch each, until none is left). It reports the time to the last commit
// and the marks per second: the floor under the bench's "windows" scenario, and the figures
// behind the worker's batch size (maintenance.PickupDue; docs/benchmarks.md).
//
//	go test ./internal/store -run '^$' -bench MarkDuePickupWindows -benchtime 3x
func BenchmarkMarkDuePickupWindows(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		for _, shape := range []struct{ batch, parallel int }{{500, 4}, {2500, 4}, {5000, 2}} {
			b.Run(fmt.Sprintf("windows=%d/batch=%d/parallel=%d", n, shape.batch, shape.parallel), func(b *testing.B) {
				benchDuePass(b, n, shape.batch, shape.parallel)
			})
		}
	}
}

func benchDuePass(b *testing.B, n, batch, parallel int) {
	st, demo := seeded(b)
	ctx := context.Background()
	org := demo.Credentials.OrganizationID
	tower := demo.Towers[0]
	_, err := st.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{OrgID: org, URL: "http://127.0.0.1:9/",
		EventTypes: []string{"parcel.overdue"}, Enabled: true, SecretSealed: []byte("s")})
	require.NoError(b, err)
	// n lockers of the tower beside the demo's, each with an open window past its end.
	_, err = st.Pool().Exec(ctx, `
		INSERT INTO lockers (tower_id, location_id, organization_id, name, locker_type_id, is_low_locker)
		SELECT t.id, t.location_id, t.organization_id, 'due-' || g, (SELECT locker_type_id FROM lockers WHERE id = $2), false
		FROM towers t, generate_series(1, $3) g WHERE t.id = $1`, tower.ID, tower.LockerIDs[0], n)
	require.NoError(b, err)
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		_, err := st.Pool().Exec(ctx, `DELETE FROM pickup_windows`)
		require.NoError(b, err)
		_, err = st.Pool().Exec(ctx, `
			INSERT INTO pickup_windows (id, organization_id, location_id, tower_id, locker_id, client_id, dropoff_token_id,
			                            opened_at, pickup_by, window_seconds, reminder_offsets_seconds, max_extensions,
			                            extension_seconds, on_expiry)
			SELECT gen_random_uuid(), k.organization_id, k.location_id, k.tower_id, k.id, 'bench', gen_random_uuid(),
			       now() - interval '1 minute', now() - interval '1 second', 59, '{}', 0, 0, 'notify'
			FROM lockers k WHERE k.name LIKE 'due-%'`)
		require.NoError(b, err)
		b.StartTimer()
		start := time.Now()
		var g errgroup.Group
		for range parallel {
			g.Go(func() error {
				for {
					marked, err := st.MarkDuePickupWindows(ctx, batch)
					if err != nil || len(marked) < batch {
						return err
					}
				}
			})
		}
		require.NoError(b, g.Wait())
		took += time.Since(start)
	}
	var left int
	require.NoError(b, st.Pool().QueryRow(ctx, `SELECT count(*) FROM pickup_windows WHERE status = 'open'`).Scan(&left))
	require.Zero(b, left)
	b.ReportMetric(float64(n)/(took.Seconds()/float64(b.N)), "marks/s")
}
