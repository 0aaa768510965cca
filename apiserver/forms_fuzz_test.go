package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// The two form endpoints are fuzzed over real HTTP against the real apiserver handler, on a
// private database with the demo data. They need no Temporal server, so none is started: the
// setup stays well under a second and an iteration is one request. Run for real with
//
//	go test -run '^$' -fuzz FuzzOAuthTokenForm -fuzztime 30s -parallel 4 ./apiserver/
//	go test -run '^$' -fuzz FuzzSDKLoginForm -fuzztime 30s -parallel 4 ./apiserver/
//
// Fuzzed text may name the demo client's credentials through placeholders, so the corpus
// stays valid although every run seeds a fresh secret: CLIENT_ID and CLIENT_SECRET become
// the form-escaped id and secret, BASIC_CREDS the base64 of "id:secret".

type formServer struct {
	url          string
	auth         *jwtauth.Authority
	client       *http.Client
	id, secret   string
	placeholders *strings.Replacer
}

func startFormServer(f *testing.F) *formServer {
	f.Helper()
	if testing.Short() {
		f.Skip("needs Postgres")
	}
	ctx := context.Background()
	db := testenv.NewSeeded(ctx, f, store.Options{MaxConns: 4})
	st, ring, res := db.Store, db.Ring, db.Demo

	srv := httptest.NewUnstartedServer(nil)
	auth := jwtauth.New(st, ring, "http://"+srv.Listener.Addr().String())
	require.NoError(f, auth.EnsureKey(ctx))
	server := apiserver.New(apiserver.Deps{Store: st, Auth: auth, Keyring: ring, PublicURL: "http://" + srv.Listener.Addr().String(),
		RateLimits: apiserver.RateLimits{Tower: 1000000, AppKey: 1000000, Token: 1000000}})
	srv.Config.Handler = server.Handler()
	srv.Start()
	f.Cleanup(srv.Close)

	id, secret := res.Credentials.ServiceProvider.ClientID, res.Credentials.ServiceProvider.ClientSecret
	basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
	return &formServer{url: srv.URL, auth: auth, client: srv.Client(), id: id, secret: secret,
		placeholders: strings.NewReplacer("CLIENT_ID", url.QueryEscape(id), "CLIENT_SECRET", url.QueryEscape(secret), "BASIC_CREDS", basic)}
}

// post sends a form body; ok is false when net/http itself refuses the header values (no
// request reaches the server then).
func (s *formServer) post(t *testing.T, path, body, authorization string) (status int, header http.Header, respBody []byte, ok bool) {
	t.Helper()
	if !isHeaderSafe(authorization) {
		return 0, nil, nil, false
	}
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b, true
}

// formSeeds are bodies for both endpoints: normal forms, edge cases and garbage.
var formSeeds = []string{
	"", "=", "&", "&&&", "a", "a=b", "%", "%zz", "%00", "a=%", "a=%zz", ";", "a=1;b=2", "+", "%2B", "=%3D=",
	"\x00", "a=\x00", "\xff\xfe", "a=\xff", "é=ü", "%C3%A9=%E2%80%AE", strings.Repeat("a", 70000), strings.Repeat("&", 10000),
	strings.Repeat("a=b&", 5000), "a=" + strings.Repeat("9", 3000), "99999999999999999999999=1e309",
}

