package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/webhook"
)

// receiver is a real HTTP server that answers deliveries with the statuses it is told and
// keeps what it received.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []received
	statuses []int // answered in turn; 200 once spent
	calls    atomic.Int32
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	rc := &receiver{statuses: statuses}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderID) == "" {
			// Not a delivery (every delivery carries webhook-id): a request of another test's
			// system that reached this port after the port it meant was closed and handed out
			// again. Neither recorded nor answered as a receiver would a delivery.
			t.Logf("receiver: a request that is not a delivery: %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			// The sender gave up mid-body (its attempt timed out on a loaded machine): a
			// real receiver never sees such a delivery whole, and neither does this one.
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		n := int(rc.calls.Add(1)) - 1
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: b})
		status := http.StatusOK
		if n < len(rc.statuses) {
			status = rc.statuses[n]
		}
		rc.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "receiver says "+http.StatusText(status))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func (rc *receiver) setStatuses(s ...int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.statuses = append(make([]int, rc.calls.Load()), s...)
}

func createEndpoint(t *testing.T, e *testenv.Env, key, url string, extra map[string]any) (id string, secret []byte) {
	t.Helper()
	body := map[string]any{"url": url}
	for k, v := range extra {
		body[k] = v
	}
	r := doKey(t, e, http.MethodPost, "/webhooks/endpoints", key, body)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	m := r.Map(t)
	s, _ := m["secret"].(string)
	require.True(t, strings.HasPrefix(s, "whsec_"), "secret %q", s)
	k, err := webhook.ParseSecret(s)
	require.NoError(t, err)
	require.Len(t, k, 32)
	return m["id"].(string), k
}

