package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

func requireNoCORS(t *testing.T, r testenv.Response) {
	t.Helper()
	for name := range r.Header {
		assert.False(t, strings.HasPrefix(strings.ToLower(name), "access-control-"), "CORS header %s", name)
	}
}

func requireRateLimitHeaders(t *testing.T, r testenv.Response, limit int) {
	t.Helper()
	assert.Equal(t, strconv.Itoa(limit), r.Header.Get("X-RateLimit-Limit"))
	remaining, err := strconv.Atoi(r.Header.Get("X-RateLimit-Remaining"))
	require.NoError(t, err)
	assert.True(t, remaining >= 0 && remaining < limit, "remaining %d", remaining)
	reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, reset, time.Now().Unix()-1, "reset is a Unix time now or later")
}

func TestCloudMetaKeysAndErrors(t *testing.T) {
	t.Parallel()
	e, _, _ := startCloudEnv(t)
	key := e.GatewayKey()
	c := newCloudClient(t, e.URL, key)
	anon := newCloudClient(t, e.URL, "")

	t.Run("version probe needs no key", func(t *testing.T) {
		r := anon.do(http.MethodGet, "/", nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		m := r.Map(t)
		assert.Equal(t, "v1", m["version"])
		assert.NotEmpty(t, m["name"])
		assert.Regexp(t, timestampRE, m["serverTime"])
		assert.Contains(t, m, "deprecation")
		assert.Nil(t, m["deprecation"])
		assert.Empty(t, r.Header.Get("Deprecation"))
		assert.Empty(t, r.Header.Get("X-RateLimit-Limit"), "no key, no rate limit")
	})

	t.Run("me with X-API-Key and with Bearer", func(t *testing.T) {
		for _, hdr := range [][]string{{"X-API-Key", key}, {"Authorization", "Bearer " + key}} {
			r := anon.do(http.MethodGet, "/me", nil, hdr...)
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			var me struct {
				KeyID        string `json:"keyId"`
				KeyPrefix    string `json:"keyPrefix"`
				Organization struct {
					ID   int64  `json:"id"`
					Name string `json:"name"`
				} `json:"organization"`
				RateLimit struct {
					Limit         int `json:"limit"`
					WindowSeconds int `json:"windowSeconds"`
				} `json:"rateLimit"`
			}
			r.JSON(t, &me)
			_, err := uuid.Parse(me.KeyID)
			assert.NoError(t, err)
			assert.Equal(t, key[:12], me.KeyPrefix)
			assert.Equal(t, e.Creds.OrganizationID, me.Organization.ID)
			assert.Equal(t, "Demo Logistics", me.Organization.Name)
			assert.Equal(t, 120, me.RateLimit.Limit)
			assert.Equal(t, 60, me.RateLimit.WindowSeconds)
			requireRateLimitHeaders(t, r, 120)
		}
	})

	t.Run("401 for missing, malformed and unknown keys", func(t *testing.T) {
		for _, hdr := range [][]string{nil, {"X-API-Key", "nope"}, {"X-API-Key", credential.NewGatewayKey()},
			{"Authorization", "Bearer " + credential.NewGatewayKey()}, {"Authorization", "Basic " + key}, {"X-API-Key", strings.ToUpper(key)}} {
			r := anon.do(http.MethodGet, "/locations", nil, hdr...)
			requireCloudError(t, r, http.StatusUnauthorized, "UNAUTHORIZED")
			assert.Empty(t, r.Header.Get("X-RateLimit-Limit"))
		}
	})

	t.Run("OPTIONS is 405 before authentication, and there is no CORS", func(t *testing.T) {
		for _, path := range []string{"/", "/me", "/locations/1/lockers", "/no/such/route"} {
			r := anon.do(http.MethodOptions, path, nil, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
			requireCloudError(t, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
			requireNoCORS(t, r)
		}
		r := c.do(http.MethodGet, "/me", nil, "Origin", "https://evil.example")
		require.Equal(t, http.StatusOK, r.Status)
		requireNoCORS(t, r)
	})

	t.Run("router errors in the surface's body", func(t *testing.T) {
		requireCloudError(t, c.do(http.MethodGet, "/no/such/route", nil), http.StatusNotFound, "NOT_FOUND")
		requireCloudError(t, c.do(http.MethodDelete, "/me", nil), http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		big := fmt.Sprintf(`{"outOfService": true, "reason": %q}`, strings.Repeat("x", 70<<10))
		r := c.do(http.MethodPatch, "/locations/1/lockers/101", big)
		requireCloudError(t, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
		requireRateLimitHeaders(t, r, 120)
	})

	t.Run("unknown locations are 404 in the surface's body", func(t *testing.T) {
		towerOnly := e.Seed.Towers[0].LocationID // a location without a gateway
		for _, loc := range []int64{999999, towerOnly} {
			r := c.do(http.MethodGet, fmt.Sprintf("/locations/%d/lockers", loc), nil)
			m := requireCloudError(t, r, http.StatusNotFound, "LOCATION_NOT_FOUND")
			assert.Nil(t, m["requestId"])
		}
	})

	t.Run("unknown request ids are 404", func(t *testing.T) {
		requireCloudError(t, c.do(http.MethodGet, "/requests/"+uuid.NewString(), nil), http.StatusNotFound, "REQUEST_NOT_FOUND")
		requireCloudError(t, c.do(http.MethodGet, "/requests/not-a-uuid", nil), http.StatusNotFound, "REQUEST_NOT_FOUND")
	})
}

func TestCloudLocationsShowGatewayHealth(t *testing.T) {
	t.Parallel()
	e, gw1, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	type summary struct {
		ID            int64   `json:"id"`
		Name          string  `json:"name"`
		Timezone      *string `json:"timezone"`
		GatewayID     string  `json:"gatewayId"`
		GatewayOnline bool    `json:"gatewayOnline"`
		LastSeenAt    *string `json:"lastSeenAt"`
	}
	list := func() []summary {
		r := c.do(http.MethodGet, "/locations", nil)
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		var out struct {
			Data []summary `json:"data"`
		}
		r.JSON(t, &out)
		return out.Data
	}
	ls := list()
	require.Len(t, ls, 2, "gateway locations only")
	assert.Equal(t, []string{"Downtown Hub", "Culver City"}, []string{ls[0].Name, ls[1].Name})
	assert.Equal(t, []int64{gw1.LocationID, gw2.LocationID}, []int64{ls[0].ID, ls[1].ID})
	assert.Equal(t, []string{"GW-0001", "GW-0002"}, []string{ls[0].GatewayID, ls[1].GatewayID})
	assert.False(t, ls[0].GatewayOnline, "not heard from yet")
	assert.Nil(t, ls[0].LastSeenAt)
	require.NotNil(t, ls[0].Timezone)
	assert.Equal(t, "America/Los_Angeles", *ls[0].Timezone)

	// A request outcome shows GW-0001 alive; the health loop finds GW-0002 unreachable.
	require.Equal(t, http.StatusOK, c.do(http.MethodGet, locPath(gw1, "/health"), nil).Status)
	setFaults(t, gw2, simctl.Faults{Mode: simctl.ModeUnreachable})
	e.StartGatewaySync(t, time.Second)
	require.Eventually(t, func() bool {
		ls = list()
		return ls[0].GatewayOnline && ls[0].LastSeenAt != nil
	}, 30*time.Second, 50*time.Millisecond)
	assert.Regexp(t, timestampRE, *ls[0].LastSeenAt)
	assert.False(t, ls[1].GatewayOnline)

	setFaults(t, gw2, simctl.Faults{Mode: simctl.ModeNone})
	require.Eventually(t, func() bool { return list()[1].GatewayOnline }, 30*time.Second, 50*time.Millisecond)

	// The sync keeps a mirror of the gateway's lockers for the app engine.
	require.Eventually(t, func() bool {
		lockers, err := e.Store.GatewayLockers(t.Context(), gw2.DBID)
		return err == nil && len(lockers) == 8
	}, 30*time.Second, 50*time.Millisecond)
	_, lk, err := e.Store.GatewayLockerByName(t.Context(), e.Creds.OrganizationID, gw2.LocationID, "3")
	require.NoError(t, err)
	assert.Equal(t, 203, lk.LockerID)
	require.NotNil(t, lk.LockerTypeName)
	assert.Equal(t, "small", *lk.LockerTypeName)
	assert.False(t, lk.OutOfService)

	// A proxied write asks for a refresh: the mirror follows it.
	r := c.do(http.MethodPatch, locPath(gw2, "/lockers/203"), map[string]any{"outOfService": true})
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Eventually(t, func() bool {
		_, lk, err := e.Store.GatewayLockerByName(t.Context(), e.Creds.OrganizationID, gw2.LocationID, "3")
		return err == nil && lk.OutOfService
	}, 30*time.Second, 50*time.Millisecond)
}

// respond-async answers 202 from the stored request at once — before the gateway has been
// called back, with a fast gateway too — and a poll answers at once while a slow hardware
// call is in flight. Behaviour, not a stopwatch: the door has not moved when the answers
// arrive.
func TestCloudRespondAsyncIsAtOnce(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	opens := func() int { return simStats(t, gw1).Opens["101"] }

	// A fast gateway: still 202 and pending, never the gateway's answer.
	for range 5 {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "respond-async")
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		assert.Contains(t, []string{"pending", "dispatched"}, r.Header.Get("X-Request-State"))
		assert.Equal(t, "respond-async", r.Header.Get("Preference-Applied"))
		assert.Equal(t, cloudBase+"/requests/"+r.Header.Get("X-Request-Id"), r.Header.Get("Location"))
		final := c.poll(r.Header.Get("X-Request-Id"))
		require.Equal(t, http.StatusOK, final.Status, "body: %s", final.Body)
	}

	// A slow gateway (every local-API call held 4 s): the 202 and a poll both come back
	// while the door has not moved.
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 4000})
	before := opens()
	r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "respond-async")
	require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
	assert.Equal(t, before, opens(), "the 202 came before the door moved")
	id := r.Header.Get("X-Request-Id")
	require.Eventually(t, func() bool {
		p := c.do(http.MethodGet, "/requests/"+id, nil)
		return p.Status == http.StatusOK && p.Header.Get("X-Request-State") == "dispatched"
	}, 3*time.Second, 20*time.Millisecond, "a poll answers the in-flight call's state")
	p := c.do(http.MethodGet, "/requests/"+id, nil)
	assert.Equal(t, "dispatched", p.Header.Get("X-Request-State"), "body: %s", p.Body)
	assert.Empty(t, p.Header.Get("Preference-Applied"))
	assert.Equal(t, before, opens(), "the polls came back while the hardware call was in flight")
	final := c.poll(id)
	require.Equal(t, http.StatusOK, final.Status, "body: %s", final.Body)
	assert.Equal(t, before+1, opens())

	// With a wait that the answer beats, respond-async was not applied: the wait was.
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeNone})
	r = c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "respond-async, wait=10")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	assert.Equal(t, "wait=10", r.Header.Get("Preference-Applied"))
}

