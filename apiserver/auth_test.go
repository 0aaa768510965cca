package apiserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
)

// tamperSignature flips one bit of the token's signature.
func tamperSignature(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sig[0] ^= 0x01
	parts[2] = base64.RawURLEncoding.EncodeToString(sig)
	return strings.Join(parts, ".")
}

// tamperPayload swaps the claims for others (another organization) and keeps the signature.
func tamperPayload(t *testing.T, tok string, org int64) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	forged := strings.Replace(string(claims), fmt.Sprintf(`"org":%d,`, org), fmt.Sprintf(`"org":%d,`, org+1), 1)
	require.NotEqual(t, string(claims), forged, "claims: %s", claims)
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
	return strings.Join(parts, ".")
}

func TestBearerAuth(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	good := demoToken(t, e)
	clientID, org := e.Creds.ServiceProvider.ClientID, e.Creds.OrganizationID

	expired, _, err := e.Auth.Issue(ctx, clientID, clientID, org, []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}, -time.Minute)
	require.NoError(t, err)
	towerOnly := demoToken(t, e, jwtauth.ScopeTowerAccess)
	otherIssuer := jwtauth.New(e.Store, e.Keyring, "https://someone-else.example")
	require.NoError(t, otherIssuer.EnsureKey(ctx))
	foreign, _, err := otherIssuer.Issue(ctx, clientID, clientID, org, []string{jwtauth.ScopeServiceProvider}, time.Hour)
	require.NoError(t, err)

	locker := lockerID(t, e, towerUnion1, smallHigh)
	loc := locationID(t, e, towerUnion1)
	res := reserve(t, e, good, towerUnion1, locker, 3600)

	routes := []struct {
		method, path string
		body         any
		// anyScope: any valid token will do (login/test-token).
		anyScope bool
	}{
		{http.MethodGet, "/api/v1/locations/in-area?" + laArea, nil, false},
		{http.MethodGet, "/api/v1/locations/?" + laArea, nil, false},
		{http.MethodGet, "/api/v1/locations/", nil, false},
		{http.MethodGet, "/api/v1/locations", nil, false},
		{http.MethodGet, "/api/v1/locations/closest?lat=34.0562&lon=-118.2365", nil, false},
		{http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", loc), nil, false},
		{http.MethodGet, "/api/v1/towers/" + towerUnion1, nil, false},
		{http.MethodGet, "/api/v1/towers/" + towerUnion1 + "/lockers", nil, false},
		{http.MethodPost, reservePath(towerUnion1, lockerID(t, e, towerUnion1, mediumHigh)), map[string]any{"duration": 60}, false},
		{http.MethodDelete, reservePath(towerUnion1, locker) + "/" + res.ID, nil, false},
		{http.MethodGet, "/api/v1/reservations/" + res.ID, nil, false},
		{http.MethodPost, "/api/v1/login/authorize", map[string]any{"userId": "u1"}, false},
		{http.MethodPost, "/api/v1/login/test-token", nil, true},
	}
	tokens := []struct {
		name, authorization string
		status              int
		detail              string
	}{
		{"no Authorization header", "", http.StatusUnauthorized, "missing"},
		{"tampered signature", "Bearer " + tamperSignature(t, good), http.StatusUnauthorized, "invalid"},
		{"tampered payload", "Bearer " + tamperPayload(t, good, org), http.StatusUnauthorized, "invalid"},
		{"expired", "Bearer " + expired, http.StatusUnauthorized, "expired"},
		{"another issuer", "Bearer " + foreign, http.StatusUnauthorized, "invalid"},
		{"garbage token", "Bearer not.a.jwt", http.StatusUnauthorized, "invalid"},
		{"garbage header", "garbage", http.StatusUnauthorized, "missing"},
		{"Bearer without a token", "Bearer ", http.StatusUnauthorized, "missing"},
		{"Basic credentials", basicAuth(clientID, e.Creds.ServiceProvider.ClientSecret), http.StatusUnauthorized, "missing"},
		{"a token without its dots", "Bearer " + strings.ReplaceAll(good, ".", ""), http.StatusUnauthorized, "invalid"},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			t.Parallel()
			for _, tk := range tokens {
				h := http.Header{"Content-Type": {"application/json"}}
				if tk.authorization != "" {
					h.Set("Authorization", tk.authorization)
				}
				var body *strings.Reader
				if rt.body != nil {
					body = strings.NewReader(mustJSON(t, rt.body))
				} else {
					body = strings.NewReader("")
				}
				r := send(t, rt.method, e.URL+rt.path, h, body)
				m := requireProblem(t, r, tk.status)
				assert.Contains(t, strings.ToLower(m["detail"].(string)), tk.detail, "%s: %s", tk.name, r.Body)
				assert.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer", tk.name)
			}

			// A tower_access token lacks service_provider.
			r := e.Do(rt.method, rt.path, towerOnly, rt.body)
			if rt.anyScope {
				assert.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
				return
			}
			m := requireProblem(t, r, http.StatusForbidden)
			assert.Contains(t, m["detail"], "service_provider")
		})
	}

	t.Cleanup(func() {
		// None of the refused requests changed anything.
		assert.Equal(t, "active", getReservation(t, e, good, res.ID).Status)
		assert.Equal(t, "available", towerLocker(t, e, good, towerUnion1, lockerID(t, e, towerUnion1, mediumHigh)).Status.Name)
	})
}

func TestPublicRoutesNeedNoToken(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	for _, p := range []string{"/healthz", "/readyz", "/.well-known/jwks.json", "/.well-known/openid-configuration"} {
		r := e.Do(http.MethodGet, p, "", nil)
		assert.Equal(t, http.StatusOK, r.Status, "%s: %s", p, r.Body)
	}
	r := e.Do(http.MethodGet, "/api/v1/no-such-route", "", nil)
	requireProblem(t, r, http.StatusNotFound)
}
