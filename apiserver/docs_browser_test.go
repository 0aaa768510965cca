package apiserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/browsertest"
)

// TestDocsRenderOffline opens /docs in headless Chromium that can reach nothing but
// 127.0.0.1 (every other host resolves nowhere and goes through a proxy that does not
// exist), and checks that the API reference shows its operations and that the page asked
// for nothing outside the apiserver.
func TestDocsRenderOffline(t *testing.T) {
	ctx := browsertest.Start(t, browsertest.Options{Offline: true})
	srv := httptest.NewServer(apiserver.New(apiserver.Deps{}).Handler())
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var requested []string
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requested = append(requested, e.Request.URL)
			mu.Unlock()
		}
	}))

	// The sidebar lists the operations by tag; a tag opens to its operations, and an
	// operation to its method and path.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/docs"),
		chromedp.WaitVisible(`//*[text()="Gateway cloud API"]`),
		chromedp.Click(`//*[text()="Gateway cloud API"]`),
		chromedp.WaitVisible(`//*[text()="Open a locker"]`),
		chromedp.Click(`//*[text()="Open a locker"]`),
		chromedp.WaitVisible(`//*[contains(text(), "/locations/{locationId}/lockers/{lockerId}/open")]`),
	), "the API reference renders and opens an operation")
	sidebar, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	require.NoError(t, err)
	for _, text := range []string{"Token service", "Reservations", "App engine: access codes", "Health", "Open a locker", "Fetch a locker"} {
		assert.Contains(t, sidebar, text)
	}

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, requested)
	for _, u := range requested {
		if strings.HasPrefix(u, "data:") {
			continue
		}
		assert.True(t, strings.HasPrefix(u, srv.URL+"/"), "the page requested only the apiserver, not %s", u)
	}
	assert.Contains(t, requested, srv.URL+"/openapi.yaml")
}

// TestDocsAssets checks the page's headers and that its assets come from the binary,
// compressed when the client takes gzip.
func TestDocsAssets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(apiserver.New(apiserver.Deps{}).Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/docs")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	assert.NotContains(t, string(page), "https://", "no asset from another origin")

	tests := []struct {
		path, contentType string
		status            int
	}{
		{"/docs/assets/elements-9.0.25/web-components.min.js", "text/javascript; charset=utf-8", http.StatusOK},
		{"/docs/assets/elements-9.0.25/styles.min.css", "text/css; charset=utf-8", http.StatusOK},
		{"/docs/assets/elements-9.0.25/LICENSE", "text/plain; charset=utf-8", http.StatusOK},
		{"/docs/assets/elements-9.0.25/nothing.js", "", http.StatusNotFound},
		{"/docs/assets/elements-9.0.25/..%2Fdocs.go", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			req.Header.Set("Accept-Encoding", "gzip") // the transport then leaves the body compressed
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.status != http.StatusOK {
				return
			}
			assert.Equal(t, tt.contentType, resp.Header.Get("Content-Type"))
			assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
			assert.Contains(t, resp.Header.Get("Cache-Control"), "immutable")
			assert.NotEmpty(t, body)
		})
	}
}
