package apiserver_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
)

func TestCloudRateLimitHoldsAcrossInstances(t *testing.T) {
	t.Parallel()
	e, _, _ := startCloudEnv(t)
	second := e.StartAPIServer(t, testenv.ScaledCloudSettings())
	key := e.GatewayKey()
	instances := []*cloudClient{newCloudClient(t, e.URL, key), newCloudClient(t, second, key)}

	// 150 requests as fast as 8 clients can send them, alternating between the instances.
	const total = 150
	var ok, limited atomic.Int64
	var retryAfter atomic.Value
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				r := instances[i%2].do(http.MethodGet, "/me", nil)
				switch r.Status {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
					retryAfter.Store(r)
				default:
					t.Errorf("unexpected status %d: %s", r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)

	// The bucket holds 120 and refills 2 per second: whatever the timing, no more than
	// 120 + 2/s of the time taken get through, and not one more.
	refill := int64(math.Ceil(elapsed.Seconds() * 2))
	assert.GreaterOrEqual(t, ok.Load(), int64(120))
	assert.LessOrEqual(t, ok.Load(), 120+refill, "took %s", elapsed)
	assert.Equal(t, int64(total), ok.Load()+limited.Load())
	require.Positive(t, limited.Load())

	r := retryAfter.Load().(testenv.Response)
	m := requireCloudError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	assert.Equal(t, float64(120), m["details"].(map[string]any)["limit"])
	wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, wait >= 1 && wait <= 60, "Retry-After %d", wait)
	assert.Equal(t, "120", r.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
	assert.NotEmpty(t, r.Header.Get("X-RateLimit-Reset"))

}

func TestCloudPerKeyRateLimitAndRevocation(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	second := e.StartAPIServer(t, testenv.ScaledCloudSettings())
	limit := 5
	key, k, err := e.Store.IssueGatewayKey(context.Background(), e.Creds.OrganizationID, "limited", &limit)
	require.NoError(t, err)
	a, b := newCloudClient(t, e.URL, key), newCloudClient(t, second, key)

	for i := range 5 {
		r := []*cloudClient{a, b}[i%2].do(http.MethodGet, "/me", nil)
		require.Equal(t, http.StatusOK, r.Status, "request %d: %s", i, r.Body)
		assert.Equal(t, "5", r.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, strconv.Itoa(4-i), r.Header.Get("X-RateLimit-Remaining"))
	}
	r := b.do(http.MethodGet, "/me", nil)
	requireCloudError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	assert.Equal(t, "5", r.Header.Get("X-RateLimit-Limit"))

	// Refusals are counted for operators.
	m := testenv.DoWithHeaders(t, http.MethodGet, e.MetricsURL(second)+"/metrics", nil, nil)
	assert.Regexp(t, `(?m)^lockernet_cloud_rate_limited_total [1-9]`, string(m.Body))

	// A refused request has no side effect: no gateway request, no door (the next token
	// comes 12 s later).
	r = a.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Idempotency-Key", "refused")
	requireCloudError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	assert.Empty(t, r.Header.Get("X-Request-Id"))
	assert.Zero(t, simStats(t, gw1).Requests)
	assert.Zero(t, simStats(t, gw1).Opens["101"])

	// Revocation: the key stops working on every instance within 5 s (here: at once, the
	// key is checked in Postgres on every request).
	other, _, err := e.Store.IssueGatewayKey(context.Background(), e.Creds.OrganizationID, "to revoke", nil)
	require.NoError(t, err)
	x, y := newCloudClient(t, e.URL, other), newCloudClient(t, second, other)
	require.Equal(t, http.StatusOK, x.do(http.MethodGet, "/me", nil).Status)
	require.Equal(t, http.StatusOK, y.do(http.MethodGet, "/me", nil).Status)
	revoked, err := e.Store.RevokeGatewayKeyByPrefix(context.Background(), other[:12])
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	require.Eventually(t, func() bool {
		return x.do(http.MethodGet, "/me", nil).Status == http.StatusUnauthorized &&
			y.do(http.MethodGet, "/me", nil).Status == http.StatusUnauthorized
	}, 5*time.Second, 10*time.Millisecond, "the DESIGN §2 bound: 5 s on every instance")
	requireCloudError(t, y.do(http.MethodGet, "/locations", nil), http.StatusUnauthorized, "UNAUTHORIZED")

	// The limited key is unaffected.
	_, err = e.Store.RevokeGatewayKey(context.Background(), k.ID)
	require.NoError(t, err)
	requireCloudError(t, a.do(http.MethodGet, "/me", nil), http.StatusUnauthorized, "UNAUTHORIZED")
}

func TestCloudTenantIsolation(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	demo := newCloudClient(t, e.URL, e.GatewayKey())
	o := e.NewOtherOrg(t)
	rivalGW := e.RegisterGateway(t, gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank, GatewayID: "RV-0001"}), "RV-0001", o.LocationID)
	rivalKey, _, err := e.Store.IssueGatewayKey(context.Background(), o.OrgID, "rival", nil)
	require.NoError(t, err)
	rival := newCloudClient(t, e.URL, rivalKey)

	demoReq := demo.do(http.MethodGet, locPath(gw1, "/lockers"), nil)
	require.Equal(t, http.StatusOK, demoReq.Status)
	rivalReq := rival.do(http.MethodGet, locPath(rivalGW, "/lockers"), nil)
	require.Equal(t, http.StatusOK, rivalReq.Status)

	t.Run("another organization's request id is 404, like one that does not exist", func(t *testing.T) {
		got := requireCloudError(t, rival.do(http.MethodGet, "/requests/"+demoReq.Header.Get("X-Request-Id"), nil), http.StatusNotFound, "REQUEST_NOT_FOUND")
		want := requireCloudError(t, rival.do(http.MethodGet, "/requests/"+uuid.NewString(), nil), http.StatusNotFound, "REQUEST_NOT_FOUND")
		assert.Equal(t, want["message"], got["message"])
		requireCloudError(t, demo.do(http.MethodGet, "/requests/"+rivalReq.Header.Get("X-Request-Id"), nil), http.StatusNotFound, "REQUEST_NOT_FOUND")
		// Each sees its own.
		assert.Equal(t, http.StatusOK, demo.do(http.MethodGet, "/requests/"+demoReq.Header.Get("X-Request-Id"), nil).Status)
	})

	t.Run("another organization's location is 404", func(t *testing.T) {
		for _, path := range []string{"/lockers", "/lockers/201/open", "/transactions"} {
			method := http.MethodGet
			if path != "/lockers" {
				method = http.MethodPost
			}
			got := requireCloudError(t, demo.do(method, locPath(rivalGW, path), nil), http.StatusNotFound, "LOCATION_NOT_FOUND")
			want := requireCloudError(t, demo.do(method, "/locations/999999"+path, nil), http.StatusNotFound, "LOCATION_NOT_FOUND")
			assert.Equal(t, want["message"], got["message"])
		}
		assert.Zero(t, simStats(t, rivalGW).Opens["201"])
	})

	t.Run("locations list only the key's organization", func(t *testing.T) {
		r := rival.do(http.MethodGet, "/locations", nil)
		require.Equal(t, http.StatusOK, r.Status)
		var out struct {
			Data []map[string]any `json:"data"`
		}
		r.JSON(t, &out)
		require.Len(t, out.Data, 1)
		assert.Equal(t, "RV-0001", out.Data[0]["gatewayId"])
	})

	t.Run("idempotency keys are per organization", func(t *testing.T) {
		key := uuid.NewString()
		a := demo.do(http.MethodPost, locPath(gw1, "/transactions"), nil, "Idempotency-Key", key)
		require.Equal(t, http.StatusCreated, a.Status, "body: %s", a.Body)
		b := rival.do(http.MethodPost, locPath(rivalGW, "/transactions"), nil, "Idempotency-Key", key)
		require.Equal(t, http.StatusCreated, b.Status, "body: %s", b.Body)
		assert.Empty(t, b.Header.Get("Idempotent-Replayed"))
		assert.NotEqual(t, a.Header.Get("X-Request-Id"), b.Header.Get("X-Request-Id"))
	})
}

