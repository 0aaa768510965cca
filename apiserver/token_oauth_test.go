package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

const formType = "application/x-www-form-urlencoded"

func basicAuth(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// postToken sends a raw body to a token endpoint path.
func postToken(t *testing.T, e *testenv.Env, path, contentType, authorization, body string) testenv.Response {
	t.Helper()
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if authorization != "" {
		h.Set("Authorization", authorization)
	}
	return send(t, http.MethodPost, e.URL+path, h, strings.NewReader(body))
}

// requireTokenResponse checks a successful token answer and returns the token and its scope.
func requireTokenResponse(t *testing.T, r testenv.Response) (token, scope string) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	m := r.Map(t)
	assert.Equal(t, sorted("access_token", "token_type", "expires_in", "refresh_token", "refresh_expires_in", "scope"), keys(m))
	assert.Equal(t, "Bearer", m["token_type"])
	assert.EqualValues(t, 300, m["expires_in"])
	assert.Nil(t, m["refresh_token"])
	assert.Contains(t, m, "refresh_token")
	assert.EqualValues(t, 0, m["refresh_expires_in"])
	token, _ = m["access_token"].(string)
	scope, _ = m["scope"].(string)
	require.NotEmpty(t, token)
	return token, scope
}

// requireOAuthError checks an RFC 6749 §5.2 error answer.
func requireOAuthError(t *testing.T, r testenv.Response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	m := r.Map(t)
	assert.Equal(t, code, m["error"], "body: %s", r.Body)
	desc, ok := m["error_description"].(string)
	assert.True(t, ok, "error_description must be a string: %s", r.Body)
	assert.NotEmpty(t, desc)
	assert.Equal(t, []string{"error", "error_description"}, keys(m))
	if status == http.StatusUnauthorized {
		assert.NotEmpty(t, r.Header.Get("WWW-Authenticate"))
	}
}

// principalOf asks login/test-token whom a token speaks for.
func principalOf(t *testing.T, e *testenv.Env, token string) map[string]any {
	t.Helper()
	r := e.Do(http.MethodPost, "/api/v1/login/test-token", token, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	return r.Map(t)
}

func TestTokenEndpoint(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	id, secret := e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret
	form := func(extra string) string {
		return "grant_type=client_credentials&client_id=" + url.QueryEscape(id) + "&client_secret=" + url.QueryEscape(secret) + extra
	}
	const alias = "/realms/lockernet/protocol/openid-connect/token"

	t.Run("issues tokens", func(t *testing.T) {
		cases := []struct {
			name, path, auth, body, scope string
		}{
			{"form credentials", "/oauth/token", "", form(""), "service_provider tower_access"},
			{"HTTP Basic", "/oauth/token", basicAuth(id, secret), "grant_type=client_credentials", "service_provider tower_access"},
			{"Basic with the same client_id in the form", "/oauth/token", basicAuth(id, secret), "grant_type=client_credentials&client_id=" + id, "service_provider tower_access"},
			{"Keycloak-style alias, form", alias, "", form(""), "service_provider tower_access"},
			{"Keycloak-style alias, Basic", alias, basicAuth(id, secret), "grant_type=client_credentials", "service_provider tower_access"},
			{"plus in the scope means space", "/oauth/token", "", form("&scope=service_provider+tower_access"), "service_provider tower_access"},
			{"percent-encoded space in the scope", "/oauth/token", "", form("&scope=tower_access%20service_provider"), "service_provider tower_access"},
			{"a subset of the scopes", "/oauth/token", "", form("&scope=tower_access"), "tower_access"},
			{"a repeated scope once", "/oauth/token", "", form("&scope=service_provider+service_provider"), "service_provider"},
			{"empty scope means all", "/oauth/token", "", form("&scope="), "service_provider tower_access"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tok, scope := requireTokenResponse(t, postToken(t, e, tc.path, formType, tc.auth, tc.body))
				assert.Equal(t, tc.scope, scope)
				p := principalOf(t, e, tok)
				assert.Equal(t, id, p["client_id"])
				assert.ElementsMatch(t, strings.Fields(tc.scope), p["scopes"])
			})
		}
	})

	t.Run("refuses", func(t *testing.T) {
		cases := []struct {
			name, contentType, auth, body string
			status                        int
			code                          string
		}{
			{"unknown scope", formType, "", form("&scope=admin"), 400, "invalid_scope"},
			{"one unknown scope among known ones", formType, "", form("&scope=service_provider+admin"), 400, "invalid_scope"},
			{"missing grant_type", formType, "", "client_id=" + id + "&client_secret=" + url.QueryEscape(secret), 400, "invalid_request"},
			{"password grant", formType, "", strings.Replace(form(""), "client_credentials", "password", 1), 400, "unsupported_grant_type"},
			{"authorization_code grant", formType, "", strings.Replace(form(""), "client_credentials", "authorization_code", 1), 400, "unsupported_grant_type"},
			{"repeated grant_type", formType, "", form("&grant_type=client_credentials"), 400, "invalid_request"},
			{"unknown client", formType, "", "grant_type=client_credentials&client_id=nobody&client_secret=x", 401, "invalid_client"},
			{"wrong secret", formType, "", "grant_type=client_credentials&client_id=" + id + "&client_secret=wrong", 401, "invalid_client"},
			{"wrong secret by Basic", formType, basicAuth(id, "wrong"), "grant_type=client_credentials", 401, "invalid_client"},
			{"no credentials", formType, "", "grant_type=client_credentials", 401, "invalid_client"},
			{"client_id without secret", formType, "", "grant_type=client_credentials&client_id=" + id, 401, "invalid_client"},
			{"malformed Basic", formType, "Basic !!!not-base64", "grant_type=client_credentials", 401, "invalid_client"},
			{"Basic without a colon", formType, "Basic " + base64.StdEncoding.EncodeToString([]byte(id)), "grant_type=client_credentials", 401, "invalid_client"},
			{"Basic and form secret", formType, basicAuth(id, secret), form(""), 400, "invalid_request"},
			{"Basic and another client_id", formType, basicAuth(id, secret), "grant_type=client_credentials&client_id=someone-else", 400, "invalid_request"},
			{"a JSON body", "application/json", "", mustJSON(t, map[string]string{"grant_type": "client_credentials", "client_id": id, "client_secret": secret}), 400, "invalid_request"},
			{"no content type", "", "", form(""), 400, "invalid_request"},
			{"empty body", formType, "", "", 400, "invalid_request"},
			{"malformed form", formType, "", "grant_type=%zz", 400, "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				for _, path := range []string{"/oauth/token", alias} {
					requireOAuthError(t, postToken(t, e, path, tc.contentType, tc.auth, tc.body), tc.status, tc.code)
				}
			})
		}
	})

	t.Run("a body over 64 KiB is refused", func(t *testing.T) {
		t.Parallel()
		r := postToken(t, e, "/oauth/token", formType, "", form("&pad="+strings.Repeat("x", 64<<10)))
		require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "body: %s", r.Body)
		assert.Equal(t, []string{"error", "error_description"}, keys(r.Map(t)))
	})

	t.Run("GET is not allowed", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodGet, "/oauth/token", "", nil)
		assert.Equal(t, http.StatusMethodNotAllowed, r.Status, "body: %s", r.Body)
	})
}

