package apiserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A handler that runs longer than huma's body read timeout keeps a live context, and so does
// the next request on the same keep-alive connection (huma leaves the read deadline set; the
// server's background read then times out and cancels the connection's context).
func TestLongHandlerOutlivesBodyReadTimeout(t *testing.T) {
	t.Parallel()
	r := chi.NewRouter()
	// As on the gateway cloud API: a middleware reads the body first, then huma reads it again.
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bufferBody(w, r)
			next.ServeHTTP(w, r)
		})
	}, liftBodyDeadline)
	cfg := huma.DefaultConfig("t", "1")
	cfg.CreateHooks = nil
	api := humachi.New(r, cfg)
	type in struct {
		Body *struct {
			Name string `json:"name,omitempty"`
		} `required:"false"`
	}
	type out struct {
		Body struct {
			Context string `json:"context"`
		}
	}
	o := op(huma.Operation{Method: http.MethodPost, Path: "/slow", BodyReadTimeout: 100 * time.Millisecond})
	huma.Register(api, o, func(ctx context.Context, _ *in) (*out, error) {
		select {
		case <-ctx.Done():
		case <-time.After(400 * time.Millisecond):
		}
		res := &out{}
		res.Body.Context = "live"
		if ctx.Err() != nil {
			res.Body.Context = ctx.Err().Error()
		}
		return res, nil
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)

	for i, body := range []string{`{"name":"a"}`, `{"name":"b"}`, "", ""} {
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/slow", rd)
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i, b)
		assert.JSONEq(t, `{"context":"live"}`, string(b), "request %d", i)
		if i > 0 {
			assert.True(t, reused, "request %d rides the same keep-alive connection", i)
		}
	}
}