func TestCloudPreferWaitsAndPolls(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 1500})

	requirePending := func(r testenv.Response, status int) map[string]any {
		t.Helper()
		require.Equal(t, status, r.Status, "body: %s", r.Body)
		requireProxied(t, r, gw1, r.Header.Get("X-Request-State"))
		assert.Contains(t, []string{"pending", "dispatched"}, r.Header.Get("X-Request-State"))
		m := r.Map(t)
		assert.Equal(t, r.Header.Get("X-Request-Id"), m["id"])
		assert.Equal(t, r.Header.Get("X-Request-State"), m["status"])
		assert.Equal(t, "open-locker", m["kind"])
		assert.Equal(t, http.MethodPost, m["method"])
		assert.Equal(t, fmt.Sprintf("%s/locations/%d/lockers/101/open", cloudBase, gw1.LocationID), m["path"])
		assert.Equal(t, float64(gw1.LocationID), m["locationId"])
		assert.Equal(t, "GW-0001", m["gatewayId"])
		assert.Regexp(t, timestampRE, m["createdAt"])
		assert.Regexp(t, timestampRE, m["updatedAt"])
		assert.Nil(t, m["completedAt"])
		assert.Contains(t, m, "attempts")
		return m
	}

	t.Run("respond-async: 202 at once, then poll", func(t *testing.T) {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "respond-async")
		requirePending(r, http.StatusAccepted)
		id := r.Header.Get("X-Request-Id")
		assert.Equal(t, cloudBase+"/requests/"+id, r.Header.Get("Location"))
		assert.Equal(t, "1", r.Header.Get("Retry-After"))
		assert.Equal(t, "respond-async", r.Header.Get("Preference-Applied"))

		// A poll without a wait answers the pending record with 200 (no Location).
		p := c.do(http.MethodGet, "/requests/"+id, nil)
		if p.Header.Get("X-Request-State") != "completed" {
			requirePending(p, http.StatusOK)
			assert.Empty(t, p.Header.Get("Location"))
		}
		// A long poll waits for the terminal state.
		final := c.do(http.MethodGet, "/requests/"+id, nil, "Prefer", "wait=10")
		requireProxied(t, final, gw1, "completed")
		assert.Equal(t, "wait=10", final.Header.Get("Preference-Applied"))
		require.Equal(t, http.StatusOK, final.Status)
		assert.Equal(t, true, final.Map(t)["doorOpen"])
		assert.Equal(t, id, final.Header.Get("X-Request-Id"))
		// And it stays answerable.
		again := c.do(http.MethodGet, "/requests/"+id, nil)
		assert.Equal(t, string(final.Body), string(again.Body))
		assert.Equal(t, "completed", again.Header.Get("X-Request-State"))
	})

	t.Run("wait=0 is 202 at once", func(t *testing.T) {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "wait=0")
		requirePending(r, http.StatusAccepted)
		assert.Equal(t, "wait=0", r.Header.Get("Preference-Applied"))
		c.poll(r.Header.Get("X-Request-Id"))
	})

	t.Run("wait=1 is 202 when the gateway takes longer", func(t *testing.T) {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "wait=1")
		if r.Status == http.StatusAccepted { // (a very slow machine could make anything pass)
			requirePending(r, http.StatusAccepted)
			assert.Equal(t, "wait=1", r.Header.Get("Preference-Applied"))
		}
		c.poll(r.Header.Get("X-Request-Id"))
	})

	for _, tc := range []struct{ name, prefer, applied string }{
		{"wait above 30 is clamped to 30", "wait=3600", "wait=30"},
		{"malformed preferences are ignored: the default wait applies", "wait=soon, handling=lenient", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", tc.prefer)
			requireProxied(t, r, gw1, "completed")
			assert.Equal(t, http.StatusOK, r.Status)
			assert.Equal(t, tc.applied, r.Header.Get("Preference-Applied"), "Preference-Applied")
		})
	}
}

