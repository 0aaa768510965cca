package apiserver_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// Text Postgres cannot store — a NUL character, bytes that are not UTF-8 — in any part of a
// request answers the surface's 4xx error body, never a 5xx, on every surface; nothing is
// issued or stored. An escaped backslash before "u0000" is ordinary text.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	appKey := e.Creds.AppEngineAPIKey
	gwKey := e.Creds.GatewayAPIKey
	loc := locationID(t, e, towerSantaMon)
	json := http.Header{"Content-Type": {"application/json"}}
	withAuth := func(h http.Header, k, v string) http.Header {
		c := h.Clone()
		if c == nil {
			c = http.Header{}
		}
		c.Set(k, v)
		return c
	}
	bearer := func(h http.Header) http.Header { return withAuth(h, "Authorization", "Bearer "+tok) }
	apiKey := func(h http.Header) http.Header { return withAuth(h, "x-api-key", appKey) }
	gw := func(h http.Header) http.Header { return withAuth(h, "X-API-Key", gwKey) }
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tokenForm := func(id string) string {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {"x"}}.Encode()
	}

	type shape int
	const (
		problem shape = iota
		oauth
		cloud
	)
	cases := []struct {
		name, method, path string
		header             http.Header
		body               string
		shape              shape
	}{
		{"token endpoint form field", http.MethodPost, "/oauth/token", form, tokenForm("demo\x00"), oauth},
		{"token endpoint form field, not UTF-8", http.MethodPost, "/oauth/token", form, tokenForm("demo\xff"), oauth},
		{"login/authorize userId", http.MethodPost, "/api/v1/login/authorize", bearer(json), `{"userId": "\u0000"}`, problem},
		{"login/authorize userId inside text", http.MethodPost, "/api/v1/login/authorize", bearer(json), `{"userId": "ab\u0000cd"}`, problem},
		{"link returnUrl", http.MethodPost, "/api/v1/locker-open-requests/dropoff-locker-request", bearer(json),
			`{"locationId": ` + itoa(loc) + `, "lockerTypeId": 1, "returnUrl": "app://x\u0000"}`, problem},
		{"link clientInfo", http.MethodPost, "/api/v1/locker-open-requests/dropoff-locker-request", bearer(json),
			`{"locationId": ` + itoa(loc) + `, "lockerTypeId": 1, "clientInfo": "\u0000"}`, problem},
		{"query filter", http.MethodGet, "/api/v1/locations/closest?lat=34.0562&lon=-118.2365&name=%00", bearer(nil), "", problem},
		{"path", http.MethodGet, "/api/v1/towers/01000000000000%0021", bearer(nil), "", problem},
		{"app engine filter", http.MethodGet, "/dropoff/organization/transactions?city=%00", apiKey(nil), "", problem},
		{"app engine filter, not UTF-8", http.MethodGet, "/dropoff/organization/transactions?locker_number=%FF%FE", apiKey(nil), "", problem},
		{"app engine body", http.MethodPost, "/auth/api-key", apiKey(json), `{"client_id": "\u0000", "client_secret": "x", "organization_id": 1}`, problem},
		{"mobile SDK body", http.MethodPost, "/sdk/v1/towers/" + towerSantaMon + "/session-token", bearer(json),
			`{"duration": 60, "claims": ["sync_packet"], "version": "1.0\u0000"}`, problem},
		{"gateway cloud query", http.MethodGet, "/api/customer/v1/locations/" + itoa(loc) + "/lockers?name=%00", gw(nil), "", cloud},
		{"gateway cloud body", http.MethodPost, "/api/customer/v1/locations/" + itoa(loc) + "/transactions", gw(json),
			`{"transactionId": "t\u0000"}`, cloud},
		{"gateway cloud Idempotency-Key", http.MethodPost, "/api/customer/v1/locations/" + itoa(loc) + "/transactions",
			withAuth(gw(json), "Idempotency-Key", "k\xff"), `{"transactionId": "t1"}`, cloud},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body *strings.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			} else {
				body = strings.NewReader("")
			}
			r := send(t, c.method, e.URL+c.path, c.header, body)
			require.Less(t, r.Status, 500, "%s", r.Body)
			require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
			m := r.Map(t)
			switch c.shape {
			case oauth:
				assert.Equal(t, http.StatusBadRequest, r.Status)
				assert.Equal(t, "invalid_request", m["error"], "%s", r.Body)
			case cloud:
				assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
				assert.Equal(t, "VALIDATION_FAILED", m["error"], "%s", r.Body)
			default:
				assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
				assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
				assert.NotEmpty(t, m["detail"])
			}
			assert.NotContains(t, string(r.Body), "\\u0000", "the answer does not echo the NUL")
		})
	}

	// An escaped backslash followed by "u0000" is six ordinary characters.
	r := send(t, http.MethodPost, e.URL+"/api/v1/login/authorize", bearer(json), strings.NewReader(`{"userId": "a\\u0000"}`))
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Credentials that disagree are refused on every surface (401 in the surface's body), never
// answered as whichever header is read first; the same credential twice is fine.
func TestConflictingCredentials(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	tok := demoToken(t, e)
	gwKey := e.Creds.GatewayAPIKey
	other := "lnk_" + strings.Repeat("0", 64)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	me := e.URL + "/api/customer/v1/me"
	for name, hdr := range map[string]http.Header{
		"X-API-Key and another key as bearer": h("X-API-Key", gwKey, "Authorization", "Bearer "+other),
		"two different X-API-Key headers":     h("X-API-Key", gwKey, "X-API-Key", other),
		"the other key first":                 h("X-API-Key", other, "Authorization", "Bearer "+gwKey),
	} {
		r := send(t, http.MethodGet, me, hdr, nil)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r.Body)
		assert.Equal(t, "UNAUTHORIZED", r.Map(t)["error"], name)
	}
	r := send(t, http.MethodGet, me, h("X-API-Key", gwKey, "Authorization", "Bearer "+gwKey), nil)
	assert.Equal(t, http.StatusOK, r.Status, "the same key twice agrees: %s", r.Body)

	closest := e.URL + "/api/v1/locations/closest?lat=34.0562&lon=-118.2365"
	for name, hdr := range map[string]http.Header{
		"bearer and an X-API-Key":   h("Authorization", "Bearer "+tok, "X-API-Key", gwKey),
		"two Authorization headers": h("Authorization", "Bearer "+tok, "Authorization", "Bearer "+demoToken(t, e, "tower_access")),
	} {
		requireProblem(t, send(t, http.MethodGet, closest, hdr, nil), http.StatusUnauthorized)
		_ = name
	}
	assert.Equal(t, http.StatusOK, send(t, http.MethodGet, closest, h("Authorization", "Bearer "+tok), nil).Status)

	keys := e.URL + "/auth/api-key"
	requireProblem(t, send(t, http.MethodGet, keys, h("x-api-key", e.Creds.AppEngineAPIKey, "x-api-key", "lna_other"), nil), http.StatusUnauthorized)
	requireProblem(t, send(t, http.MethodGet, keys, h("x-api-key", e.Creds.AppEngineAPIKey, "Authorization", "Bearer "+tok), nil), http.StatusUnauthorized)
	assert.Equal(t, http.StatusOK, send(t, http.MethodGet, keys, h("x-api-key", e.Creds.AppEngineAPIKey), nil).Status)
}

// /metrics is served on the internal listener only, never on the API port (DESIGN §8).
func TestMetricsOnlyOnTheInternalListener(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	r := e.Do(http.MethodGet, "/metrics", "", nil)
	requireProblem(t, r, http.StatusNotFound)
	m := testenv.DoWithHeaders(t, http.MethodGet, e.MetricsURL(e.URL)+"/metrics", nil, nil)
	require.Equal(t, http.StatusOK, m.Status)
	assert.Contains(t, string(m.Body), "lockernet_http_request_duration_seconds")
}