func TestTokenVerifiesWithJWKS(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	tok := e.Token()

	r := e.Do(http.MethodGet, "/.well-known/jwks.json", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var set jose.JSONWebKeySet
	r.JSON(t, &set)

	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256})
	require.NoError(t, err)
	require.Len(t, jws.Signatures, 1)
	kid := jws.Signatures[0].Header.KeyID
	require.NotEmpty(t, kid)
	found := set.Key(kid)
	require.Len(t, found, 1, "the JWKS publishes the token's kid %s: %s", kid, r.Body)
	assert.True(t, found[0].IsPublic())
	assert.Equal(t, "sig", found[0].Use)

	payload, err := jws.Verify(found[0])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(payload, &claims))
	for _, c := range []string{"iss", "sub", "org", "scope", "iat", "exp", "jti"} {
		assert.Contains(t, claims, c)
	}
	assert.Equal(t, e.URL, claims["iss"])
	assert.Equal(t, e.Creds.ServiceProvider.ClientID, claims["sub"])
	assert.EqualValues(t, e.Creds.OrganizationID, claims["org"])
	assert.Equal(t, "service_provider tower_access", claims["scope"])
	iat, _ := claims["iat"].(float64)
	exp, _ := claims["exp"].(float64)
	assert.EqualValues(t, 300, exp-iat)

	// A token signed by a key the JWKS does not hold must not verify with it.
	tampered := []byte(tok)
	tampered[len(tampered)-5] ^= 0x01
	if other, err := jose.ParseSignedCompact(string(tampered), []jose.SignatureAlgorithm{jose.EdDSA}); err == nil {
		_, err = other.Verify(found[0])
		assert.Error(t, err)
	}
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	for _, tc := range []struct{ path, tokenEndpoint string }{
		{"/.well-known/openid-configuration", "/oauth/token"},
		{"/realms/lockernet/.well-known/openid-configuration", "/realms/lockernet/protocol/openid-connect/token"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := e.Do(http.MethodGet, tc.path, "", nil)
			require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
			m := r.Map(t)
			assert.Equal(t, e.URL, m["issuer"])
			assert.Equal(t, e.URL+tc.tokenEndpoint, m["token_endpoint"])
			assert.Equal(t, e.URL+"/.well-known/jwks.json", m["jwks_uri"])
			assert.Equal(t, []any{"client_credentials"}, m["grant_types_supported"])
			assert.ElementsMatch(t, []any{"client_secret_basic", "client_secret_post"}, m["token_endpoint_auth_methods_supported"])
			assert.ElementsMatch(t, []any{"service_provider", "tower_access"}, m["scopes_supported"])
			assert.Contains(t, m["id_token_signing_alg_values_supported"], "EdDSA")

			// The advertised endpoints work.
			jwks := send(t, http.MethodGet, m["jwks_uri"].(string), nil, nil)
			assert.Equal(t, http.StatusOK, jwks.Status)
			form := url.Values{"grant_type": {"client_credentials"}, "client_id": {e.Creds.ServiceProvider.ClientID},
				"client_secret": {e.Creds.ServiceProvider.ClientSecret}}
			tok := send(t, http.MethodPost, m["token_endpoint"].(string), http.Header{"Content-Type": {formType}}, strings.NewReader(form.Encode()))
			requireTokenResponse(t, tok)
		})
	}
	t.Run("Keycloak-style certs alias is the JWKS", func(t *testing.T) {
		a := e.Do(http.MethodGet, "/realms/lockernet/protocol/openid-connect/certs", "", nil)
		b := e.Do(http.MethodGet, "/.well-known/jwks.json", "", nil)
		require.Equal(t, http.StatusOK, a.Status)
		assert.JSONEq(t, string(b.Body), string(a.Body))
	})
}

