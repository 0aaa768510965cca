package apiserver_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// Every credential exchange is limited, and wrong credentials apart from right ones (DESIGN
// §8). The test server is reached over loopback, a trusted proxy by default, so
// X-Forwarded-For names the client address as nginx does in production.

const (
	guesserAddr = "203.0.113.7"
	ownerAddr   = "198.51.100.9"
)

// tokenFrom asks POST /oauth/token for the client's token as a client at addr would.
func tokenFrom(t *testing.T, e *testenv.Env, addr, clientID, secret string) testenv.Response {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}.Encode()
	return send(t, http.MethodPost, e.URL+"/oauth/token", http.Header{
		"Content-Type": {"application/x-www-form-urlencoded"}, "X-Forwarded-For": {addr}}, strings.NewReader(form))
}

// sdkLoginFrom is the SDK's login from addr.
func sdkLoginFrom(t *testing.T, e *testenv.Env, addr, username, password string) testenv.Response {
	t.Helper()
	form := url.Values{"username": {username}, "password": {password}}.Encode()
	return send(t, http.MethodPost, e.URL+"/sdk/v1/login/access-token", http.Header{
		"Content-Type": {"application/x-www-form-urlencoded"}, "X-Forwarded-For": {addr}}, strings.NewReader(form))
}

func retryAfter(t *testing.T, r testenv.Response) int {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	return n
}

// TestSDKLoginSharesTheTokenBudget: POST /sdk/v1/login/access-token is a credential exchange
// like POST /oauth/token and spends the same budget per client; it answers 429 in its own
// problem body once the budget is spent, and the token endpoint does too.
func TestSDKLoginSharesTheTokenBudget(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RateLimits: apiserver.RateLimits{Tower: 1000000, AppKey: 1000000, Token: 4}})
	sp := e.Creds.ServiceProvider

	require.Equal(t, http.StatusOK, tokenFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret).Status)
	require.Equal(t, http.StatusOK, tokenFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret).Status)
	require.Equal(t, http.StatusOK, sdkLoginFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret).Status)
	r := sdkLoginFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	r = sdkLoginFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret)
	requireProblem(t, r, http.StatusTooManyRequests)
	assert.Positive(t, retryAfter(t, r))
	assert.Equal(t, "4", r.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
	assert.NotContains(t, string(r.Body), "access_token")

	r = tokenFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret)
	requireOAuthError(t, r, http.StatusTooManyRequests, "slow_down")

	// Another client has its own budget.
	other := e.NewOtherOrg(t)
	require.Equal(t, http.StatusOK, sdkLoginFrom(t, e, ownerAddr, other.ClientID, other.ClientSecret).Status)
}

// judgedAtMost is how many wrong credentials of one bucket may be judged (answered 401) in
// elapsed: five at once, then one each time a back-off lapses, each back-off twice the last
// (1 s, 2 s, 4 s ...). A slow machine may let a back-off lapse between two attempts; never more.
func judgedAtMost(elapsed time.Duration) int {
	n, wait := 5, time.Second
	for total := time.Duration(0); total <= elapsed; total += wait {
		n++
		wait *= 2
	}
	return n
}

// attemptBurst makes n attempts one after the other and reports their statuses and how long
// they took.
func attemptBurst(n int, attempt func() int) (statuses []int, elapsed time.Duration) {
	began := time.Now()
	for range n {
		statuses = append(statuses, attempt())
	}
	return statuses, time.Since(began)
}

// requireBackoff checks a burst of wrong credentials of one bucket: the first five are
// judged (judged is their status), then the bucket waits, answering 429.
func requireBackoff(t *testing.T, statuses []int, elapsed time.Duration, judged int) {
	t.Helper()
	count := map[int]int{}
	for i, st := range statuses {
		if i < 5 {
			require.Equal(t, judged, st, "attempt %d is judged", i+1)
		}
		count[st]++
	}
	assert.Len(t, count, 2, "only %d and 429: %v", judged, count)
	assert.LessOrEqual(t, count[judged], judgedAtMost(elapsed), "judged in %s", elapsed)
	assert.GreaterOrEqual(t, count[http.StatusTooManyRequests], len(statuses)-judgedAtMost(elapsed))
}

