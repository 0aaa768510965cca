package gateway_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/browsertest"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// TestAdminPageInBrowser drives the admin page in headless Chromium: log in
// through the form, open a locker, toggle out-of-service.
func TestAdminPageInBrowser(t *testing.T) {
	ctx := browsertest.Start(t, browsertest.Options{})
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	text := func(step, sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(sel)))
		require.NoError(t, err, "%s: read #%s", step, sel)
		return strings.TrimSpace(v)
	}
	flash := func(msg string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(`//p[@id="flash" and contains(., "` + msg + `")]`)
	}

	// A wrong secret is refused; the right one gets the page.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(gw.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("secret"), "not-the-secret"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	), "wrong secret")
	assert.Contains(t, text("wrong secret", "login-error"), "Wrong secret")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("secret"), gw.Secret),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("locker-101")),
	), "log in")
	assert.Equal(t, "closed", text("log in", "locker-101-door"))
	assert.Equal(t, "in service", text("log in", "locker-102-service"))

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("open-101")),
		flash("Locker A01 opened."),
	), "open a locker")
	assert.Equal(t, "open", text("open", "locker-101-door"))
	assert.Equal(t, 1, gw.Sim.Opens(101), "one real actuation")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("reason-102"), "glass cracked"),
		chromedp.Click(chromedp.ID("service-102")),
		flash("Locker A02: locker set out of service."),
	), "set out of service")
	assert.Equal(t, "out of service (glass cracked)", text("out of service", "locker-102-service"))
	assert.True(t, decode[gateway.Locker](t, call(t, gw, "GET", "/lockers/102", nil)).OutOfService)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("service-102")),
		flash("Locker A02: locker returned to service."),
	), "return to service")
	assert.Equal(t, "in service", text("in service", "locker-102-service"))
	assert.False(t, decode[gateway.Locker](t, call(t, gw, "GET", "/lockers/102", nil)).OutOfService)

	// A door closed by hand shows on the next render.
	require.True(t, gw.Sim.CloseDoor(101, false))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("locker-101")),
	), "reload")
	assert.Equal(t, "closed", text("reload", "locker-101-door"))
}
