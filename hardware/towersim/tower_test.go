package towersim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/towerproto"
)

func newTower(t *testing.T, clock *fakeClock, statePath string) *towersim.Tower {
	t.Helper()
	tw, err := towersim.NewTower(towerConfigA(), statePath, towersim.WithClock(clock.Now))
	require.NoError(t, err)
	return tw
}

func mustOpen(t *testing.T, tw *towersim.Tower, tok issued, withItem bool) towersim.OpenResult {
	t.Helper()
	res, err := tw.Open(context.Background(), tok.payload, tok.auth, withItem)
	require.NoError(t, err)
	return res
}

func TestTowerRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup runs before the snapshot and returns the token to present.
		setup    func(t *testing.T, tw *towersim.Tower, clock *fakeClock) issued
		wantCode string
		locker   int64 // the locker the refusal answer names (0: the token is not genuine)
	}{
		{
			name: "forged MAC",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				tok := issue(t, secretA, nil)
				// The last byte changed, whatever it was (a fixed "00" left one MAC in 256 intact).
				last := "00"
				if strings.HasSuffix(tok.auth, last) {
					last = "01"
				}
				tok.auth = tok.auth[:len(tok.auth)-2] + last
				return tok
			},
			wantCode: "invalid_token",
		},
		{
			name: "signed with another tower's key",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				return issue(t, secretB, nil) // names tower A, but B's key
			},
			wantCode: "invalid_token",
		},
		{
			name: "not hex",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				return issued{payload: "hello", auth: "world"}
			},
			wantCode: "invalid_token",
		},
		{
			name: "payload tampered to another locker",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				tok := issue(t, secretA, nil)
				other := issue(t, secretA, func(tk *towerproto.Token) { tk.ID = tok.ID; tk.LockerID = 960 })
				tok.payload = other.payload // keeps the MAC of locker 959
				return tok
			},
			wantCode: "invalid_token",
		},
		{
			name: "token for another tower",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				return issue(t, secretB, func(tk *towerproto.Token) { tk.TowerID = towerB })
			},
			wantCode: "wrong_tower",
		},
		{
			name: "token for another tower that shares the secret",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				return issue(t, secretA, func(tk *towerproto.Token) { tk.TowerID = towerB })
			},
			wantCode: "wrong_tower",
		},
		{
			name: "locker the tower does not have",
			setup: func(t *testing.T, _ *towersim.Tower, _ *fakeClock) issued {
				return issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 4242 })
			},
			wantCode: "unknown_locker",
			locker:   4242,
		},
		{
			name: "stale generation after a pickup",
			setup: func(t *testing.T, tw *towersim.Tower, _ *fakeClock) issued {
				// Customer 1 holds two drop-off tokens, uses one, then the item is picked up:
				// the second drop-off token belongs to an ended possession.
				spare := issue(t, secretA, nil)
				mustOpen(t, tw, issue(t, secretA, nil), true)
				mustOpen(t, tw, issue(t, secretA, func(tk *towerproto.Token) { tk.Type = towerproto.TokenPickup }), false)
				return spare
			},
			wantCode: "stale_generation",
			locker:   959,
		},
		{
			name: "stale generation after a newer token",
			setup: func(t *testing.T, tw *towersim.Tower, _ *fakeClock) issued {
				mustOpen(t, tw, issue(t, secretA, func(tk *towerproto.Token) { tk.Generation = 5 }), true)
				return issue(t, secretA, func(tk *towerproto.Token) { tk.Generation = 4 })
			},
			wantCode: "stale_generation",
			locker:   959,
		},
		{
			name: "expired by the tower clock",
			setup: func(t *testing.T, _ *towersim.Tower, clock *fakeClock) issued {
				clock.Advance(5*time.Minute + time.Second)
				return issue(t, secretA, nil)
			},
			wantCode: "expired",
			locker:   959,
		},
		{
			name: "expires at this very second",
			setup: func(t *testing.T, _ *towersim.Tower, clock *fakeClock) issued {
				clock.Advance(5 * time.Minute)
				return issue(t, secretA, nil)
			},
			wantCode: "expired",
			locker:   959,
		},
		{
			name: "already used",
			setup: func(t *testing.T, tw *towersim.Tower, _ *fakeClock) issued {
				tok := issue(t, secretA, nil)
				mustOpen(t, tw, tok, true)
				return tok
			},
			wantCode: "already_used",
			locker:   959,
		},
		{
			name: "already used, even with the door closed empty",
			setup: func(t *testing.T, tw *towersim.Tower, _ *fakeClock) issued {
				tok := issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 961 })
				mustOpen(t, tw, tok, false)
				return tok
			},
			wantCode: "already_used",
			locker:   961,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			statePath := filepath.Join(t.TempDir(), "tower.json")
			tw := newTower(t, clock, statePath)
			tok := tc.setup(t, tw, clock)
			before, events := tw.Status(), tw.Events()
			stateBefore, err := os.ReadFile(statePath)
			require.NoError(t, err)

			res, err := tw.Open(context.Background(), tok.payload, tok.auth, true)
			require.Error(t, err)
			assert.Equal(t, tc.wantCode, towersim.RefusalCode(err))
			assert.Equal(t, tc.locker, res.LockerID)
			assert.Empty(t, res.Events)

			after := tw.Status()
			assert.Equal(t, before.Refusals[tc.wantCode]+1, after.Refusals[tc.wantCode], "refusal counted")
			after.Refusals = before.Refusals
			assert.Equal(t, before, after, "a refusal changes no locker, generation or sequence number")
			assert.Equal(t, events, tw.Events(), "a refusal records no event")
			stateAfter, err := os.ReadFile(statePath)
			require.NoError(t, err)
			assert.Equal(t, string(stateBefore), string(stateAfter), "a refusal writes nothing")
		})
	}
}

