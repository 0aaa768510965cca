package towersim_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/towerproto"
)

func newSim(t *testing.T, cfg towersim.Config, clock *fakeClock, opts ...towersim.Option) *towersim.Simulator {
	t.Helper()
	sim, err := towersim.NewSimulator(cfg, append([]towersim.Option{towersim.WithClock(clock.Now)}, opts...)...)
	require.NoError(t, err)
	return sim
}

func openReq(tok issued, withItem bool) towersim.OpenRequest {
	return towersim.OpenRequest{Payload: tok.payload, PayloadAuth: tok.auth, CloseWithItem: &withItem}
}

func simOpen(t *testing.T, sim *towersim.Simulator, tower string, req towersim.OpenRequest) towersim.OpenResponse {
	t.Helper()
	resp, err := sim.Open(context.Background(), tower, req)
	require.NoError(t, err)
	require.True(t, resp.Opened, "refused: %s", resp.Detail)
	return resp
}

// cloudEvents returns what the cloud holds for a tower, as the tower logged it.
func cloudEvents(received map[eventID]towerproto.Event, tower string) []towersim.LoggedEvent {
	var out []towersim.LoggedEvent
	for id, e := range received {
		if id.tower == tower {
			out = append(out, towersim.LoggedEvent{BootEpoch: id.epoch, Event: e, Uploaded: true})
		}
	}
	slices.SortFunc(out, func(a, b towersim.LoggedEvent) int {
		if a.BootEpoch != b.BootEpoch {
			return int(a.BootEpoch) - int(b.BootEpoch)
		}
		return int(a.Seq) - int(b.Seq)
	})
	return out
}

func TestRelayUploadsSignedBatches(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	clock := newClock()
	sim := newSim(t, simConfig(cloud.URL(), ""), clock)

	tok := issue(t, secretA, nil)
	resp := simOpen(t, sim, "0100000000000014", openReq(tok, true))
	assert.Equal(t, 3, resp.EventsUploaded)
	assert.Empty(t, resp.UploadError)
	assert.Equal(t, 0, resp.EventsPending)

	requests, received, _ := cloud.snapshot()
	require.Len(t, requests, 1)
	req := requests[0]
	assert.Equal(t, "/sdk/v1/towers/0100000000000014/events", req.path, "the SDK's path, the tower id upper-case")
	assert.Equal(t, "jwt-1", req.bearer, "the token from the client-credentials grant")
	require.Len(t, req.envelopes, 1)
	assert.Equal(t, uint64(1), req.envelopes[0].SyncEventStart)
	assert.Equal(t, 3, req.envelopes[0].SyncEventCount)
	require.Len(t, req.batches, 1)
	b := req.batches[0]
	assert.Equal(t, towerA, b.TowerID)
	assert.Equal(t, uint32(1), b.BootEpoch)
	assert.Equal(t, []towerproto.Event{
		{Seq: 1, Kind: towerproto.EventTokenUsed, At: t0, LockerID: 959, TokenID: tok.ID},
		{Seq: 2, Kind: towerproto.EventDoorOpened, At: t0, LockerID: 959, TokenID: tok.ID},
		{Seq: 3, Kind: towerproto.EventDoorClosed, At: t0, LockerID: 959, TokenID: tok.ID, ItemInside: true},
	}, b.Events)

	tw, ok := sim.Tower(towerA)
	require.True(t, ok)
	assert.Equal(t, cloudEvents(received, towerA), tw.Events(), "the tower's log says uploaded")
	assert.Empty(t, tw.PendingEvents())

	// Nothing queued: no request, and no new access token either.
	n, err := sim.Relay().Upload(context.Background(), tw, "")
	require.NoError(t, err)
	assert.Zero(t, n)
	requests, _, _ = cloud.snapshot()
	assert.Len(t, requests, 1)

	// The cached token is reused for the next upload.
	simOpen(t, sim, towerA, openReq(issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 960 }), true))
	requests, _, _ = cloud.snapshot()
	require.Len(t, requests, 2)
	assert.Equal(t, "jwt-1", requests[1].bearer)
	forms := cloud.forms()
	require.Len(t, forms, 1)
	assert.Equal(t, map[string]string{
		"grant_type": "client_credentials", "client_id": "sim-client", "client_secret": "sim-secret", "scope": "tower_access",
	}, forms[0])
}

