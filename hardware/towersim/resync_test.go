package towersim_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// secretA2 is the secret a freshly seeded database provisions for tower A.
var secretA2 = bytes.Repeat([]byte{0xc7}, 32)

func logTo(buf *syncbuf.Buffer) towersim.Option {
	return towersim.WithLogger(slog.New(slog.NewTextHandler(buf, nil)))
}

func refusalOf(t *testing.T, sim *towersim.Simulator, tok issued) string {
	t.Helper()
	res, err := sim.Open(context.Background(), towerA, openReq(tok, true))
	require.NoError(t, err)
	if res.Error == nil {
		return ""
	}
	return *res.Error
}

// towerAheadOf builds saved state for tower A in stateDir against cloud: five possessions of
// locker 959 and one of 960 ended there, the tower applied their floors (command position 6),
// and the events of the last open never reached the cloud.
func towerAheadOf(t *testing.T, cloud *fakeCloud, stateDir string, clock *fakeClock) {
	t.Helper()
	cloud.provision(towerA, 959, 960, 961)
	sim := newSim(t, simConfig(cloud.URL(), stateDir), clock)
	for range 5 {
		cloud.newPossession(towerA, 959)
	}
	simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 959), true))
	cloud.newPossession(towerA, 960)
	cloud.setFail(503)
	res := simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 960), true))
	require.NotEmpty(t, res.UploadError)
	tw, _ := sim.Tower(towerA)
	st := tw.Status()
	require.Equal(t, uint64(6), st.CommandPosition)
	require.Equal(t, uint32(5), lockerStatus(t, tw, 959).Generation)
	require.Equal(t, 4, st.EventsPending, "the sync report and the open's three events")
	raw, err := os.ReadFile(filepath.Join(stateDir, "tower-"+towerA+".json"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"secretId"`)
	assert.NotContains(t, string(raw), hex.EncodeToString(secretA), "the state names the secret, never holds it")
}

// The dev stack's database re-created with the data folder kept: the fresh cloud provisions a
// new secret and starts its command log again, while the tower's saved floors are those of
// the old cloud. The simulator notices and takes the fresh cloud's state: before, it refused
// every new token with stale_generation until its files were deleted by hand.
func TestSimulatorTakesAFreshCloudsState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret []byte // the fresh cloud's secret for tower A
		// v2 rewrites the saved state as the simulator wrote it before it recorded its
		// secret and its commands' expiry.
		v2        bool
		wantReset bool   // the tower resynced on the cloud's configuration and reported it
		wantLog   string // what the simulator says it did
		// wantEpoch: epochs never repeat; 1 ran with the old cloud, 2 starts at this boot
		// (from a clean state), 3 after a resync at the first sync.
		wantEpoch uint32
	}{
		{name: "new secret: starts clean at boot", secret: secretA2,
			wantLog: "saved tower state dropped: it was built with another tower secret", wantEpoch: 2},
		{name: "new secret, state file of version 2: resyncs at the first sync", secret: secretA2, v2: true,
			wantReset: true, wantLog: "tower resynced from the cloud: its command log went back", wantEpoch: 3},
		{name: "same secret (database restored): resyncs at the first sync", secret: secretA,
			wantReset: true, wantLog: "tower resynced from the cloud: its command log went back", wantEpoch: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			stateDir := t.TempDir()
			towerAheadOf(t, newFakeCloud(t), stateDir, clock)
			if tc.v2 {
				path := filepath.Join(stateDir, "tower-"+towerA+".json")
				raw, err := os.ReadFile(path)
				require.NoError(t, err)
				var st map[string]any
				require.NoError(t, json.Unmarshal(raw, &st))
				delete(st, "secretId")
				delete(st, "commandsExpireAt")
				st["version"] = 2
				raw, err = json.Marshal(st)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, raw, 0o600))
			}

			// An hour later the cloud's database is new: two possessions of 959 so far.
			clock.Advance(time.Hour)
			fresh := newFakeCloudWithSecret(t, tc.secret)
			fresh.signedAt = clock.Now
			fresh.provision(towerA, 959, 960, 961)
			fresh.newPossession(towerA, 959)
			fresh.newPossession(towerA, 959)
			cfg := simConfig(fresh.URL(), stateDir)
			cfg.Towers[0].SecretHex = hex.EncodeToString(tc.secret)
			var logs syncbuf.Buffer
			sim := newSim(t, cfg, clock, logTo(&logs))
			tw, _ := sim.Tower(towerA)

			tok := fresh.issueToken(t, 959)
			require.EqualValues(t, 2, tok.Generation)
			res := simOpen(t, sim, towerA, openReq(tok, true))
			assert.Positive(t, res.CommandsApplied, "the fresh cloud's configuration")
			assert.Empty(t, res.SyncError)
			assert.Empty(t, res.UploadError)
			assert.Contains(t, logs.String(), tc.wantLog)

			st := tw.Status()
			assert.Equal(t, fresh.head(towerA), st.CommandPosition, "the fresh cloud's log position")
			assert.Equal(t, uint32(2), lockerStatus(t, tw, 959).Generation)
			assert.Equal(t, uint32(0), lockerStatus(t, tw, 960).Generation, "the old cloud's floor is gone")
			assert.Equal(t, 0, st.EventsPending, "the old cloud's queued events are dropped, the new ones went up")
			assert.Equal(t, tc.wantEpoch, st.BootEpoch)

			// The fresh cloud got only the new epoch's events, numbered from 1.
			_, received, _ := fresh.snapshot()
			var kinds []towerproto.EventKind
			for i, e := range cloudEvents(received, towerA) {
				assert.Equal(t, tc.wantEpoch, e.BootEpoch)
				assert.Equal(t, uint64(i+1), e.Seq)
				kinds = append(kinds, e.Kind)
			}
			assert.Contains(t, kinds, towerproto.EventDoorClosed)

			reports := fresh.resetReports(towerA)
			if tc.wantReset {
				require.Len(t, reports, 1, "the reset is reported once")
				assert.Contains(t, reports[0], "the cloud's command log is at command 2, behind the 6 commands the tower had applied")
				assert.Contains(t, reports[0], "(4 events not uploaded)")
			} else {
				assert.Empty(t, reports, "a tower provisioned again has no earlier log this cloud knew")
			}

			// The fresh cloud's own anti-replay holds: a token of its ended possession is refused.
			old := issue(t, tc.secret, func(tk *towerproto.Token) { tk.Generation, tk.ExpiresAt = 1, clock.Now().Add(time.Minute) })
			assert.Equal(t, "stale_generation", refusalOf(t, sim, old))

			// Once in step, a restart changes nothing more.
			var again syncbuf.Buffer
			restarted := newSim(t, cfg, clock, logTo(&again))
			assert.Equal(t, "stale_generation", refusalOf(t, restarted, old))
			assert.NotContains(t, again.String(), "resync")
			assert.NotContains(t, again.String(), "dropped")
			assert.Len(t, fresh.resetReports(towerA), len(reports))
			rtw, _ := restarted.Tower(towerA)
			assert.Equal(t, fresh.head(towerA), rtw.Status().CommandPosition)
		})
	}
}

// The cloud's database replaced under a running simulator (same secret). When the cloud's
// pending commands all number below the tower's position, the next sync checks the log; when
// the tower's queued report of its position has made the new log look acknowledged (nothing
// pending), the first token the tower refuses as stale makes the phone check. Either way the
// tower resyncs without a restart and the new cloud's token opens.
func TestRunningSimulatorResyncsWhenTheCloudsLogGoesBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// queued: the tower's last report (position 5) waits for the upload, which then
		// tells the new cloud the tower is past its whole log.
		queued bool
	}{
		{name: "the sync finds the pending commands behind"},
		{name: "nothing pending: the stale refusal makes the phone check", queued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			cloud := newFakeCloud(t)
			cloud.signedAt = clock.Now
			cloud.provision(towerA, 959, 960, 961)
			var logs syncbuf.Buffer
			sim := newSim(t, simConfig(cloud.URL(), t.TempDir()), clock, logTo(&logs))
			for range 4 {
				cloud.newPossession(towerA, 959)
			}
			simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 959), true))
			cloud.newPossession(towerA, 960)
			if tc.queued {
				cloud.setFail(503)
			}
			simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 960), true))
			cloud.setFail(0)
			tw, _ := sim.Tower(towerA)
			require.Equal(t, uint64(5), tw.Status().CommandPosition)

			clock.Advance(time.Minute)
			cloud.provision(towerA, 959, 960, 961) // a new database behind the same address
			cloud.newPossession(towerA, 959)
			cloud.newPossession(towerA, 959)
			_, _, err := sim.SyncTower(context.Background(), towerA, "")
			require.NoError(t, err)
			if tc.queued {
				assert.Equal(t, uint64(5), tw.Status().CommandPosition, "nothing showed the log went back yet")
				assert.Empty(t, cloud.resetReports(towerA))
			} else {
				assert.Equal(t, uint64(2), tw.Status().CommandPosition)
				assert.Len(t, cloud.resetReports(towerA), 1)
			}

			res := simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 959), true))
			if tc.queued {
				assert.Positive(t, res.CommandsApplied, "the configuration the resync took")
			}
			assert.Equal(t, uint64(2), tw.Status().CommandPosition)
			assert.Equal(t, uint32(2), lockerStatus(t, tw, 959).Generation)
			assert.Equal(t, uint32(0), lockerStatus(t, tw, 960).Generation)
			assert.Len(t, cloud.resetReports(towerA), 1)
			assert.Contains(t, logs.String(), "the cloud's command log is behind the tower")
			assert.Contains(t, logs.String(), "tower resynced from the cloud: its command log went back")
		})
	}
}

// The normal case: saved state the cloud backs is kept across restarts, and a token of an
// ended possession stays refused, also when the cloud has not yet heard what the tower
// applied.
func TestSimulatorKeepsStateTheCloudBacks(t *testing.T) {
	t.Parallel()
	clock := newClock()
	stateDir := t.TempDir()
	cloud := newFakeCloud(t)
	cloud.provision(towerA, 959, 960, 961)
	first := newSim(t, simConfig(cloud.URL(), stateDir), clock)
	for range 3 {
		cloud.newPossession(towerA, 959)
	}
	simOpen(t, first, towerA, openReq(cloud.issueToken(t, 959), true))
	stale := issue(t, secretA, func(tk *towerproto.Token) { tk.Generation = 2 })

	var logs syncbuf.Buffer
	sim := newSim(t, simConfig(cloud.URL(), stateDir), clock, logTo(&logs))
	tw, _ := sim.Tower(towerA)
	res, err := sim.Open(context.Background(), towerA, openReq(stale, true))
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	assert.Equal(t, "stale_generation", *res.Error)
	assert.Zero(t, res.CommandsApplied, "the cloud's log was checked, not pushed")
	assert.Empty(t, res.SyncError)

	// The tower applies a command whose report the cloud never gets: the cloud's pending
	// commands now end at the tower's position, which is no sign of a reset either.
	cloud.newPossession(towerA, 960)
	cloud.setFail(503)
	simOpen(t, sim, towerA, openReq(cloud.issueToken(t, 960), true))
	cloud.setFail(0)
	assert.Equal(t, "stale_generation", refusalOf(t, sim, stale))
	assert.Equal(t, "stale_generation", refusalOf(t, sim, issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 960 })))

	st := tw.Status()
	assert.Equal(t, uint64(4), st.CommandPosition)
	assert.Equal(t, uint32(2), st.BootEpoch, "only the restart started an epoch")
	assert.Equal(t, uint32(3), lockerStatus(t, tw, 959).Generation)
	assert.Empty(t, cloud.resetReports(towerA))
	assert.NotContains(t, logs.String(), "resync")
	assert.NotContains(t, logs.String(), "behind")
	assert.NotContains(t, logs.String(), "dropped")
}

// A configuration signed before the commands the tower applied (a replayed answer) is behind
// the tower, but proves nothing about the cloud's log: the tower keeps its floors.
func TestReplayedConfigurationDoesNotRollTheTowerBack(t *testing.T) {
	t.Parallel()
	clock := newClock()
	stateDir := t.TempDir()
	cloud := newFakeCloud(t)
	cloud.signedAt = clock.Now
	cloud.provision(towerA, 959, 960, 961)
	cloud.newPossession(towerA, 959)
	old := cloud.configurationPackets(towerA) // as of command 1
	clock.Advance(time.Minute)
	cloud.newPossession(towerA, 959)
	cloud.newPossession(towerA, 959)
	first := newSim(t, simConfig(cloud.URL(), stateDir), clock)
	simOpen(t, first, towerA, openReq(cloud.issueToken(t, 959), true))

	cloud.serveStaleConfiguration(towerA, old)
	var logs syncbuf.Buffer
	sim := newSim(t, simConfig(cloud.URL(), stateDir), clock, logTo(&logs))
	stale := issue(t, secretA, func(tk *towerproto.Token) { tk.Generation = 2 })
	assert.Equal(t, "stale_generation", refusalOf(t, sim, stale))
	tw, _ := sim.Tower(towerA)
	assert.Equal(t, uint64(3), tw.Status().CommandPosition)
	assert.Equal(t, uint32(2), tw.Status().BootEpoch)
	assert.Equal(t, uint32(3), lockerStatus(t, tw, 959).Generation)
	assert.Empty(t, cloud.resetReports(towerA))
	assert.Contains(t, logs.String(), "configuration ignored: it is behind the tower and was signed no later than the newest command the tower applied")
	assert.Contains(t, logs.String(), "the tower kept its state")
}