// A worker that stops while requests are in flight: after it restarts, every request still
// reaches a terminal state and no door opened twice.
func TestCloudWorkerRestartSettlesEveryRequest(t *testing.T) {
	t.Parallel()
	e, gw1, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 1500})

	type sent struct {
		id, kind string
		locker   string
	}
	var reqs []sent
	send := func(method, path, kind, locker string, g *testenv.Gateway) {
		r := c.do(method, locPath(g, path), nil, "Prefer", "respond-async", "Idempotency-Key", uuid.NewString())
		require.Equal(t, http.StatusAccepted, r.Status, "body: %s", r.Body)
		reqs = append(reqs, sent{id: r.Header.Get("X-Request-Id"), kind: kind, locker: locker})
	}
	for _, l := range []string{"110", "111", "112"} {
		send(http.MethodPost, "/lockers/"+l+"/open", "open", l, gw1)
	}
	send(http.MethodPost, "/transactions", "create", "", gw1)
	send(http.MethodGet, "/lockers", "read", "", gw1)
	send(http.MethodGet, "/bank-types", "read", "", gw1)

	// Stop the worker while those calls wait at the slow gateway.
	require.Eventually(t, func() bool { return simStats(t, gw1).Requests >= int64(len(reqs)) }, 30*time.Second, 10*time.Millisecond)
	e.StopWorker()

	// Requests made while no worker runs are accepted and wait.
	for _, l := range []string{"204", "205"} {
		send(http.MethodPost, "/lockers/"+l+"/open", "open", l, gw2)
	}
	send(http.MethodGet, "/lockers/config", "read", "", gw2)
	for _, rq := range reqs[len(reqs)-3:] {
		r := c.do(http.MethodGet, "/requests/"+rq.id, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Contains(t, []string{"pending", "dispatched"}, r.Header.Get("X-Request-State"))
	}

	e.StartWorker()
	for _, rq := range reqs {
		final := c.poll(rq.id)
		state := final.Header.Get("X-Request-State")
		switch rq.kind {
		case "open":
			// Either it went through once, or its fate was unknown and it was not re-sent.
			assert.Contains(t, []string{"completed", "gateway_unresponsive"}, state, "request %s: %s", rq.id, final.Body)
		default:
			// Reads and creates are safe to re-send: they complete.
			assert.Equal(t, "completed", state, "request %s: %s", rq.id, final.Body)
			assert.Less(t, final.Status, 300, "request %s: %s", rq.id, final.Body)
		}
	}
	for _, g := range []*testenv.Gateway{gw1, gw2} {
		for locker, n := range simStats(t, g).Opens {
			assert.LessOrEqual(t, n, 1, "locker %s opened %d times", locker, n)
		}
	}
	for _, l := range []string{"204", "205"} {
		assert.Equal(t, 1, simStats(t, gw2).Opens[l], "sent after the restart")
	}
}

