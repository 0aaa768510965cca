// Package browsertest starts the headless Chromium that the browser tests drive (the
// apiserver's API reference, the gateway's admin page), the same way for each: skipped with
// LOCKERNET_SKIP_BROWSER=1, a clear failure when Chromium is missing, a fresh profile, and a
// two-minute budget per test.
package browsertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package installs the browser (.ci/run installs it).
const ChromiumPath = "/usr/bin/chromium"

// Options shape the browser.
type Options struct {
	// Offline lets the page reach 127.0.0.1 only: every other host resolves nowhere and goes
	// through a proxy that does not exist, so a request elsewhere fails and shows up as one.
	Offline bool
}

// Start returns a browser context for t, closed when t ends. It skips t when
// LOCKERNET_SKIP_BROWSER=1 and fails it when Chromium is not installed.
func Start(t *testing.T, opts Options) context.Context {
	t.Helper()
	if os.Getenv("LOCKERNET_SKIP_BROWSER") == "1" {
		t.Skip("LOCKERNET_SKIP_BROWSER=1")
	}
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("headless browser test needs Chromium at %s (apt-get install -y chromium), "+
			"or set LOCKERNET_SKIP_BROWSER=1 to skip it: %v", ChromiumPath, err)
	}
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	if opts.Offline {
		flags = append(flags,
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
			chromedp.ProxyServer("http://127.0.0.1:9"),
			chromedp.Flag("proxy-bypass-list", "127.0.0.1"),
		)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), flags...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
	})
	return ctx
}