func TestRelayKeepsEventsUntilTheCloudTakesThem(t *testing.T) {
	t.Parallel()
	for _, fail := range []int{503, 500, 401, 404, -1} {
		name := fmt.Sprintf("cloud answers %d", fail)
		if fail == -1 {
			name = "connection dropped"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cloud := newFakeCloud(t)
			sim := newSim(t, simConfig(cloud.URL(), ""), newClock())
			tw, _ := sim.Tower(towerA)

			cloud.setFail(fail)
			first := simOpen(t, sim, towerA, openReq(issue(t, secretA, nil), true))
			assert.True(t, first.Opened, "the door opened whatever the cloud does")
			assert.Zero(t, first.EventsUploaded)
			assert.NotEmpty(t, first.UploadError)
			assert.Equal(t, 3, first.EventsPending)
			assert.Len(t, tw.PendingEvents(), 3)

			// A second failed attempt loses nothing either.
			n, err := sim.Relay().Upload(context.Background(), tw, "")
			require.Error(t, err)
			assert.Zero(t, n)
			assert.Len(t, tw.PendingEvents(), 3)

			cloud.setFail(0)
			second := simOpen(t, sim, towerA, openReq(issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 960 }), true))
			assert.Equal(t, 6, second.EventsUploaded)
			assert.Empty(t, second.UploadError)
			assert.Equal(t, 0, second.EventsPending)

			_, received, deliveries := cloud.snapshot()
			assert.Equal(t, tw.Events(), cloudEvents(received, towerA), "every event arrived")
			for id, n := range deliveries {
				assert.Equal(t, 1, n, "event %+v delivered once", id)
			}
			assert.Len(t, deliveries, 6)
		})
	}
}

func TestRelayRestartDeliversUnsentEvents(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	clock := newClock()
	cfg := simConfig(cloud.URL(), t.TempDir())

	sim := newSim(t, cfg, clock)
	cloud.setFail(503)
	simOpen(t, sim, towerA, openReq(issue(t, secretA, nil), true))

	// The simulator stops and starts again: a new boot epoch, sequence numbers from 1.
	clock.Advance(time.Minute)
	cloud.setFail(0)
	restarted := newSim(t, cfg, clock)
	tw, _ := restarted.Tower(towerA)
	assert.Equal(t, uint32(2), tw.Status().BootEpoch)
	assert.Len(t, tw.PendingEvents(), 3)

	resp := simOpen(t, restarted, towerA, openReq(issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 960 }), true))
	assert.Equal(t, 6, resp.EventsUploaded)

	requests, received, deliveries := cloud.snapshot()
	require.Len(t, requests, 1)
	require.Len(t, requests[0].batches, 2, "one batch per boot epoch")
	assert.Equal(t, uint32(1), requests[0].batches[0].BootEpoch)
	assert.Equal(t, uint32(2), requests[0].batches[1].BootEpoch)
	for _, env := range requests[0].envelopes {
		assert.Equal(t, uint64(1), env.SyncEventStart)
		assert.Equal(t, 3, env.SyncEventCount)
	}
	got := slices.Collect(maps.Keys(deliveries))
	assert.ElementsMatch(t, []eventID{
		{towerA, 1, 1}, {towerA, 1, 2}, {towerA, 1, 3},
		{towerA, 2, 1}, {towerA, 2, 2}, {towerA, 2, 3},
	}, got)
	assert.Equal(t, tw.Events(), cloudEvents(received, towerA))

	// And a third start has nothing left to send.
	again := newSim(t, cfg, clock)
	tw, _ = again.Tower(towerA)
	assert.Empty(t, tw.PendingEvents())
}

func TestRelaySplitsABacklog(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	sim := newSim(t, simConfig(cloud.URL(), ""), newClock())
	tw, _ := sim.Tower(towerA)

	cloud.setFail(503)
	const opens = 250 // 750 events: 6 batches of at most 128, in 2 requests
	for range opens {
		simOpen(t, sim, towerA, openReq(issue(t, secretA, nil), true))
	}
	cloud.setFail(0)
	n, err := sim.Relay().Upload(context.Background(), tw, "")
	require.NoError(t, err)
	assert.Equal(t, 3*opens, n)

	requests, received, deliveries := cloud.snapshot()
	require.Len(t, requests, 2)
	next := uint64(1)
	for _, req := range requests {
		assert.Less(t, req.bodyLen, 64<<10, "each body fits the cloud's 64 KiB limit")
		assert.LessOrEqual(t, len(req.envelopes), 5, "the SDK sends at most 5 batches a request")
		for _, env := range req.envelopes {
			assert.Equal(t, next, env.SyncEventStart, "batches are consecutive")
			assert.LessOrEqual(t, env.SyncEventCount, 128)
			next += uint64(env.SyncEventCount)
		}
	}
	assert.Len(t, received, 3*opens)
	for _, n := range deliveries {
		assert.Equal(t, 1, n)
	}
	assert.Empty(t, tw.PendingEvents())
}