func TestLogin(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)

	t.Run("test-token returns the principal", func(t *testing.T) {
		t.Parallel()
		p := principalOf(t, e, e.Token())
		assert.Equal(t, e.Creds.ServiceProvider.ClientID, p["client_id"])
		assert.EqualValues(t, e.Creds.OrganizationID, p["organization_id"])
		assert.ElementsMatch(t, []any{"service_provider", "tower_access"}, p["scopes"])
		exp, _ := p["expires_at"].(string)
		require.Regexp(t, timestampRE, exp)
		at, err := time.Parse(time.RFC3339, exp)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(300*time.Second), at, time.Minute)
	})

	t.Run("test-token with a GET-style JSON content type and no body", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodPost, "/api/v1/login/test-token", tok, "")
		assert.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	})

	t.Run("authorize returns a tower_access token for the user", func(t *testing.T) {
		t.Parallel()
		r := e.Do(http.MethodPost, "/api/v1/login/authorize", tok, map[string]any{"userId": "user-42@example.com"})
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		m := r.Map(t)
		assert.Equal(t, sorted("access_token", "token_type", "expires_in"), keys(m))
		assert.Equal(t, "Bearer", m["token_type"])
		assert.EqualValues(t, 3600, m["expires_in"])
		sdk, _ := m["access_token"].(string)
		require.NotEmpty(t, sdk)

		p := principalOf(t, e, sdk)
		assert.Equal(t, "user-42@example.com", p["subject"])
		assert.Equal(t, e.Creds.ServiceProvider.ClientID, p["client_id"])
		assert.EqualValues(t, e.Creds.OrganizationID, p["organization_id"])
		assert.Equal(t, []any{"tower_access"}, p["scopes"])

		// It is no service-provider token.
		requireProblem(t, e.Do(http.MethodGet, "/api/v1/locations/?"+laArea, sdk, nil), http.StatusForbidden)
		requireProblem(t, e.Do(http.MethodPost, "/api/v1/login/authorize", sdk, map[string]any{"userId": "x"}), http.StatusForbidden)
	})

	t.Run("authorize refuses bad userIds", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			body any
		}{
			{"missing", map[string]any{}},
			{"empty", map[string]any{"userId": ""}},
			{"blank", map[string]any{"userId": "   "}},
			{"a number", map[string]any{"userId": 42}},
			{"null", `{"userId": null}`},
			{"too long", map[string]any{"userId": strings.Repeat("u", 129)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				requireProblem(t, e.Do(http.MethodPost, "/api/v1/login/authorize", tok, tc.body), http.StatusUnprocessableEntity)
			})
		}
	})
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	before := e.Token()
	oldKID := jwtauth.UnverifiedKID(before)
	require.NotEmpty(t, oldKID)

	newKID, err := e.Auth.Rotate(ctx)
	require.NoError(t, err)
	after := e.Token()

	assert.NotEqual(t, oldKID, jwtauth.UnverifiedKID(after))
	assert.Equal(t, newKID, jwtauth.UnverifiedKID(after))
	for name, tok := range map[string]string{"before": before, "after": after} {
		r := e.Do(http.MethodPost, "/api/v1/login/test-token", tok, nil)
		assert.Equal(t, http.StatusOK, r.Status, "token issued %s rotation: %s", name, r.Body)
		r = e.Do(http.MethodGet, "/api/v1/locations/?"+laArea, tok, nil)
		assert.Equal(t, http.StatusOK, r.Status, "token issued %s rotation: %s", name, r.Body)
	}

	r := e.Do(http.MethodGet, "/.well-known/jwks.json", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	var set jose.JSONWebKeySet
	r.JSON(t, &set)
	assert.Len(t, set.Key(oldKID), 1, "the retired key stays published")
	assert.Len(t, set.Key(newKID), 1)
}

