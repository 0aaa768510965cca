package loadclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pacer offers every call of the schedule, each told its slot, whether or not the
// earlier ones have returned.
func TestOpenLoopOffersTheWholeSchedule(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[int]time.Time{}
	start := time.Now()
	sent, skipped := OpenLoop(context.Background(), 100, 200*time.Millisecond, 0, func(_ context.Context, i int, at time.Time) {
		time.Sleep(50 * time.Millisecond) // slower than the interval: calls overlap
		mu.Lock()
		seen[i] = at
		mu.Unlock()
	})
	assert.Equal(t, 20, sent)
	assert.Zero(t, skipped)
	require.Len(t, seen, 20)
	assert.WithinDuration(t, start.Add(190*time.Millisecond), seen[19], 20*time.Millisecond, "slot 19 is 190 ms after the start")
}

// With a cap on calls in flight, the calls past it are skipped and counted, never delayed.
func TestOpenLoopSkipsPastMaxInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var ran atomic.Int32
	done := make(chan struct{})
	var sent, skipped int
	go func() {
		sent, skipped = OpenLoop(context.Background(), 200, 100*time.Millisecond, 2, func(context.Context, int, time.Time) {
			ran.Add(1)
			<-release
		})
		close(done)
	}()
	time.Sleep(400 * time.Millisecond) // well past the last slot (95 ms)
	close(release)
	<-done
	assert.Equal(t, 2, sent)
	assert.Equal(t, 18, skipped)
	assert.EqualValues(t, 2, ran.Load())
}

// The token is fetched once and reused; every answer's status reaches OnStatus.
func TestTokenIsReusedAndStatusesObserved(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			require.NoError(t, r.ParseForm())
			assert.Equal(t, "client_credentials", r.Form.Get("grant_type"))
			assert.Equal(t, "id", r.Form.Get("client_id"))
			fetched.Add(1)
			_, _ = w.Write([]byte(`{"access_token":"tok"}`))
			return
		}
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	c := New(5 * time.Second)
	var statuses []int
	var mu sync.Mutex
	c.OnStatus = func(s int) { mu.Lock(); statuses = append(statuses, s); mu.Unlock() }
	tok := NewToken(c, srv.URL+"/", "id", "secret")
	for range 2 {
		h, err := tok.Authorization(context.Background())
		require.NoError(t, err)
		a, err := c.DoJSON(context.Background(), http.MethodPost, srv.URL+"/x", h, map[string]int{"n": 1})
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, a.Status)
		assert.False(t, a.At.IsZero())
	}
	assert.EqualValues(t, 1, fetched.Load())
	assert.Equal(t, []int{200, 503, 503}, statuses)
}

// A refused token names the status and the start of the body.
func TestTokenRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad client", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	_, err := NewToken(New(5*time.Second), srv.URL, "id", "wrong").Bearer(context.Background())
	require.Error(t, err)
	assert.Equal(t, "get token: HTTP 401: bad client", err.Error())
}