func TestRelayExplicitBearerOverridesTheTokenSource(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	sim := newSim(t, simConfig(cloud.URL(), ""), newClock())

	req := openReq(issue(t, secretA, nil), true)
	req.AccessToken = "sdk-token-from-login-authorize"
	resp := simOpen(t, sim, towerA, req)
	assert.Equal(t, 3, resp.EventsUploaded)

	requests, _, _ := cloud.snapshot()
	require.Len(t, requests, 1)
	assert.Equal(t, "sdk-token-from-login-authorize", requests[0].bearer)
	assert.Empty(t, cloud.forms(), "no client-credentials grant needed")
}

func TestRelayGetsANewTokenAfter401(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	cloud.unauthorize["jwt-1"] = true // e.g. its signing key was rotated away
	sim := newSim(t, simConfig(cloud.URL(), ""), newClock())

	resp := simOpen(t, sim, towerA, openReq(issue(t, secretA, nil), true))
	assert.Equal(t, 3, resp.EventsUploaded)
	requests, _, _ := cloud.snapshot()
	require.Len(t, requests, 1)
	assert.Equal(t, "jwt-2", requests[0].bearer)
}

// Without a way to the cloud and no session cached, the phone has no session: the tower
// is never asked to open, and nothing is recorded.
func TestRelayWithoutCredentialsCannotOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(url string) towersim.Config
	}{
		{"no client credentials", func(url string) towersim.Config {
			cfg := simConfig(url, "")
			cfg.ClientID, cfg.ClientSecret = "", ""
			return cfg
		}},
		{"wrong client credentials", func(url string) towersim.Config {
			cfg := simConfig(url, "")
			cfg.ClientSecret = "nope"
			return cfg
		}},
		{"no API base URL", func(string) towersim.Config { return simConfig("", "") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cloud := newFakeCloud(t)
			sim := newSim(t, tc.cfg(cloud.URL()), newClock())
			resp, err := sim.Open(context.Background(), towerA, openReq(issue(t, secretA, nil), true))
			require.NoError(t, err)
			assert.False(t, resp.Opened)
			require.NotNil(t, resp.Error)
			assert.Equal(t, "no_session", *resp.Error)
			assert.Zero(t, resp.EventsUploaded)
			assert.Zero(t, resp.EventsPending)
			requests, _, _ := cloud.snapshot()
			assert.Empty(t, requests)
		})
	}
}

func TestSyncUploadsEveryTower(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	sim := newSim(t, simConfig(cloud.URL(), ""), newClock())
	cloud.setFail(503)
	simOpen(t, sim, towerA, openReq(issue(t, secretA, nil), true))
	simOpen(t, sim, towerB, openReq(issue(t, secretB, func(tk *towerproto.Token) { tk.TowerID = towerB }), false))

	_, err := sim.Sync(context.Background(), "")
	require.Error(t, err)
	cloud.setFail(0)
	n, err := sim.Sync(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, 6, n)

	requests, received, _ := cloud.snapshot()
	require.Len(t, requests, 2)
	assert.Equal(t, "/sdk/v1/towers/0100000000000014/events", requests[0].path)
	assert.Equal(t, "/sdk/v1/towers/010000000000ABCD/events", requests[1].path)
	assert.Len(t, cloudEvents(received, towerB), 3)
}

func TestClientCredentialsCachesAndRefreshes(t *testing.T) {
	t.Parallel()
	cloud := newFakeCloud(t)
	clock := newClock()
	ts := towersim.NewClientCredentials(cloud.URL()+"/", "sim-client", "sim-secret", towersim.WithClock(clock.Now))
	ctx := context.Background()

	tok, err := ts.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "jwt-1", tok)

	clock.Advance(269 * time.Second) // expires_in 300: still fresh
	tok, err = ts.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "jwt-1", tok)

	clock.Advance(2 * time.Second) // within 30 s of expiry: renewed before it runs out
	tok, err = ts.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "jwt-2", tok)

	ts.Invalidate()
	tok, err = ts.Token(ctx)
	require.NoError(t, err)
	assert.Equal(t, "jwt-3", tok)

	bad := towersim.NewClientCredentials(cloud.URL(), "sim-client", "wrong", towersim.WithClock(clock.Now))
	_, err = bad.Token(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid_client")
}