// Disabling a client cuts it off: no new token, the tokens it holds and the app keys it made
// stop working (within the 2 s cache), and enabling it restores them. A client not granted
// tower_access cannot hand tower_access tokens to its users.
func TestDisabledClientIsCutOff(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := context.Background()
	id, secret := "cutoff-client", credential.NewSecret()
	require.NoError(t, e.Store.CreateClient(ctx, store.Client{ClientID: id, OrganizationID: e.Creds.OrganizationID,
		Name: "client to disable", SecretHash: credential.Hash(secret), Scopes: []string{jwtauth.ScopeServiceProvider}}))
	tok := clientToken(t, e, id, secret)
	locations := "/api/v1/locations/closest?lat=34.0562&lon=-118.2365"
	require.Equal(t, http.StatusOK, e.Do(http.MethodGet, locations, tok, nil).Status)

	// Not granted tower_access: login/authorize refuses to issue it.
	r := e.Do(http.MethodPost, "/api/v1/login/authorize", tok, map[string]any{"userId": "user-1"})
	requireProblem(t, r, http.StatusForbidden)

	// An app key made with the client's credentials.
	r = doKey(t, e, http.MethodPost, "/auth/api-key", e.Creds.AppEngineAPIKey, map[string]any{"client_id": id,
		"client_secret": secret, "organization_id": e.Creds.OrganizationID})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	key := r.Map(t)["api_key"].(string)
	require.Equal(t, http.StatusOK, doKey(t, e, http.MethodGet, "/auth/api-key", key, nil).Status)

	require.NoError(t, e.Store.SetClientDisabled(ctx, id, true))
	require.ErrorIs(t, e.Store.SetClientDisabled(ctx, "no-such-client", true), store.ErrNotFound)
	require.Eventually(t, func() bool {
		return e.Do(http.MethodGet, locations, tok, nil).Status == http.StatusUnauthorized
	}, 10*time.Second, 100*time.Millisecond, "the disabled client's token is refused")
	r = e.Do(http.MethodGet, locations, tok, nil)
	requireProblem(t, r, http.StatusUnauthorized)
	assert.Contains(t, r.Header.Get("WWW-Authenticate"), `error="invalid_token"`)
	require.Eventually(t, func() bool {
		return doKey(t, e, http.MethodGet, "/auth/api-key", key, nil).Status == http.StatusUnauthorized
	}, 10*time.Second, 100*time.Millisecond, "the app key it made is refused")
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
	r = send(t, http.MethodPost, e.URL+"/oauth/token", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		strings.NewReader(form.Encode()))
	assert.Equal(t, http.StatusUnauthorized, r.Status, "no new token: %s", r.Body)
	// Other clients of the organization go on working.
	assert.Equal(t, http.StatusOK, e.Do(http.MethodGet, locations, demoToken(t, e), nil).Status)

	require.NoError(t, e.Store.SetClientDisabled(ctx, id, false))
	require.Eventually(t, func() bool {
		return e.Do(http.MethodGet, locations, tok, nil).Status == http.StatusOK &&
			doKey(t, e, http.MethodGet, "/auth/api-key", key, nil).Status == http.StatusOK
	}, 10*time.Second, 100*time.Millisecond, "enabled again")
}

// A leaked signing key, revoked: the tokens it signed answer 401 within seconds — the
// apiserver's remembered verifications included — and new tokens work at once.
func TestRevokedSigningKey(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := context.Background()
	locations := "/api/v1/locations/closest?lat=34.0562&lon=-118.2365"
	old := clientToken(t, e, e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret)
	require.Equal(t, http.StatusOK, e.Do(http.MethodGet, locations, old, nil).Status)
	_, err := e.Auth.RotateRevoking(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return e.Do(http.MethodGet, locations, old, nil).Status == http.StatusUnauthorized
	}, 10*time.Second, 100*time.Millisecond, "the revoked key's token is refused")
	r := e.Do(http.MethodGet, "/.well-known/jwks.json", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.NotContains(t, string(r.Body), jwtauth.UnverifiedKID(old))
	fresh := clientToken(t, e, e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret)
	assert.Equal(t, http.StatusOK, e.Do(http.MethodGet, locations, fresh, nil).Status)
}
