package gatewayalerts_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/store"
)

// fakeStore leases one gateway once and records what the watcher does with it.
type fakeStore struct {
	mu       sync.Mutex
	gw       store.Gateway
	claimed  bool
	batches  []store.GatewayAlertBatch
	loseNext bool
	stream   string
	released chan time.Duration
}

func (f *fakeStore) ClaimGatewayAlertWatches(_ context.Context, _ string, _ int, _ time.Duration) ([]store.GatewayAlertWatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimed {
		return nil, nil
	}
	f.claimed = true
	return []store.GatewayAlertWatch{{Gateway: f.gw, LastSeq: 4, Stream: f.stream}}, nil
}

func (f *fakeStore) RecordGatewayAlerts(_ context.Context, b store.GatewayAlertBatch) ([]store.GatewayAlert, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, b)
	if f.loseNext {
		f.released <- -1 // the watcher stops without releasing: the lease is another's
		return nil, store.ErrLeaseLost
	}
	return b.Alerts, nil
}

func (f *fakeStore) ReleaseGatewayAlertWatch(_ context.Context, _ int64, _ string, after time.Duration) error {
	f.released <- after
	return nil
}

func (f *fakeStore) PruneGatewayAlerts(context.Context, time.Duration) (int64, error) { return 0, nil }

type plainKeys struct{}

func (plainKeys) Open(_ string, sealed []byte) ([]byte, error) { return sealed, nil }

// The watcher's poll of one gateway: the cursor it was claimed with is the first after=, each
// answer is recorded with the gateway's next, a gateway without GET /alerts is left for
// NoAlertsPause, a failing one for the backoff, and a lost lease ends the poll without a
// release.
func TestWatcherPoll(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request)
		lose    bool
		release time.Duration
	}{
		{"no alerts route", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }, false, gatewayalerts.NoAlertsPause},
		{"failing gateway", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, false, 300 * time.Millisecond},
		{"cursor going back", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(gwapi.AlertList{Alerts: []gwapi.Alert{}, Next: 1})
		}, false, 300 * time.Millisecond},
		{"lease lost", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(gwapi.AlertList{Alerts: []gwapi.Alert{{Seq: 5, Kind: "door_ajar", At: "2026-11-29T06:00:00.000Z"}}, Next: 5})
		}, true, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			var mu sync.Mutex
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.URL.RawQuery+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				tc.answer(w, r)
			}))
			t.Cleanup(gw.Close)
			st := &fakeStore{gw: store.Gateway{ID: 7, Serial: "GW-7", LocationID: 3, BaseURL: gw.URL, SecretSealed: []byte("s3cret")},
				loseNext: tc.lose, released: make(chan time.Duration, 4)}
			ctx, cancel := context.WithCancel(t.Context())
			w := &gatewayalerts.Watcher{Store: st, Keyring: plainKeys{}, PollWait: time.Second, Backoff: 300 * time.Millisecond}
			require.NoError(t, w.Claim(ctx))
			select {
			case after := <-st.released:
				assert.Equal(t, tc.release, after)
			case <-time.After(10 * time.Second):
				t.Fatal("the poll did not end")
			}
			cancel()
			w.Wait()
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, got)
			assert.Equal(t, "after=4&wait=1 Bearer s3cret", got[0], "the claimed cursor, the wait, the gateway's secret")
			if tc.lose {
				require.Len(t, st.batches, 1)
				assert.EqualValues(t, 5, st.batches[0].Next)
				assert.Len(t, st.batches[0].Alerts, 1)
			} else {
				assert.Empty(t, st.batches, "nothing recorded")
			}
		})
	}
}

// A gateway whose alert log is not the one the cursor follows (it started on a new database)
// is read again from after=0, and what it holds is recorded in its stream.
func TestWatcherFollowsANewAlertLog(t *testing.T) {
	t.Parallel()
	var got []string
	var mu sync.Mutex
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Query().Get("after"))
		mu.Unlock()
		list := gwapi.AlertList{Alerts: []gwapi.Alert{}, Next: 4, Stream: "new"}
		if r.URL.Query().Get("after") == "0" {
			list = gwapi.AlertList{Alerts: []gwapi.Alert{{Seq: 1, Kind: "door_ajar", At: "2026-11-29T06:00:00.000Z"}}, Next: 1, Stream: "new"}
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(gw.Close)
	st := &fakeStore{gw: store.Gateway{ID: 7, Serial: "GW-7", LocationID: 3, BaseURL: gw.URL, SecretSealed: []byte("s3cret")},
		stream: "old", loseNext: true, released: make(chan time.Duration, 4)}
	ctx, cancel := context.WithCancel(t.Context())
	w := &gatewayalerts.Watcher{Store: st, Keyring: plainKeys{}, PollWait: time.Second, Backoff: 300 * time.Millisecond}
	require.NoError(t, w.Claim(ctx))
	select {
	case <-st.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not end")
	}
	cancel()
	w.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"4", "0"}, got, "the claimed cursor, then the new log from its start")
	require.Len(t, st.batches, 1, "nothing recorded from the answer to the old cursor")
	assert.Equal(t, "new", st.batches[0].Stream)
	assert.EqualValues(t, 1, st.batches[0].Next)
	assert.Len(t, st.batches[0].Alerts, 1)
}