func deliveries(t *testing.T, e *testenv.Env, key, endpoint string) []map[string]any {
	t.Helper()
	r := doKey(t, e, http.MethodGet, "/webhooks/endpoints/"+endpoint+"/deliveries", key, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page struct {
		Data []map[string]any `json:"data"`
	}
	r.JSON(t, &page)
	return page.Data
}

func waitDelivery(t *testing.T, e *testenv.Env, key, endpoint, eventID, status string) map[string]any {
	t.Helper()
	var last map[string]any
	require.Eventually(t, func() bool {
		for _, d := range deliveries(t, e, key, endpoint) {
			if d["event_id"] == eventID {
				last = d
				return d["status"] == status
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "delivery of %s never became %s (last %v)", eventID, status, last)
	return last
}

func sendTest(t *testing.T, e *testenv.Env, key, endpoint string) string {
	t.Helper()
	r := doKey(t, e, http.MethodPost, "/webhooks/endpoints/"+endpoint+"/test", key, nil)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	id := r.Map(t)["event_id"].(string)
	require.True(t, strings.HasPrefix(id, "evt_"), id)
	return id
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{WebhookSchedule: []time.Duration{300 * time.Millisecond, 300 * time.Millisecond}})
	admin := e.Creds.AppEngineAPIKey

	t.Run("a test event arrives signed, once", func(t *testing.T) {
		rc := newReceiver(t)
		ep, key := createEndpoint(t, e, admin, rc.srv.URL+"/hooks", map[string]any{"description": "backend"})
		evt := sendTest(t, e, admin, ep)
		d := waitDelivery(t, e, admin, ep, evt, "succeeded")
		assert.EqualValues(t, 1, d["attempts"])
		assert.EqualValues(t, 200, d["last_status_code"])
		assert.Nil(t, d["next_attempt_at"])
		assert.NotNil(t, d["completed_at"])
		got := rc.received()
		require.Len(t, got, 1)
		h := got[0].header
		assert.Equal(t, evt, h.Get("webhook-id"))
		assert.Equal(t, "application/json", h.Get("Content-Type"))
		require.NoError(t, webhook.Verify(key, h, got[0].body, time.Now(), 5*time.Minute))
		other, _ := webhook.ParseSecret("whsec_" + strings.Repeat("A", 43) + "=")
		assert.ErrorIs(t, webhook.Verify(other, h, got[0].body, time.Now(), 5*time.Minute), webhook.ErrSignature)
		var p map[string]any
		require.NoError(t, json.Unmarshal(got[0].body, &p))
		assert.Equal(t, evt, p["id"])
		assert.Equal(t, "webhook.test", p["type"])
		assert.EqualValues(t, e.Creds.OrganizationID, p["organization_id"])
		assert.Nil(t, p["sub_organization_id"])
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, p["created_at"])
		assert.Equal(t, ep, p["data"].(map[string]any)["endpoint_id"])

		// The event log shows it the way it was delivered.
		r := doKey(t, e, http.MethodGet, "/webhooks/events?type=webhook.test&limit=100", admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Contains(t, string(r.Body), evt)
	})

	t.Run("500 twice, then 200: delivered on the third attempt", func(t *testing.T) {
		rc := newReceiver(t, 500, 500)
		ep, _ := createEndpoint(t, e, admin, rc.srv.URL, nil)
		evt := sendTest(t, e, admin, ep)
		d := waitDelivery(t, e, admin, ep, evt, "succeeded")
		assert.EqualValues(t, 3, d["attempts"])
		got := rc.received()
		require.Len(t, got, 3)
		for _, g := range got {
			assert.Equal(t, evt, g.header.Get("webhook-id"), "the same webhook-id on every attempt")
		}
	})

	t.Run("down past the last attempt: failed, then redelivered", func(t *testing.T) {
		rc := newReceiver(t, 503, 503, 503)
		ep, _ := createEndpoint(t, e, admin, rc.srv.URL, nil)
		evt := sendTest(t, e, admin, ep)
		d := waitDelivery(t, e, admin, ep, evt, "failed")
		assert.EqualValues(t, 3, d["attempts"], "one attempt and one per wait of the schedule")
		assert.EqualValues(t, 503, d["last_status_code"])
		assert.Contains(t, d["last_error"], "HTTP 503: receiver says Service Unavailable")
		r := doKey(t, e, http.MethodGet, "/webhooks/endpoints/"+ep+"/deliveries?status=failed", admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Contains(t, string(r.Body), evt)

		rc.setStatuses(200)
		r = doKey(t, e, http.MethodPost, "/webhooks/deliveries/"+d["id"].(string)+"/retry", admin, nil)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		assert.Equal(t, "pending", r.Map(t)["status"])
		d = waitDelivery(t, e, admin, ep, evt, "succeeded")
		assert.EqualValues(t, 4, d["attempts"])
		got := rc.received()
		require.Len(t, got, 4)
		assert.Equal(t, evt, got[3].header.Get("webhook-id"))
	})

	t.Run("410 disables the endpoint", func(t *testing.T) {
		rc := newReceiver(t, http.StatusGone)
		ep, _ := createEndpoint(t, e, admin, rc.srv.URL, nil)
		evt := sendTest(t, e, admin, ep)
		waitDelivery(t, e, admin, ep, evt, "failed")
		r := doKey(t, e, http.MethodGet, "/webhooks/endpoints/"+ep, admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		m := r.Map(t)
		assert.Equal(t, false, m["enabled"])
		assert.Equal(t, "the receiver answered 410 Gone", m["disabled_reason"])
		r = doKey(t, e, http.MethodPost, "/webhooks/endpoints/"+ep+"/test", admin, nil)
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		r = doKey(t, e, http.MethodPatch, "/webhooks/endpoints/"+ep, admin, map[string]any{"enabled": true})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Nil(t, r.Map(t)["disabled_reason"])
	})

	t.Run("a rotated secret: both sign for a while", func(t *testing.T) {
		rc := newReceiver(t)
		ep, oldKey := createEndpoint(t, e, admin, rc.srv.URL, nil)
		r := doKey(t, e, http.MethodPost, "/webhooks/endpoints/"+ep+"/rotate-secret", admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		newKey, err := webhook.ParseSecret(r.Map(t)["secret"].(string))
		require.NoError(t, err)
		evt := sendTest(t, e, admin, ep)
		waitDelivery(t, e, admin, ep, evt, "succeeded")
		got := rc.received()
		require.Len(t, got, 1)
		assert.Len(t, strings.Fields(got[0].header.Get("webhook-signature")), 2)
		assert.NoError(t, webhook.Verify(newKey, got[0].header, got[0].body, time.Now(), 5*time.Minute))
		assert.NoError(t, webhook.Verify(oldKey, got[0].header, got[0].body, time.Now(), 5*time.Minute))
	})

	t.Run("a deleted endpoint gets nothing more", func(t *testing.T) {
		rc := newReceiver(t)
		ep, _ := createEndpoint(t, e, admin, rc.srv.URL, nil)
		r := doKey(t, e, http.MethodDelete, "/webhooks/endpoints/"+ep, admin, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
		r = doKey(t, e, http.MethodGet, "/webhooks/endpoints/"+ep, admin, nil)
		assert.Equal(t, http.StatusNotFound, r.Status)
		r = doKey(t, e, http.MethodPost, "/webhooks/endpoints/"+ep+"/test", admin, nil)
		assert.Equal(t, http.StatusNotFound, r.Status)
	})
	t.Run("the delivery and event logs page newest first with next_cursor", func(t *testing.T) {
		rc := newReceiver(t)
		ep, _ := createEndpoint(t, e, admin, rc.srv.URL, nil)
		since := time.Now().UTC().Format(time.RFC3339Nano) // the events of the subtests before are older
		var sent []string
		for range 3 {
			sent = append(sent, sendTest(t, e, admin, ep))
		}
		// Every page of limit 2, following next_cursor until it is null.
		pages := func(path, idField string) (ids []string, pageSizes []int) {
			t.Helper()
			next := ""
			for range 5 {
				url := path + "&limit=2"
				if next != "" {
					url += "&cursor=" + next
				}
				r := doKey(t, e, http.MethodGet, url, admin, nil)
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				var page struct {
					Data       []map[string]any `json:"data"`
					NextCursor *string          `json:"next_cursor"`
				}
				require.NoError(t, json.Unmarshal(r.Body, &page))
				pageSizes = append(pageSizes, len(page.Data))
				for _, d := range page.Data {
					ids = append(ids, d[idField].(string))
				}
				if page.NextCursor == nil {
					return ids, pageSizes
				}
				next = *page.NextCursor
			}
			t.Fatalf("%s: more pages than entries", path)
			return nil, nil
		}
		newestFirst := []string{sent[2], sent[1], sent[0]}
		ids, sizes := pages("/webhooks/endpoints/"+ep+"/deliveries?status=", "event_id")
		assert.Equal(t, newestFirst, ids, "each delivery once, newest first")
		assert.Equal(t, []int{2, 1}, sizes)
		ids, sizes = pages("/webhooks/events?type=webhook.test&since="+since, "id")
		assert.Equal(t, newestFirst, ids, "each event once, newest first")
		assert.Equal(t, []int{2, 1}, sizes)

		for _, q := range []string{"?cursor=zz", "?limit=0", "?limit=101"} {
			r := doKey(t, e, http.MethodGet, "/webhooks/events"+q, admin, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", q, r.Body)
			assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
		}
	})
}

func TestWebhookEndpointManagement(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	admin := e.Creds.AppEngineAPIKey

	t.Run("create, list, get, update; never the secret again", func(t *testing.T) {
		ep, _ := createEndpoint(t, e, admin, "http://127.0.0.1:9/hooks", map[string]any{
			"description": "orders", "event_types": []string{"access_code.used", "locker.pickup_completed", "access_code.used"}})
		r := doKey(t, e, http.MethodGet, "/webhooks/endpoints", admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.NotContains(t, string(r.Body), "whsec_")
		var list []map[string]any
		r.JSON(t, &list)
		require.Len(t, list, 1)
		assert.Equal(t, ep, list[0]["id"])
		assert.Equal(t, []any{"access_code.used", "locker.pickup_completed"}, list[0]["event_types"])
		assert.Equal(t, true, list[0]["enabled"])

		r = doKey(t, e, http.MethodPatch, "/webhooks/endpoints/"+ep, admin, map[string]any{"event_types": []string{}, "enabled": false})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := r.Map(t)
		assert.Equal(t, []any{}, m["event_types"])
		assert.Equal(t, false, m["enabled"])
		assert.Equal(t, "orders", m["description"], "absent fields stay")
		assert.Nil(t, m["disabled_reason"], "disabled by its owner, not the service")
	})

	t.Run("bad input is 422 problem+json", func(t *testing.T) {
		for _, body := range []map[string]any{
			{"url": "ftp://example.com/x"},
			{"url": "not a url"},
			{"url": "https://user:pw@example.com/"},
			{"url": "https://example.com/" + strings.Repeat("a", 2100)},
			{"url": "https://example.com/", "event_types": []string{"parcel.teleported"}},
			{"url": "https://example.com/", "event_types": "all"},
			{"url": 7},
			{},
		} {
			r := doKey(t, e, http.MethodPost, "/webhooks/endpoints", admin, body)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%v: %s", body, r.Body)
			assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
		}
		for _, q := range []string{"?status=lost", "?limit=0", "?limit=101", "?cursor=zz"} {
			ep, _ := createEndpoint(t, e, admin, "http://127.0.0.1:9/", nil)
			r := doKey(t, e, http.MethodGet, "/webhooks/endpoints/"+ep+"/deliveries"+q, admin, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", q, r.Body)
		}
		for _, q := range []string{"?type=nope", "?since=yesterday", "?limit=x"} {
			r := doKey(t, e, http.MethodGet, "/webhooks/events"+q, admin, nil)
			assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", q, r.Body)
		}
		for _, p := range []string{"/webhooks/endpoints/nope", "/webhooks/endpoints/00000000-0000-0000-0000-000000000000"} {
			assert.Equal(t, http.StatusNotFound, doKey(t, e, http.MethodGet, p, admin, nil).Status, p)
		}
		assert.Equal(t, http.StatusNotFound, doKey(t, e, http.MethodPost, "/webhooks/deliveries/nope/retry", admin, nil).Status)
		assert.Equal(t, http.StatusUnauthorized, doKey(t, e, http.MethodGet, "/webhooks/endpoints", "", nil).Status)
	})

	t.Run("another organization sees none of it", func(t *testing.T) {
		ep, _ := createEndpoint(t, e, admin, "http://127.0.0.1:9/mine", nil)
		other := e.NewOtherOrg(t)
		otherKey := testenv.NewAppKey(t, e, other.OrgID)
		r := doKey(t, e, http.MethodGet, "/webhooks/endpoints", otherKey, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.NotContains(t, string(r.Body), ep)
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/webhooks/endpoints/" + ep},
			{http.MethodPatch, "/webhooks/endpoints/" + ep},
			{http.MethodDelete, "/webhooks/endpoints/" + ep},
			{http.MethodPost, "/webhooks/endpoints/" + ep + "/rotate-secret"},
			{http.MethodPost, "/webhooks/endpoints/" + ep + "/test"},
			{http.MethodGet, "/webhooks/endpoints/" + ep + "/deliveries"},
		} {
			var body any
			if c.method == http.MethodPatch {
				body = map[string]any{"enabled": false}
			}
			r := doKey(t, e, c.method, c.path, otherKey, body)
			assert.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", c.method, c.path, r.Body)
		}
		r = doKey(t, e, http.MethodGet, "/webhooks/events?limit=100", otherKey, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.JSONEq(t, `{"data":[],"next_cursor":null}`, string(r.Body))
	})
}

// fakeDNS answers the names a production check looks up, without the network.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net_error{host}
}

type net_error struct{ host string }

func (e *net_error) Error() string { return "no such host " + e.host }

func TestWebhookURLsInProduction(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{
		"intranet.example": {netip.MustParseAddr("10.1.2.3")},
		"mixed.example":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")},
		"hooks.example":    {netip.MustParseAddr("93.184.216.34")},
	}
	e := testenv.Start(t, testenv.Options{NoWorker: true,
		Webhooks: apiserver.WebhookSettings{Policy: webhook.Policy{Strict: true, Resolver: dns}}})
	admin := e.Creds.AppEngineAPIKey
	for url, why := range map[string]string{
		"http://127.0.0.1/":                  "https",
		"https://127.0.0.1/":                 "loopback",
		"https://[::1]/":                     "loopback",
		"https://10.0.0.1/":                  "private",
		"https://169.254.169.254/latest":     "link-local",
		"https://224.0.0.1/":                 "multicast",
		"https://0.0.0.0/":                   "unspecified",
		"https://intranet.example/hooks":     "private",
		"https://mixed.example/hooks":        "private",
		"https://nowhere.example/hooks":      "does not resolve",
		"http://hooks.example/":              "https",
		"https://[::ffff:10.0.0.1]:8443/x":   "private",
		"https://100.64.0.1/":                "private",
		"https://[fe80::1]/":                 "link-local",
		"https://[fc00::1]/":                 "private",
		"https://hooks.example:443/?a=b#c":   "fragment",
		"https://hooks.example/" + "\u00e9x": "",
	} {
		r := doKey(t, e, http.MethodPost, "/webhooks/endpoints", admin, map[string]any{"url": url})
		if why == "" {
			assert.Equal(t, http.StatusCreated, r.Status, "%s: %s", url, r.Body)
			continue
		}
		assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", url, r.Body)
		assert.Contains(t, string(r.Body), why, url)
	}
	ep, _ := createEndpoint(t, e, admin, "https://hooks.example/in", nil)
	r := doKey(t, e, http.MethodPatch, "/webhooks/endpoints/"+ep, admin, map[string]any{"url": "https://169.254.169.254/"})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "an update is checked too: %s", r.Body)
}