func TestTowerDropoffThenPickup(t *testing.T) {
	t.Parallel()
	clock := newClock()
	tw := newTower(t, clock, "")
	dropoff := issue(t, secretA, nil)
	pickup := issue(t, secretA, func(tk *towerproto.Token) { tk.Type = towerproto.TokenPickup; tk.ExpiresAt = t0.Add(time.Hour) })

	res := mustOpen(t, tw, dropoff, true)
	assert.Equal(t, int64(959), res.LockerID)
	assert.Equal(t, towerproto.TokenDropoff, res.TokenType)
	assert.Equal(t, towersim.LockerStatus{LockerID: 959, ItemInside: true, Generation: 0}, lockerStatus(t, tw, 959))

	clock.Advance(1234 * time.Microsecond) // event times keep milliseconds only
	mustOpen(t, tw, pickup, false)
	assert.Equal(t, towersim.LockerStatus{LockerID: 959, ItemInside: false, Generation: 1}, lockerStatus(t, tw, 959),
		"a pickup that empties the locker ends the possession: generation bumped")

	pickupAt := t0.Add(1234 * time.Microsecond).Truncate(time.Millisecond)
	want := []towersim.LoggedEvent{
		{BootEpoch: 1, Event: towerproto.Event{Seq: 1, Kind: towerproto.EventTokenUsed, At: t0, LockerID: 959, TokenID: dropoff.ID}},
		{BootEpoch: 1, Event: towerproto.Event{Seq: 2, Kind: towerproto.EventDoorOpened, At: t0, LockerID: 959, TokenID: dropoff.ID}},
		{BootEpoch: 1, Event: towerproto.Event{Seq: 3, Kind: towerproto.EventDoorClosed, At: t0, LockerID: 959, TokenID: dropoff.ID, ItemInside: true}},
		{BootEpoch: 1, Event: towerproto.Event{Seq: 4, Kind: towerproto.EventTokenUsed, At: pickupAt, LockerID: 959, TokenID: pickup.ID}},
		{BootEpoch: 1, Event: towerproto.Event{Seq: 5, Kind: towerproto.EventDoorOpened, At: pickupAt, LockerID: 959, TokenID: pickup.ID}},
		{BootEpoch: 1, Event: towerproto.Event{Seq: 6, Kind: towerproto.EventDoorClosed, At: pickupAt, LockerID: 959, TokenID: pickup.ID}},
	}
	assert.Equal(t, want, tw.Events())
	assert.Equal(t, want, tw.PendingEvents())
	assert.Equal(t, uint64(6), tw.Status().LastSeq)

	// The next customer's token carries the bumped generation and opens.
	next := issue(t, secretA, func(tk *towerproto.Token) { tk.Generation = 1 })
	res = mustOpen(t, tw, next, true)
	assert.Equal(t, uint64(7), res.Events[0].Seq)
}

func lockerStatus(t *testing.T, tw *towersim.Tower, id int64) towersim.LockerStatus {
	t.Helper()
	for _, l := range tw.Status().Lockers {
		if l.LockerID == id {
			return l
		}
	}
	t.Fatalf("no locker %d", id)
	return towersim.LockerStatus{}
}

func TestTowerGenerationRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tokenType towerproto.TokenType
		withItem  bool
		wantGen   uint32
	}{
		{"drop-off keeps the possession", towerproto.TokenDropoff, true, 3},
		{"drop-off closed empty keeps the possession", towerproto.TokenDropoff, false, 3},
		{"pickup closed empty ends the possession", towerproto.TokenPickup, false, 4},
		{"pickup with the item left inside keeps the possession", towerproto.TokenPickup, true, 3},
		{"release closed empty ends the possession", towerproto.TokenRelease, false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tw := newTower(t, newClock(), "")
			mustOpen(t, tw, issue(t, secretA, func(tk *towerproto.Token) { tk.Type = tc.tokenType; tk.Generation = 3 }), tc.withItem)
			assert.Equal(t, tc.wantGen, lockerStatus(t, tw, 959).Generation)
			assert.Equal(t, uint32(0), lockerStatus(t, tw, 960).Generation, "other lockers untouched")

			// A token of the same possession opens again exactly when the possession is kept.
			again := issue(t, secretA, func(tk *towerproto.Token) { tk.Type = towerproto.TokenPickup; tk.Generation = 3 })
			_, err := tw.Open(context.Background(), again.payload, again.auth, false)
			if tc.wantGen == 3 {
				assert.NoError(t, err)
			} else {
				assert.Equal(t, "stale_generation", towersim.RefusalCode(err))
			}
		})
	}
}

func TestTowerStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	clock := newClock()
	statePath := filepath.Join(t.TempDir(), "state", "tower.json")
	tw := newTower(t, clock, statePath)
	assert.Equal(t, uint32(1), tw.Status().BootEpoch)

	spare := issue(t, secretA, nil)
	mustOpen(t, tw, issue(t, secretA, nil), true)
	mustOpen(t, tw, issue(t, secretA, func(tk *towerproto.Token) { tk.Type = towerproto.TokenPickup }), false)
	used := issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 960 })
	mustOpen(t, tw, used, true)
	eventsBefore := tw.Events()
	require.Len(t, eventsBefore, 9)

	restarted := newTower(t, clock, statePath)
	st := restarted.Status()
	assert.Equal(t, uint32(2), st.BootEpoch, "each start is a new boot epoch")
	assert.Equal(t, uint64(0), st.LastSeq, "seq restarts")
	assert.Equal(t, 9, st.EventsPending)
	assert.Equal(t, eventsBefore, restarted.Events(), "unsent events survive")
	assert.Equal(t, towersim.LockerStatus{LockerID: 959, Generation: 1}, lockerStatus(t, restarted, 959))
	assert.Equal(t, towersim.LockerStatus{LockerID: 960, ItemInside: true}, lockerStatus(t, restarted, 960))

	_, err := restarted.Open(context.Background(), spare.payload, spare.auth, true)
	assert.Equal(t, "stale_generation", towersim.RefusalCode(err), "generations survive")
	_, err = restarted.Open(context.Background(), used.payload, used.auth, true)
	assert.Equal(t, "already_used", towersim.RefusalCode(err), "used tokens survive")

	res := mustOpen(t, restarted, issue(t, secretA, func(tk *towerproto.Token) { tk.LockerID = 961 }), true)
	assert.Equal(t, uint32(2), res.Events[0].BootEpoch)
	assert.Equal(t, uint64(1), res.Events[0].Seq)

	third := newTower(t, clock, statePath)
	assert.Equal(t, uint32(3), third.Status().BootEpoch)
	assert.Len(t, third.PendingEvents(), 12)
}

func TestNewTowerRefusesBadState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
	}{
		{"not JSON", "{"},
		{"another tower", `{"version":1,"towerId":"0100000000000015","bootEpoch":1}`},
		{"unknown version", `{"version":9,"towerId":"0100000000000014","bootEpoch":1}`},
		{"bad event", `{"version":1,"towerId":"0100000000000014","bootEpoch":1,"events":[{"kind":"exploded"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "tower.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			_, err := towersim.NewTower(towerConfigA(), path)
			assert.Error(t, err)
		})
	}
}

func TestOpenHonoursCancelledContext(t *testing.T) {
	t.Parallel()
	tw := newTower(t, newClock(), "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tok := issue(t, secretA, nil)
	_, err := tw.Open(ctx, tok.payload, tok.auth, true)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, tw.Events())
}
