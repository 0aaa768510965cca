package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// Every /sdk/v1 operation is rate limited per client (DESIGN §4.8, §8): the five tower
// operations and the BLE services list count against the client's tower API limit, the login
// against the client's token budget (shared with POST /oauth/token) and its wrong passwords per
// (client id, source address). Every answer to an authenticated client carries the
// X-RateLimit-* headers; past the limit the answer is 429 with Retry-After in the SDK's
// problem+json, and nothing happens.

// limitedSDKClient creates a client of the demo organization with the given scopes and
// per-client limits (tower API and mobile SDK API; token endpoint and SDK login; 0: the
// service's), and returns its secret.
func limitedSDKClient(t *testing.T, e *testenv.Env, id string, tower, token int, scopes ...string) string {
	t.Helper()
	ctx := context.Background()
	if len(scopes) == 0 {
		scopes = []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}
	}
	secret := credential.NewSecret()
	require.NoError(t, e.Store.CreateClient(ctx, store.Client{ClientID: id, OrganizationID: e.Creds.OrganizationID,
		Name: "SDK app " + id, SecretHash: credential.Hash(secret), Scopes: scopes}))
	var tw, tk *int
	if tower > 0 {
		tw = &tower
	}
	if token > 0 {
		tk = &token
	}
	require.NoError(t, e.Store.SetClientRateLimits(ctx, id, tw, tk))
	return secret
}

// sdkCall is one /sdk/v1 call with the bearer token tok.
type sdkCall struct {
	name   string
	method string
	path   string
	body   any
}

// sdkCalls are valid calls of the six bearer operations on tw, each of which would answer
// 200 and, for the POSTs, record something new: the n-th set uploads event n and reports
// reset n (a repeat would be a duplicate, which records nothing).
func sdkCalls(t *testing.T, tw sdkTower, n int) []sdkCall {
	t.Helper()
	batch, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: tw.ID, BootEpoch: 1, Events: []towerproto.Event{
		{Seq: uint64(n), Kind: towerproto.EventDoorOpened, At: time.Now().UTC().Truncate(time.Millisecond), LockerID: tw.LockerID}}},
		towerproto.EventKey(tw.Secret))
	require.NoError(t, err)
	batch.Payload, batch.PayloadAuth = strings.ToUpper(batch.Payload), strings.ToUpper(batch.PayloadAuth)
	base := "/sdk/v1/towers/" + tw.Upper
	return []sdkCall{
		{"session-token", http.MethodPost, base + "/session-token", map[string]any{"duration": 600, "claims": []string{"locker_delivery"}, "version": "2.4.1"}},
		{"configuration", http.MethodGet, base + "/configuration", nil},
		{"commands", http.MethodGet, base + "/commands", nil},
		{"events", http.MethodPost, base + "/events", []towerproto.BatchEnvelope{batch}},
		{"reset-events", http.MethodPost, base + "/reset-events", map[string]any{"reason": fmt.Sprintf("event log corrupted (%d)", n)}},
		{"services", http.MethodGet, "/sdk/v1/services/", nil},
	}
}

