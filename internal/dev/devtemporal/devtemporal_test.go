package devtemporal_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/dev/devtemporal"
	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/worker"
	"github.com/lockernet/lockernet/workflows/contract"
)

// A reservation made before the dev server stops still expires on time after it restarts:
// the timer lives in the SQLite file, not in memory.
func TestReservationExpiresAcrossServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server twice")
	}
	ctx := context.Background()
	dir := t.TempDir()
	ports := make([]int, 2)
	for i := range ports {
		p, err := pgcluster.FreePort()
		require.NoError(t, err)
		ports[i] = p
	}
	opts := devtemporal.Options{DBPath: filepath.Join(dir, "temporal.db"), Port: ports[0], UIPort: ports[1],
		Namespace: "default", SearchAttributes: contract.SearchAttributeNames, LogFile: filepath.Join(dir, "temporal.log")}

	st, err := store.Open(ctx, testenv.NewDatabase(t), store.Options{MaxConns: 4})
	require.NoError(t, err)
	defer st.Close()
	ring, err := keyring.New(make([]byte, keyring.KeySize))
	require.NoError(t, err)
	res, err := seed.Demo(ctx, st, ring, nil)
	require.NoError(t, err)
	lockerID := res.Towers[0].LockerIDs[0]

	start := func() (*devtemporal.Server, client.Client, context.CancelFunc) {
		srv, err := devtemporal.Start(opts)
		require.NoError(t, err)
		tc, err := temporalclient.Dial(ctx, srv.Address(), "default", slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			_ = worker.Run(wctx, tc, "restart-test", &activities.Activities{Reservations: st}, worker.Options{})
			close(done)
		}()
		return srv, tc, func() { cancel(); <-done; tc.Close(); require.NoError(t, srv.Stop()) }
	}

	_, tc, stop := start()
	// The UI is served too.
	r := testenv.Do(t, "GET", "http://127.0.0.1:"+itoa(ports[1])+"/", "", nil)
	assert.Equal(t, 200, r.Status)

	r1, err := st.ReserveLocker(ctx, store.ReserveParams{ID: uuid.New(), OrgID: res.Credentials.OrganizationID,
		ClientID: seed.ClientID, TowerID: res.Towers[0].ID, LockerID: lockerID, Duration: 4 * time.Second})
	require.NoError(t, err)
	disp := outbox.New(st, tc, "restart-test", slog.New(slog.DiscardHandler))
	item := apiserverReservationItem(t, st, r1)
	dctx, dcancel := context.WithCancel(ctx)
	ddone := make(chan struct{})
	go func() { _ = disp.Run(dctx); close(ddone) }()
	disp.Dispatch(item)
	require.Eventually(t, func() bool {
		_, err := tc.DescribeWorkflowExecution(ctx, contract.ReservationWorkflowID(r1.ID.String()), "")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "workflow started")
	dcancel()
	<-ddone
	stop()

	// While the server is down the reservation lapses; after the restart its timer fires
	// and the workflow writes the expiry back.
	_, _, stop = start()
	defer stop()
	require.Eventually(t, func() bool {
		got, err := st.Reservation(ctx, res.Credentials.OrganizationID, r1.ID)
		return err == nil && got.Status == store.ReservationExpired && got.EndedAt != nil
	}, 60*time.Second, 100*time.Millisecond, "reservation written back as expired")
	var pending int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM lockers WHERE id = $1 AND status = 2`, lockerID).Scan(&pending))
	assert.Zero(t, pending, "locker row released by the workflow")
}

func apiserverReservationItem(t *testing.T, st *store.Store, r store.Reservation) store.OutboxItem {
	t.Helper()
	item := outbox.ReservationItem(r, r.OrganizationID, "", nil)
	id, err := st.EnqueueWorkflow(context.Background(), item, time.Hour)
	require.NoError(t, err)
	item.ID = id
	return item
}

func itoa(i int) string { return strconv.Itoa(i) }