// TestWrongSecretsNeverLockOutTheRightOne: wrong secrets count per (client id, source
// address) with a growing back-off, apart from the client's budget; the right secret from
// another address keeps getting tokens; the guesser's address learns nothing while it waits.
func TestWrongSecretsNeverLockOutTheRightOne(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RateLimits: apiserver.RateLimits{Tower: 1000000, AppKey: 1000000, Token: 60}})
	sp := e.Creds.ServiceProvider

	// 60 wrong secrets, the attack (the budget is 60 a minute): five are judged, then
	// the address waits.
	statuses, elapsed := attemptBurst(60, func() int { return tokenFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret").Status })
	requireBackoff(t, statuses, elapsed, http.StatusUnauthorized)
	last := tokenFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret")
	requireOAuthError(t, last, http.StatusTooManyRequests, "slow_down")
	assert.Positive(t, retryAfter(t, last))

	// The right secret from another address: a token at once, and again.
	for range 3 {
		r := tokenFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret)
		requireTokenResponse(t, r)
	}
	r := sdkLoginFrom(t, e, ownerAddr, sp.ClientID, sp.ClientSecret)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// From the guesser's address even the right secret waits (no oracle), on both endpoints:
	// they share the count.
	requireOAuthError(t, tokenFrom(t, e, guesserAddr, sp.ClientID, sp.ClientSecret), http.StatusTooManyRequests, "slow_down")
	r = sdkLoginFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret")
	requireProblem(t, r, http.StatusTooManyRequests)
	assert.Positive(t, retryAfter(t, r))

	// The back-off grows: each time it lapses, one more wrong secret is judged and earns
	// twice the wait.
	waitOut := func() { // until the address's back-off has lapsed
		for {
			r := tokenFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret")
			if r.Status == http.StatusTooManyRequests {
				time.Sleep(time.Duration(retryAfter(t, r))*time.Second + 100*time.Millisecond)
				return
			}
		}
	}
	backoff := func() int {
		t.Helper()
		waitOut()
		began := time.Now()
		requireOAuthError(t, tokenFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret"), http.StatusUnauthorized, "invalid_client")
		r := tokenFrom(t, e, guesserAddr, sp.ClientID, "wrong-secret")
		requireOAuthError(t, r, http.StatusTooManyRequests, "slow_down")
		return retryAfter(t, r) + int(time.Since(began)/time.Second) // as it was when it began
	}
	first := backoff()
	second := backoff()
	assert.GreaterOrEqual(t, first, 2)
	assert.InDelta(t, 2*first, second, 1, "each back-off is twice the last")

	// Ids that name no client are counted per address too.
	statuses, elapsed = attemptBurst(8, func() int {
		return tokenFrom(t, e, "192.0.2.44", "nobody-"+strconv.Itoa(time.Now().Nanosecond()), "x").Status
	})
	requireBackoff(t, statuses, elapsed, http.StatusUnauthorized)

	// Parallel guesses cannot all slip under the limit: each is answered from the count its
	// own statement finds.
	began := time.Now()
	statuses = concurrentStatuses(20, func() int {
		return tokenFrom(t, e, "192.0.2.77", sp.ClientID, "wrong-secret").Status
	})
	elapsed = time.Since(began)
	count := map[int]int{}
	for _, st := range statuses {
		count[st]++
	}
	assert.GreaterOrEqual(t, count[http.StatusUnauthorized], 5)
	assert.LessOrEqual(t, count[http.StatusUnauthorized], judgedAtMost(elapsed), "judged in %s", elapsed)
	assert.Equal(t, 20, count[http.StatusUnauthorized]+count[http.StatusTooManyRequests])

	// A client's own parallel requests from one address are never counted as guesses.
	statuses = concurrentStatuses(12, func() int {
		return tokenFrom(t, e, "192.0.2.99", sp.ClientID, sp.ClientSecret).Status
	})
	assert.Equal(t, slices.Repeat([]int{http.StatusOK}, 12), statuses)

	// The right secret clears its address's count.
	_ = tokenFrom(t, e, "192.0.2.88", sp.ClientID, "wrong-secret")
	_ = tokenFrom(t, e, "192.0.2.88", sp.ClientID, "wrong-secret")
	requireTokenResponse(t, tokenFrom(t, e, "192.0.2.88", sp.ClientID, sp.ClientSecret))
	for range 4 {
		requireOAuthError(t, tokenFrom(t, e, "192.0.2.88", sp.ClientID, "wrong-secret"), http.StatusUnauthorized, "invalid_client")
	}
}

// TestWrongKeysAreLimitedPerAddress: wrong app engine and gateway cloud API keys count per
// source address; past five the address's wrong keys answer 429 in the surface's body, while
// a valid key keeps working from every address, that one included.
func TestWrongKeysAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})

	t.Run("app engine API", func(t *testing.T) {
		get := func(addr, key string) testenv.Response {
			return testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/auth/api-key", map[string]string{"x-api-key": key, "X-Forwarded-For": addr}, nil)
		}
		i := 0
		statuses, elapsed := attemptBurst(8, func() int {
			i++
			r := get(guesserAddr, "lna_guess"+strconv.Itoa(i))
			requireProblem(t, r, r.Status)
			return r.Status
		})
		requireBackoff(t, statuses, elapsed, http.StatusUnauthorized)
		r := get(guesserAddr, "lna_guess-more")
		requireProblem(t, r, http.StatusTooManyRequests)
		assert.Positive(t, retryAfter(t, r))
		assert.Contains(t, string(r.Body), "invalid API keys")
		assert.Equal(t, http.StatusOK, get(guesserAddr, e.Creds.AppEngineAPIKey).Status, "a valid key works from that address too")
		assert.Equal(t, http.StatusOK, get(ownerAddr, e.Creds.AppEngineAPIKey).Status)
		requireProblem(t, get(ownerAddr, "lna_typo"), http.StatusUnauthorized)
	})

	t.Run("gateway cloud API", func(t *testing.T) {
		get := func(addr, key string) testenv.Response {
			return testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/api/customer/v1/me", map[string]string{"X-API-Key": key, "X-Forwarded-For": addr}, nil)
		}
		wrong := "lnk_" + strings.Repeat("0", 64)
		i := 0
		statuses, elapsed := attemptBurst(8, func() int {
			i++
			if i == 3 {
				return get(guesserAddr, "not-even-a-key").Status // a malformed key is a wrong key too
			}
			return get(guesserAddr, wrong).Status
		})
		requireBackoff(t, statuses, elapsed, http.StatusUnauthorized)
		r := get(guesserAddr, wrong)
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
		assert.Equal(t, "RATE_LIMITED", r.Map(t)["error"])
		assert.Positive(t, retryAfter(t, r))
		assert.Equal(t, http.StatusOK, get(guesserAddr, e.GatewayKey()).Status, "a valid key works from that address too")
		assert.Equal(t, http.StatusUnauthorized, get(ownerAddr, wrong).Status)
	})
}