// sdkEffects counts what the tower operations record for a tower.
func sdkEffects(t *testing.T, e *testenv.Env, towerID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"tower_sessions", "tower_events", "tower_event_resets"} {
		var n int
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM `+table+` WHERE tower_id = $1`, towerID).Scan(&n))
		out[table] = n
	}
	return out
}

// countsDown checks the X-RateLimit-* headers of an answer to a client whose limit is limit:
// Remaining below the previous answer's (the requests come faster than the allowance
// refills), Reset a Unix second no earlier than the request. It returns Remaining.
func countsDown(t *testing.T, r testenv.Response, limit string, prev int, sent time.Time, what string) int {
	t.Helper()
	assert.Equal(t, limit, r.Header.Get("X-RateLimit-Limit"), what)
	remaining, err := strconv.Atoi(r.Header.Get("X-RateLimit-Remaining"))
	require.NoError(t, err, "%s: X-RateLimit-Remaining %q", what, r.Header.Get("X-RateLimit-Remaining"))
	assert.Less(t, remaining, prev, "%s counts down", what)
	reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	require.NoError(t, err, "%s: X-RateLimit-Reset %q", what, r.Header.Get("X-RateLimit-Reset"))
	assert.GreaterOrEqual(t, reset, sent.Unix(), what)
	return remaining
}

func noRateHeaders(t *testing.T, r testenv.Response, what string) {
	t.Helper()
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		assert.Empty(t, r.Header.Get(h), "%s: %s", what, h)
	}
}

func TestSDKRateLimits(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	tw := newSDKTower(t, e, "01000000000000c7", 1)

	t.Run("headers on every answer, counting down", func(t *testing.T) {
		secret := limitedSDKClient(t, e, "sdk-rl-headers", 10, 10)
		o := e.NewOtherOrg(t)
		spToken := issue(t, e, "sdk-rl-headers", e.Creds.OrganizationID, jwtauth.ScopeServiceProvider)

		// The login spends the token budget.
		var tok string
		prev := 10
		for i := range 3 {
			sent := time.Now()
			r := sdkLogin(t, e, "sdk-rl-headers", secret)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			prev = countsDown(t, r, "10", prev, sent, fmt.Sprintf("login %d", i+1))
			var login struct {
				AccessToken string `json:"access_token"`
			}
			r.JSON(t, &login)
			tok = login.AccessToken
		}

		// The six bearer operations spend the tower API's limit, errors included.
		calls := sdkCalls(t, tw, 1)
		calls = append(calls,
			sdkCall{"a tower of another organization (404)", http.MethodGet, "/sdk/v1/towers/" + o.TowerID + "/commands", nil},
			sdkCall{"bad input (422)", http.MethodPost, "/sdk/v1/towers/" + tw.Upper + "/session-token", map[string]any{"duration": 0, "claims": []string{"owner"}}})
		prev = 10
		for _, c := range calls {
			sent := time.Now()
			r := e.Do(c.method, c.path, tok, c.body)
			switch {
			case strings.HasSuffix(c.name, "(404)"):
				requireProblem(t, r, http.StatusNotFound)
			case strings.HasSuffix(c.name, "(422)"):
				requireProblem(t, r, http.StatusUnprocessableEntity)
			default:
				require.Equal(t, http.StatusOK, r.Status, "%s: %s", c.name, r.Body)
			}
			prev = countsDown(t, r, "10", prev, sent, c.name)
		}
		// A token of the client without the SDK's scope is the client too: 403, counted.
		sent := time.Now()
		r := e.Do(http.MethodGet, "/sdk/v1/services/", spToken, nil)
		requireProblem(t, r, http.StatusForbidden)
		countsDown(t, r, "10", prev, sent, "wrong scope (403)")

		// Who is not authenticated learns nothing of a budget.
		r = e.Do(http.MethodGet, "/sdk/v1/services/", "", nil)
		requireProblem(t, r, http.StatusUnauthorized)
		noRateHeaders(t, r, "no bearer")
		r = sdkLogin(t, e, "sdk-rl-headers", "wrong-password")
		requireProblem(t, r, http.StatusUnauthorized)
		noRateHeaders(t, r, "wrong password")

		// A right password of a client the SDK may not use is that client: 401, with its budget.
		noSDK := limitedSDKClient(t, e, "sdk-rl-no-sdk", 0, 7, jwtauth.ScopeServiceProvider)
		r = sdkLogin(t, e, "sdk-rl-no-sdk", noSDK)
		requireProblem(t, r, http.StatusUnauthorized)
		countsDown(t, r, "7", 7, sent, "login without tower_access")
	})

	t.Run("past the limit every operation is 429 and does nothing", func(t *testing.T) {
		secret := limitedSDKClient(t, e, "sdk-rl-spent", 1, 1)
		otherSecret := limitedSDKClient(t, e, "sdk-rl-other", 1, 1)

		// The login spends the token budget of one a minute.
		r := sdkLoginFrom(t, e, ownerAddr, "sdk-rl-spent", secret)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
		var login struct {
			AccessToken string `json:"access_token"`
		}
		r.JSON(t, &login)
		// The client's backend spends the tower API's limit of one a minute: its phones share it.
		r = e.Do(http.MethodGet, "/api/v1/locations/closest?lat=34.0562&lon=-118.2365", issue(t, e, "sdk-rl-spent", e.Creds.OrganizationID), nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))

		before := sdkEffects(t, e, tw.ID)
		spent := func(r testenv.Response, what string) {
			t.Helper()
			m := requireProblem(t, r, http.StatusTooManyRequests)
			assert.Contains(t, m["detail"], "try again in", what)
			assert.Positive(t, retryAfter(t, r), what)
			assert.Equal(t, "1", r.Header.Get("X-RateLimit-Limit"), what)
			assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"), what)
			assert.NotEmpty(t, r.Header.Get("X-RateLimit-Reset"), what)
			assert.NotContains(t, string(r.Body), "access_token", what)
		}
		for _, c := range sdkCalls(t, tw, 2) {
			spent(e.Do(c.method, c.path, login.AccessToken, c.body), c.name)
		}
		// The login's budget is the client's, whatever the address.
		spent(sdkLoginFrom(t, e, ownerAddr, "sdk-rl-spent", secret), "login")
		spent(sdkLoginFrom(t, e, "192.0.2.61", "sdk-rl-spent", secret), "login from another address")
		assert.Equal(t, before, sdkEffects(t, e, tw.ID), "a refused call records nothing")

		// Another client has its own limits.
		r = sdkLoginFrom(t, e, ownerAddr, "sdk-rl-other", otherSecret)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r.JSON(t, &login)
		c := sdkCalls(t, tw, 3)[0]
		r = e.Do(c.method, c.path, login.AccessToken, c.body)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "1", r.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, before["tower_sessions"]+1, sdkEffects(t, e, tw.ID)["tower_sessions"])
	})

	t.Run("wrong passwords wait per client id and source address", func(t *testing.T) {
		secret := limitedSDKClient(t, e, "sdk-rl-guessed", 0, 0)
		statuses, elapsed := attemptBurst(12, func() int {
			r := sdkLoginFrom(t, e, guesserAddr, "sdk-rl-guessed", "wrong-password")
			requireProblem(t, r, r.Status)
			return r.Status
		})
		requireBackoff(t, statuses, elapsed, http.StatusUnauthorized)

		// The right password from another address logs in, and another client from the
		// guesser's address too: the back-off is that client's at that address only.
		r := sdkLoginFrom(t, e, ownerAddr, "sdk-rl-guessed", secret)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.NotEmpty(t, r.Header.Get("X-RateLimit-Limit"))
		sp := e.Creds.ServiceProvider
		r = sdkLoginFrom(t, e, guesserAddr, sp.ClientID, sp.ClientSecret)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})
}
