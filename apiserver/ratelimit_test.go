package apiserver_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// DESIGN §8: the tower API per client, the app engine API per key and the token endpoint per
// client id are rate limited, shared in Postgres, with X-RateLimit-* headers and 429 +
// Retry-After in each surface's error body; a refused request has no effect; overrides in the
// database win over the defaults.
func TestRateLimitsOnEverySurface(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RateLimits: apiserver.RateLimits{Tower: 5, AppKey: 4, Token: 3}})
	ctx := context.Background()
	sp := e.Creds.ServiceProvider

	t.Run("token endpoint", func(t *testing.T) {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {sp.ClientID}, "client_secret": {sp.ClientSecret}}.Encode()
		token := func() testenv.Response {
			return send(t, http.MethodPost, e.URL+"/oauth/token", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, strings.NewReader(form))
		}
		for i := range 3 {
			require.Equal(t, http.StatusOK, token().Status, "token %d", i+1)
		}
		r := token()
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
		assert.Equal(t, "slow_down", r.Map(t)["error"])
		assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.Positive(t, retry)
	})

	t.Run("tower API per client", func(t *testing.T) {
		tok := demoToken(t, e)
		other := secondDemoClient(t, e, "rl-other-client")
		closest := "/api/v1/locations/closest?lat=34.0562&lon=-118.2365"
		for i := range 5 {
			r := e.Do(http.MethodGet, closest, tok, nil)
			require.Equal(t, http.StatusOK, r.Status, "request %d: %s", i+1, r.Body)
			assert.Equal(t, "5", r.Header.Get("X-RateLimit-Limit"))
			assert.Equal(t, strconv.Itoa(4-i), r.Header.Get("X-RateLimit-Remaining"))
		}
		// Refused: no reservation is made by a refused call.
		locker := lockerID(t, e, towerUnion1, smallHigh)
		r := e.Do(http.MethodPost, "/api/v1/towers/"+towerUnion1+"/lockers/"+strconv.FormatInt(locker, 10)+"/reservations", tok, map[string]any{})
		requireProblem(t, r, http.StatusTooManyRequests)
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		var n int
		require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM reservations`).Scan(&n))
		assert.Zero(t, n, "a refused request has no side effect")
		assert.Equal(t, http.StatusOK, e.Do(http.MethodGet, closest, other, nil).Status, "another client has its own count")

		// An override in the database wins (the spent allowance drains at the new rate: a
		// request is allowed again within a second).
		_, err := e.Store.Pool().Exec(ctx, `UPDATE api_clients SET rate_limit = 100 WHERE client_id = $1`, sp.ClientID)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			r = e.Do(http.MethodGet, closest, tok, nil)
			return r.Status == http.StatusOK
		}, 3*time.Second, 100*time.Millisecond)
		assert.Equal(t, "100", r.Header.Get("X-RateLimit-Limit"))
	})

	t.Run("app engine API per key", func(t *testing.T) {
		key := e.Creds.AppEngineAPIKey
		for i := range 4 {
			require.Equal(t, http.StatusOK, doKey(t, e, http.MethodGet, "/auth/api-key", key, nil).Status, "request %d", i+1)
		}
		r := doKey(t, e, http.MethodGet, "/auth/api-key", key, nil)
		requireProblem(t, r, http.StatusTooManyRequests)
		assert.Equal(t, "4", r.Header.Get("X-RateLimit-Limit"))
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
	})
}