// FuzzOAuthTokenForm: whatever the form body and Authorization header, POST /oauth/token
// never answers a 5xx; an error is RFC 6749 §5.2 JSON (a string "error" of the RFC's codes and
// a string "error_description"; 401 with WWW-Authenticate), and a token is issued only to a
// caller that presented the demo client's secret, and verifies.
func FuzzOAuthTokenForm(f *testing.F) {
	s := startFormServer(f)
	for _, b := range formSeeds {
		f.Add(b, "")
	}
	for _, tc := range [][2]string{
		{"grant_type=client_credentials&client_id=CLIENT_ID&client_secret=CLIENT_SECRET", ""},
		{"grant_type=client_credentials&client_id=CLIENT_ID&client_secret=CLIENT_SECRET&scope=tower_access+service_provider", ""},
		{"grant_type=client_credentials&client_id=CLIENT_ID&client_secret=CLIENT_SECRET&scope=admin", ""},
		{"grant_type=client_credentials&client_id=CLIENT_ID&client_secret=wrong", ""},
		{"grant_type=client_credentials&client_id=CLIENT_ID&client_id=CLIENT_ID&client_secret=CLIENT_SECRET", ""},
		{"grant_type=client_credentials&client_id=CLIENT_ID%00&client_secret=CLIENT_SECRET", ""},
		{"grant_type=client_credentials&client_id=%FF&client_secret=x", ""},
		{"grant_type=client_credentials&client_id=" + strings.Repeat("x", 5000) + "&client_secret=x", ""},
		{"grant_type=password&username=a&password=b", ""},
		{"grant_type=client_credentials", "Basic BASIC_CREDS"},
		{"grant_type=client_credentials&client_secret=CLIENT_SECRET", "Basic BASIC_CREDS"},
		{"grant_type=client_credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte("demo\x00:x"))},
		{"grant_type=client_credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte("\xff\xfe:x"))},
		{"grant_type=client_credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte("%00:x"))},
		{"grant_type=client_credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte("%FF:x"))},
		{"grant_type=client_credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("u", 5000)+":x"))},
		{"grant_type=client_credentials", "Basic !!!"},
		{"grant_type=client_credentials", "Basic "},
		{"grant_type=client_credentials", "Bearer x"},
		{"grant_type=client_credentials", "basic\tBASIC_CREDS"},
	} {
		f.Add(tc[0], tc[1])
	}
	codes := []string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type",
		"invalid_scope", "slow_down"}
	f.Fuzz(func(t *testing.T, body, authorization string) {
		body, authorization = s.placeholders.Replace(body), s.placeholders.Replace(authorization)
		status, header, resp, ok := s.post(t, "/oauth/token", body, authorization)
		if !ok {
			return
		}
		if status >= 500 {
			t.Fatalf("body %q, Authorization %q: %d %s", body, authorization, status, resp)
		}
		if ct := header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("body %q, Authorization %q: Content-Type %q: %d %s", body, authorization, ct, status, resp)
		}
		if status == http.StatusOK {
			var tok struct {
				AccessToken string `json:"access_token"`
				TokenType   string `json:"token_type"`
			}
			require.NoError(t, json.Unmarshal(resp, &tok), "%s", resp)
			if !s.presentedSecret(body, authorization) {
				t.Fatalf("a token without the client's secret: body %q, Authorization %q", body, authorization)
			}
			p, err := s.auth.Verify(context.Background(), tok.AccessToken)
			require.NoError(t, err)
			require.Equal(t, s.id, p.ClientID)
			require.Equal(t, "Bearer", tok.TokenType)
			return
		}
		var e map[string]any
		if err := json.Unmarshal(resp, &e); err != nil {
			t.Fatalf("body %q, Authorization %q: %d, not JSON: %s", body, authorization, status, resp)
		}
		code, _ := e["error"].(string)
		desc, isString := e["error_description"].(string)
		if !slices.Contains(codes, code) || !isString || desc == "" {
			t.Fatalf("body %q, Authorization %q: %d, not an RFC 6749 error: %s", body, authorization, status, resp)
		}
		if status == http.StatusUnauthorized && header.Get("WWW-Authenticate") == "" {
			t.Fatalf("body %q, Authorization %q: 401 without WWW-Authenticate", body, authorization)
		}
	})
}

// presentedSecret reports whether a token request carried the demo client's secret, in the
// form or in HTTP Basic credentials.
func (s *formServer) presentedSecret(body, authorization string) bool {
	if form, err := url.ParseQuery(body); err == nil && slices.Contains(form["client_secret"], s.secret) {
		return true
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	if !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return false
	}
	_, p, _ := strings.Cut(string(raw), ":")
	secret, err := url.QueryUnescape(p)
	return err == nil && secret == s.secret
}

// FuzzSDKLoginForm: POST /sdk/v1/login/access-token never answers a 5xx. No body is 400, a
// body too large 413, a body that is not a form 422, a form without the demo client's id and
// secret 401,
// all problem+json with a string detail (what the SDK reads); the id and secret get a
// tower_access token.
func FuzzSDKLoginForm(f *testing.F) {
	s := startFormServer(f)
	for _, b := range formSeeds {
		f.Add(b)
	}
	for _, b := range []string{
		"username=CLIENT_ID&password=CLIENT_SECRET", "password=CLIENT_SECRET&username=CLIENT_ID", "username=CLIENT_ID&password=wrong",
		"username=CLIENT_ID", "password=CLIENT_SECRET", "username=&password=", "username=CLIENT_ID&password=CLIENT_SECRET&username=x",
		"username=CLIENT_ID%00&password=CLIENT_SECRET", "username=%FF%FE&password=x", "username=" + strings.Repeat("u", 10000) + "&password=x",
		"username=CLIENT_ID&password=" + strings.Repeat("p", 60000), "username=nobody&password=nope", "grant_type=password&username=a&password=b",
		"username=CLIENT_ID&password=CLIENT_SECRET%00", "username=%E2%80%AE&password=%F0%9F%94%91",
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		body = s.placeholders.Replace(body)
		status, header, resp, _ := s.post(t, "/sdk/v1/login/access-token", body, "")
		form, formErr := url.ParseQuery(body)
		want := http.StatusUnauthorized
		switch {
		case body == "":
			want = http.StatusBadRequest // huma: the operation's body is required
		case len(body) > apiserver.MaxBodyBytes:
			want = http.StatusRequestEntityTooLarge
		case formErr != nil:
			want = http.StatusUnprocessableEntity
		case form.Get("username") == s.id && form.Get("password") == s.secret:
			want = http.StatusOK
		}
		if status != want {
			t.Fatalf("body %q: %d, want %d: %s", body, status, want, resp)
		}
		if status == http.StatusOK {
			var tok struct {
				AccessToken string `json:"access_token"`
				TokenType   string `json:"token_type"`
			}
			require.NoError(t, json.Unmarshal(resp, &tok), "%s", resp)
			require.Equal(t, "bearer", tok.TokenType)
			p, err := s.auth.Verify(context.Background(), tok.AccessToken)
			require.NoError(t, err)
			require.Equal(t, []string{jwtauth.ScopeTowerAccess}, p.Scopes)
			return
		}
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("body %q: %d with Content-Type %q: %s", body, status, ct, resp)
		}
		var p struct {
			Status *int    `json:"status"`
			Detail *string `json:"detail"`
		}
		if err := json.Unmarshal(resp, &p); err != nil || p.Status == nil || *p.Status != status || p.Detail == nil || *p.Detail == "" {
			t.Fatalf("body %q: %d, not a problem with a detail: %s", body, status, resp)
		}
	})
}
