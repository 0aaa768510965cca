package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// End to end with the tower simulator playing Harbor's SDK and a tower over DESIGN §4.8:
// sessions with claims, the handshake, commands pulled and applied, events uploaded.
func TestSDKFlowWithSimulator(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	sim := e.TowerSim(t)
	ctx := context.Background()
	tok := demoToken(t, e)
	tower := towerUnion2
	require.NoError(t, sim.Prepare(ctx, tower, towersim.DefaultClaim, ""), "the phone was online once")

	open := func(tk towerTokenResp, claim string, withItem bool) towersim.OpenResponse {
		t.Helper()
		res, err := sim.Open(ctx, tower, towersim.OpenRequest{Payload: tk.Payload, PayloadAuth: tk.PayloadAuth, Claim: claim, CloseWithItem: &withItem})
		require.NoError(t, err)
		return res
	}
	refusal := func(res towersim.OpenResponse) string {
		if res.Error == nil {
			return ""
		}
		return *res.Error
	}

	t.Run("delivery session: drop-off, events, occupied; pickup", func(t *testing.T) {
		k := lockerID(t, e, tower, smallHigh)
		drop := lcMustIssue(t, e, tok, "dropoff", tower, k, 300)
		// A sync_packet session cannot open.
		res := open(drop, towerproto.ClaimSyncPacket, true)
		assert.False(t, res.Opened)
		assert.Equal(t, "not_permitted", refusal(res))
		assert.Positive(t, res.CommandsApplied, "the session synced first: the new possession's generation floor")
		assert.Equal(t, 1, res.EventsPending, "the tower's sync_commands report waits for the next upload")
		assert.Equal(t, "rented", lockerStatusName(t, e, tok, tower, k))
		// A pickup session cannot use a drop-off token either.
		res = open(drop, towerproto.ClaimLockerPickup, true)
		assert.Equal(t, "not_permitted", refusal(res))

		res = open(drop, towerproto.ClaimLockerDelivery, true)
		require.True(t, res.Opened, "refused: %s %s", refusal(res), res.Detail)
		assert.Empty(t, res.UploadError)
		assert.Empty(t, res.SyncError)
		assert.Equal(t, 4, res.EventsUploaded, "the sync report, token_used, door_opened, door_closed")
		assert.Equal(t, "occupied", lockerStatusName(t, e, tok, tower, k))

		pick := lcMustIssue(t, e, tok, "pickup", tower, k, 300)
		assert.Equal(t, "not_permitted", refusal(open(pick, towerproto.ClaimLockerDelivery, false)))
		res = open(pick, towerproto.ClaimLockerPickup, false)
		require.True(t, res.Opened, "refused: %s %s", refusal(res), res.Detail)
		assert.Equal(t, "available", lockerStatusName(t, e, tok, tower, k))
	})

	t.Run("a token of an ended possession is refused after one sync", func(t *testing.T) {
		k := lockerID(t, e, tower, smallHigh+1)
		stale := lcMustIssue(t, e, tok, "dropoff", tower, k, 600)
		// The operator takes the locker out of service and back: the possession ended, the
		// token is revoked in the cloud, and no newer token was ever shown to the tower.
		require.NoError(t, e.Store.WithTx(ctx, func(tx *store.Store) error {
			_, err := tx.SetOutOfService(ctx, tower, k, "broken hinge", false)
			return err
		}))
		// One sync through any phone (here a sync_packet session in the background).
		_, applied, err := sim.SyncTower(ctx, tower, "")
		require.NoError(t, err)
		assert.Positive(t, applied)
		tw, _ := sim.Tower(tower)
		assert.True(t, lockerOf(tw, k).OutOfService)
		res, err := sim.Open(ctx, tower, towersim.OpenRequest{Payload: stale.Payload, PayloadAuth: stale.PayloadAuth, Offline: true})
		require.NoError(t, err)
		assert.Equal(t, "out_of_service", refusal(res), "the tower knows, though offline now")

		require.NoError(t, e.Store.WithTx(ctx, func(tx *store.Store) error {
			_, err := tx.SetInService(ctx, tower, k)
			return err
		}))
		_, _, err = sim.SyncTower(ctx, tower, "")
		require.NoError(t, err)
		assert.False(t, lockerOf(tw, k).OutOfService)
		res, err = sim.Open(ctx, tower, towersim.OpenRequest{Payload: stale.Payload, PayloadAuth: stale.PayloadAuth, Offline: true})
		require.NoError(t, err)
		assert.Equal(t, "stale_generation", refusal(res), "back in service, the old possession's token stays dead")
		assert.Equal(t, "available", lockerStatusName(t, e, tok, tower, k))

		// The next customer's token opens.
		fresh := lcMustIssue(t, e, tok, "dropoff", tower, k, 600)
		res = open(fresh, towerproto.ClaimLockerDelivery, true)
		require.True(t, res.Opened, "refused: %s %s", refusal(res), res.Detail)
	})

	t.Run("replayed event uploads change nothing", func(t *testing.T) {
		k := lockerID(t, e, tower, mediumHigh)
		drop := lcMustIssue(t, e, tok, "dropoff", tower, k, 600)
		res := open(drop, "", true)
		require.True(t, res.Opened)
		tw, _ := sim.Tower(tower)
		var uploaded []towersim.LoggedEvent
		for _, ev := range tw.Events() {
			if ev.Uploaded {
				uploaded = append(uploaded, ev)
			}
		}
		require.NotEmpty(t, uploaded)
		before := lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k)
		secret := lcDemoTower(t, e, tower).Secret
		for range 2 {
			var envs []towerproto.BatchEnvelope
			for _, ev := range uploaded {
				env, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: tower, BootEpoch: ev.BootEpoch, Events: []towerproto.Event{ev.Event}}, towerproto.EventKey(secret))
				require.NoError(t, err)
				envs = append(envs, env)
			}
			for i := 0; i < len(envs); i += 5 {
				r := e.Do(http.MethodPost, "/sdk/v1/towers/"+tower+"/events", demoToken(t, e), envs[i:min(i+5, len(envs))])
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				assert.EqualValues(t, 0, r.Map(t)["accepted"])
			}
		}
		assert.Equal(t, before, lcCount(t, e, `SELECT count(*) FROM transactions WHERE locker_id = $1`, k))
		assert.Equal(t, "occupied", lockerStatusName(t, e, tok, tower, k))
	})

	t.Run("a reset tower learns its configuration", func(t *testing.T) {
		require.NoError(t, sim.ResetEvents(ctx, tower, towerproto.ClaimTechnician, "flash wear", ""))
		resets, err := e.Store.EventsResets(ctx, tower, 5)
		require.NoError(t, err)
		require.NotEmpty(t, resets)
		assert.Equal(t, "flash wear", resets[0].Reason)
		err = sim.ResetEvents(ctx, tower, towerproto.ClaimLockerDelivery, "not allowed", "")
		assert.Equal(t, "not_permitted", towersim.RefusalCode(err))

		// A factory-new tower with the same secret: it knows nothing, and the log has moved on.
		fresh := newSimTower(t, e, tower)
		_, applied, err := fresh.SyncTower(ctx, tower, "")
		require.NoError(t, err)
		assert.Positive(t, applied, "the configuration, then the log")
		tw, _ := fresh.Tower(tower)
		for _, l := range tw.Status().Lockers {
			var gen int32
			require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT generation FROM lockers WHERE id = $1`, l.LockerID).Scan(&gen))
			assert.EqualValues(t, gen, l.Generation, "locker %d", l.LockerID)
		}
	})
}

func lockerOf(tw *towersim.Tower, id int64) towersim.LockerStatus {
	for _, l := range tw.Status().Lockers {
		if l.LockerID == id {
			return l
		}
	}
	return towersim.LockerStatus{}
}

// newSimTower is a second simulator holding one demo tower with fresh state.
func newSimTower(t *testing.T, e *testenv.Env, id string) *towersim.Simulator {
	t.Helper()
	tw := lcDemoTower(t, e, id)
	cfg := towersim.Config{APIBaseURL: e.URL, ClientID: e.Creds.ServiceProvider.ClientID, ClientSecret: e.Creds.ServiceProvider.ClientSecret,
		StateDir: t.TempDir(), Towers: []towersim.TowerConfig{{ID: tw.ID, SecretHex: fmt.Sprintf("%x", tw.Secret), LockerIDs: tw.LockerIDs}}}
	sim, err := towersim.NewSimulator(cfg)
	require.NoError(t, err)
	return sim
}