func TestCloudDeprecationHeaders(t *testing.T) {
	t.Parallel()
	e, _, _ := startCloudEnv(t)
	settings := testenv.ScaledCloudSettings()
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	sunset := time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC)
	settings.Deprecation = &apiserver.Deprecation{At: at, Sunset: sunset, Link: "https://docs.example/migrate-to-v2"}
	deprecated := e.StartAPIServer(t, settings)

	check := func(r testenv.Response) {
		t.Helper()
		assert.Equal(t, fmt.Sprintf("@%d", at.Unix()), r.Header.Get("Deprecation"))
		assert.Equal(t, "Thu, 01 Jul 2027 00:00:00 GMT", r.Header.Get("Sunset"))
		assert.Contains(t, r.Header.Values("Link"), `<https://docs.example/migrate-to-v2>; rel="sunset"`)
	}
	c := newCloudClient(t, deprecated, e.GatewayKey())
	meta := newCloudClient(t, deprecated, "").do(http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, meta.Status)
	check(meta)
	d := meta.Map(t)["deprecation"].(map[string]any)
	assert.Equal(t, "2027-01-01T00:00:00.000Z", d["deprecatedAt"])
	assert.Equal(t, "2027-07-01T00:00:00.000Z", d["sunsetAt"])
	assert.Equal(t, "https://docs.example/migrate-to-v2", d["link"])

	check(c.do(http.MethodGet, "/me", nil))
	check(newCloudClient(t, deprecated, "").do(http.MethodGet, "/me", nil)) // 401
	check(c.do(http.MethodOptions, "/me", nil))                             // 405
	check(c.do(http.MethodGet, "/nope", nil))                               // 404

	// Not configured: no headers (the default instance).
	r := newCloudClient(t, e.URL, e.GatewayKey()).do(http.MethodGet, "/me", nil)
	assert.Empty(t, r.Header.Get("Deprecation"))
	assert.Empty(t, r.Header.Get("Sunset"))
	assert.Empty(t, r.Header.Values("Link"))
}