// An instance holds at most MaxWaiters requests open waiting for gateways: one more answers
// 503 with Retry-After before anything is stored (no request, no door), respond-async still
// answers 202, and a slot frees as soon as a waiting request ends.
func TestCloudWaitersAreBounded(t *testing.T) {
	t.Parallel()
	settings := testenv.ScaledCloudSettings()
	settings.MaxWaiters = 1
	e := testenv.Start(t, testenv.Options{Cloud: settings})
	e.RunGatewayCloud(t)
	gw1, _ := e.StartDemoGateways(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 2000})

	first := make(chan testenv.Response, 1)
	go func() { first <- c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Prefer", "wait=10") }()
	require.Eventually(t, func() bool {
		var n int
		_ = e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_requests WHERE gateway_path = '/lockers/101/open'`).Scan(&n)
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "the first request is stored and waiting")

	r := c.do(http.MethodPost, locPath(gw1, "/lockers/102/open"), nil, "Prefer", "wait=10")
	requireCloudError(t, r, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
	assert.Equal(t, "1", r.Header.Get("Retry-After"))
	var stored int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_requests WHERE gateway_path = '/lockers/102/open'`).Scan(&stored))
	assert.Zero(t, stored, "the refused request left nothing behind")

	async := c.do(http.MethodPost, locPath(gw1, "/lockers/103/open"), nil, "Prefer", "respond-async")
	assert.Equal(t, http.StatusAccepted, async.Status, "%s", async.Body)

	require.Equal(t, http.StatusOK, (<-first).Status)
	r = c.do(http.MethodGet, "/requests/"+async.Header.Get("X-Request-Id"), nil, "Prefer", "wait=10")
	assert.Equal(t, http.StatusOK, r.Status, "the slot is free again: %s", r.Body)
	assert.Zero(t, simStats(t, gw1).Opens["102"])
}
