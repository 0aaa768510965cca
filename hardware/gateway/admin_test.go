package gateway_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// browser is an HTTP client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(data)
}

func TestAdminLoginAndForms(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	c := browser(t)

	// Without the secret: the login form, and nothing else.
	resp, page := fetch(t, c, http.MethodGet, gw.URL+"/", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, page, `id="login-form"`)
	assert.NotContains(t, page, "A01")

	// Forms without a session go back to the login.
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/admin/lockers/101/open", url.Values{"csrf": {"x"}})
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, 0, gw.Sim.OpenAttempts())

	resp, page = fetch(t, c, http.MethodPost, gw.URL+"/login", url.Values{"secret": {"wrong"}})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, page, "Wrong secret")
	assert.Empty(t, resp.Cookies())

	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/login", url.Values{"secret": {gw.Secret}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	cookie := resp.Cookies()[0]
	assert.True(t, cookie.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	assert.NotContains(t, cookie.Value, gw.Secret)

	resp, page = fetch(t, c, http.MethodGet, gw.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `id="locker-101-door"`)
	assert.Contains(t, page, "B08")
	assert.NotContains(t, page, gw.Secret)
	m := csrfPattern.FindStringSubmatch(page)
	require.NotNil(t, m)
	csrf := m[1]

	// The session cookie alone does not work on the JSON API.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+"/lockers", nil)
	require.NoError(t, err)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A form without the CSRF token is refused.
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/admin/lockers/101/open", url.Values{})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/admin/lockers/101/open", url.Values{"csrf": {csrf + "x"}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, 0, gw.Sim.OpenAttempts())

	// With it, the buttons work.
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/admin/lockers/101/open", url.Values{"csrf": {csrf}})
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, 1, gw.Sim.Opens(101))
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/admin/lockers/102/service",
		url.Values{"csrf": {csrf}, "outOfService": {"true"}, "reason": {"door bent"}})
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/102", nil))
	assert.True(t, lk.OutOfService)
	require.NotNil(t, lk.Reason)
	assert.Equal(t, "door bent", *lk.Reason)

	_, page = fetch(t, c, http.MethodGet, gw.URL+"/", nil)
	assert.Contains(t, page, "Locker A02: locker set out of service.")
	assert.Regexp(t, `id="locker-101-door" class="door open"`, page)

	// Sign out ends the session.
	resp, _ = fetch(t, c, http.MethodPost, gw.URL+"/logout", url.Values{"csrf": {csrf}})
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = fetch(t, c, http.MethodGet, gw.URL+"/", nil)
	assert.Contains(t, page, `id="login-form"`)
}

func TestAdminPageWithBearer(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	r := call(t, gw, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), `id="locker-208"`)
	assert.Contains(t, string(r.body), "GW-0002")
}

// Guessing the secret on the login form is slowed down: after five wrong secrets within a
// minute the address gets 429 with Retry-After — the right secret included — and the
// failures are logged as security events.
func TestAdminLoginBacksOff(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	c := browser(t)
	for i := range 5 {
		resp, _ := fetch(t, c, http.MethodPost, gw.URL+"/login", url.Values{"secret": {"wrong"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "attempt %d", i+1)
	}
	resp, page := fetch(t, c, http.MethodPost, gw.URL+"/login", url.Values{"secret": {gw.Secret}})
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Contains(t, page, "Too many wrong secrets")
	assert.Empty(t, resp.Cookies())
}