// A request stored by an apiserver that stopped before it started the request's workflow is
// picked up by the reconciler of any instance.
func TestCloudReconcilerStartsStalledRequests(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	id := uuid.New()
	_, _, err := e.Store.CreateGatewayRequest(context.Background(), store.NewGatewayRequest{
		ID: id, OrganizationID: e.Creds.OrganizationID, LocationID: gw1.LocationID, GatewayID: gw1.DBID, GatewaySerial: gw1.Serial,
		Kind: "open-locker", Class: "hardware", Method: http.MethodPost,
		Path: fmt.Sprintf("%s/locations/%d/lockers/116/open", cloudBase, gw1.LocationID), GatewayPath: "/lockers/116/open",
	}, nil)
	require.NoError(t, err)
	_, err = e.Store.Pool().Exec(context.Background(), `UPDATE gateway_requests SET created_at = now() - interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)

	// Nothing but the reconciler starts it: no call, no poll until the door has moved (a long
	// poll would start a missing workflow itself).
	before := simStats(t, gw1).Opens["116"]
	e.ReconcileGatewayRequests(t, 30*time.Second)
	require.Eventually(t, func() bool { return simStats(t, gw1).Opens["116"] == before+1 }, 30*time.Second, 50*time.Millisecond,
		"the reconciler started the stalled request's workflow")
	final := c.poll(id.String())
	requireProxied(t, final, gw1, "completed")
	assert.Equal(t, http.StatusOK, final.Status)
	assert.Equal(t, 1, simStats(t, gw1).Opens["116"])

	e.ReconcileGatewayRequests(t, 30*time.Second) // settled requests are left alone
	assert.Equal(t, 1, simStats(t, gw1).Opens["116"])
}

// A proxied call's key is checked and counted in the round trip that stores its request; it
// answers exactly as when the key is checked first: a bad key is 401 whatever else is wrong
// with the request, a key over its limit 429, neither stores anything or reaches the door,
// and the rate-limit headers come with every answer to a valid key.
func TestCloudProxiedCallChecksItsKeyWithItsRequest(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	limit := 3
	key, _, err := e.Store.IssueGatewayKey(context.Background(), e.Creds.OrganizationID, "three", &limit)
	require.NoError(t, err)
	c := newCloudClient(t, e.URL, key)
	unknown := newCloudClient(t, e.URL, credential.NewGatewayKey())
	stored := func() int {
		var n int
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_requests`).Scan(&n))
		return n
	}

	t.Run("an unknown key is 401, before the input's own errors", func(t *testing.T) {
		big := fmt.Sprintf(`{"outOfService": true, "reason": %q}`, strings.Repeat("x", 70<<10))
		for _, r := range []testenv.Response{
			unknown.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil),
			unknown.do(http.MethodPost, locPath(gw1, "/lockers/not-a-number/open"), nil),
			unknown.do(http.MethodPatch, locPath(gw1, "/lockers/101"), big),
			unknown.do(http.MethodGet, "/locations/999999/lockers", nil),
		} {
			requireCloudError(t, r, http.StatusUnauthorized, "UNAUTHORIZED")
			assert.Empty(t, r.Header.Get("X-RateLimit-Limit"))
			assert.Empty(t, r.Header.Get("X-Request-Id"))
		}
		assert.Zero(t, stored())
		assert.Zero(t, simStats(t, gw1).Opens["101"])
	})

	t.Run("a valid key's input errors keep their status, with the rate-limit headers", func(t *testing.T) {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/not-a-number/open"), nil)
		assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "body: %s", r.Body)
		assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "2", r.Header.Get("X-RateLimit-Remaining"))
		r = c.do(http.MethodGet, "/locations/999999/lockers", nil)
		requireCloudError(t, r, http.StatusNotFound, "LOCATION_NOT_FOUND")
		assert.Equal(t, "1", r.Header.Get("X-RateLimit-Remaining"))
		assert.Zero(t, stored())
	})

	t.Run("the call goes through, counted, timed as one store phase", func(t *testing.T) {
		r := c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil)
		requireProxied(t, r, gw1, "completed")
		assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
		assert.Regexp(t, `(^|, )store;dur=`, r.Header.Get("Server-Timing"))
		assert.NotContains(t, r.Header.Get("Server-Timing"), "auth;")
		assert.Equal(t, 1, stored())
		assert.Equal(t, 1, simStats(t, gw1).Opens["101"])
	})

	t.Run("over the limit: 429, nothing stored, the door untouched, before the input's own errors", func(t *testing.T) {
		for _, r := range []testenv.Response{
			c.do(http.MethodPost, locPath(gw1, "/lockers/101/open"), nil, "Idempotency-Key", "over"),
			c.do(http.MethodPost, locPath(gw1, "/lockers/not-a-number/open"), nil),
		} {
			requireCloudError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
			assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
			assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
			assert.Empty(t, r.Header.Get("X-Request-Id"))
		}
		assert.Equal(t, 1, stored())
		assert.Equal(t, 1, simStats(t, gw1).Opens["101"])
	})
}
