package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/worker"
)

// Env is a running system for one test: Postgres database, Temporal server, apiserver and
// worker, with the demo data seeded.
type Env struct {
	URL       string
	Creds     seed.Credentials
	Seed      seed.Result
	Store     *store.Store
	Keyring   *keyring.Keyring
	Auth      *jwtauth.Authority
	Temporal  client.Client
	Namespace string
	TaskQueue string
	Logger    *slog.Logger
	// Webhooks are the worker's delivery settings (loopback receivers allowed).
	Webhooks *activities.WebhookDeps

	t             testing.TB
	gatewayPolicy gatewayreq.Policy // the worker's, as the apiserver's
	server        *apiserver.Server
	stopWorker    context.CancelFunc
	ctx           context.Context
	mu            sync.Mutex
	metrics       map[string]string // API URL → its internal listener's URL
}

// Options adjust Start.
type Options struct {
	// NoWorker leaves the worker stopped (tests start it with StartWorker).
	NoWorker bool
	// Cloud configures the gateway cloud API (zero: production defaults; see
	// ScaledCloudSettings in gateways.go for tests).
	Cloud apiserver.CloudSettings
	// RateLimits of the tower API, app engine API and token endpoint (zero: a million a
	// minute, so tests that are not about the limits never meet them).
	RateLimits apiserver.RateLimits
	// Webhooks configures the endpoints' URL policy (zero: development, any http URL).
	Webhooks apiserver.WebhookSettings
	// WebhookSchedule is the waits between delivery attempts (nil: DESIGN §10's).
	WebhookSchedule []time.Duration
	// Pool sizes the store's pool (zero MaxConns: 10; zero AcquireTimeout: the default).
	Pool store.Options
}

// testRateLimits are the limits of an env that names none.
var testRateLimits = apiserver.RateLimits{Tower: 1000000, AppKey: 1000000, Token: 1000000}

// Temporal starts an embedded Temporal server for the test, with the search attributes
// registered and the transfer-queue limit raised so the first task of a new workflow does
// not wait ~50 ms on a one-shard server.
func Temporal(t testing.TB) (*temporaltest.TestServer, client.Client) {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("testenv.Temporal needs a *testing.T")
	}
	dc := dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():  []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.MakeKey("history.transferProcessorMaxPollRPS"): []dynamicconfig.ConstrainedValue{{Value: 10000}},
	}
	ts := temporaltest.NewServer(temporaltest.WithT(tt), temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(dc)))
	c := ts.GetDefaultClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, temporalclient.EnsureSearchAttributes(ctx, c, ts.GetDefaultNamespace()))
	return ts, c
}

// Start brings the whole system up for one test and stops it when the test ends.
func Start(t *testing.T, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	pool := opts.Pool
	if pool.MaxConns == 0 {
		pool.MaxConns = 10
	}
	db := NewSeeded(ctx, t, pool)
	st, ring, res := db.Store, db.Ring, db.Demo

	ts, tc := Temporal(t)
	srv := httptest.NewUnstartedServer(nil)
	auth := jwtauth.New(st, ring, "http://"+srv.Listener.Addr().String())
	require.NoError(t, auth.EnsureKey(ctx))

	taskQueue := "lockernet-test"
	disp := outbox.New(st, tc, taskQueue, logger)
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { _ = disp.Run(ctx) })
		maintenance.Run(ctx, nil, logger, maintenance.OutboxSweep(200*time.Millisecond, disp))
		wg.Wait()
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	rateLimits := opts.RateLimits
	if rateLimits == (apiserver.RateLimits{}) {
		rateLimits = testRateLimits
	}
	server := apiserver.New(apiserver.Deps{
		Store: st, Auth: auth, Keyring: ring, Temporal: tc, Workflows: disp, Logger: logger,
		PublicURL: "http://" + srv.Listener.Addr().String(), TaskQueue: taskQueue, Cloud: opts.Cloud,
		RateLimits: rateLimits, Webhooks: opts.Webhooks,
	})
	srv.Config.Handler = server.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	checkServedContract(t, srv.URL)
	metrics := httptest.NewServer(server.MetricsHandler()) // the internal listener
	t.Cleanup(metrics.Close)

	e := &Env{
		URL: srv.URL, Creds: res.Credentials, Seed: res, Store: st, Keyring: ring, Auth: auth,
		Temporal: tc, Namespace: ts.GetDefaultNamespace(), TaskQueue: taskQueue, Logger: logger,
		t: t, gatewayPolicy: opts.Cloud.Policy, server: server, ctx: ctx, metrics: map[string]string{srv.URL: metrics.URL},
		Webhooks: &activities.WebhookDeps{Store: st, Keyring: ring, Schedule: opts.WebhookSchedule, Timeout: 5 * time.Second},
	}
	if !opts.NoWorker {
		e.StartWorker()
	}
	return e
}

// checkServedContract validates the answers of the apiserver at baseURL against the OpenAPI
// document it serves (contract.go).
func checkServedContract(t testing.TB, baseURL string) {
	t.Helper()
	spec, err := fetchSpec(baseURL+"/openapi.json", http.Header{})
	require.NoError(t, err)
	CheckContract(t, baseURL, spec)
}

// StartWorker starts a worker on the env's task queue; StopWorker stops it.
func (e *Env) StartWorker() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	acts := &activities.Activities{Reservations: e.Store, Tokens: e.Store, AccessCodes: e.Store, Pickups: e.Store,
		// As the apiserver's own gateway worker in make run: outcomes are handed to its
		// waiting handlers in-process (other instances hear of them from Postgres).
		Gateways: activities.GatewayDeps{Store: e.Store, Keyring: e.Keyring, Policy: e.gatewayPolicy, Stored: e.server.GatewayOutcomeStored},
		Webhooks: e.Webhooks}
	go func() {
		_ = worker.Run(ctx, e.Temporal, e.TaskQueue, acts, worker.Options{})
		close(done)
	}()
	e.stopWorker = func() { cancel(); <-done }
	e.t.Cleanup(e.StopWorker)
}

// StopWorker stops the worker started by StartWorker (no-op if none runs).
func (e *Env) StopWorker() {
	if e.stopWorker != nil {
		e.stopWorker()
		e.stopWorker = nil
	}
}

// Token gets an access token for the demo client with the given scopes (all when none).
func (e *Env) Token(scopes ...string) string {
	e.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {e.Creds.ServiceProvider.ClientID},
		"client_secret": {e.Creds.ServiceProvider.ClientSecret}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	return ClientToken(e.t, e.URL+"/oauth/token", form, nil)
}

// ClientToken posts form, a client-credentials grant, to tokenURL (authenticated by
// setAuth, when not nil) and returns the access token of the answer, which must be
// 200 OK.
func ClientToken(t testing.TB, tokenURL string, form url.Values, setAuth func(*http.Request)) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if setAuth != nil {
		setAuth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	return tok.AccessToken
}

// Response is an HTTP answer with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
}

// Map decodes the body as a JSON object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request with an optional bearer token and JSON body (a string or []byte is
// sent as is) and returns the answer.
func (e *Env) Do(method, path, token string, body any) Response {
	e.t.Helper()
	return Do(e.t, method, e.URL+path, token, body)
}

// Do is Env.Do against any base URL.
func Do(t testing.TB, method, fullURL, token string, body any) Response {
	t.Helper()
	h := map[string]string{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return DoWithHeaders(t, method, fullURL, h, body)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// DoWithHeaders is Do with extra request headers (e.g. x-api-key; empty values are left out)
// and no bearer token.
func DoWithHeaders(t testing.TB, method, fullURL string, headers map[string]string, body any) Response {
	t.Helper()
	h := http.Header{}
	for k, v := range headers {
		if v != "" {
			h.Set(k, v)
		}
	}
	r, err := Exchange(method, fullURL, h, body)
	require.NoError(t, err)
	return r
}

// Exchange sends one request and reads the whole answer: the one HTTP exchange of the tests.
// body may be nil, a string, []byte or a value to encode as JSON (these are sent as
// application/json unless header names a Content-Type), or an io.Reader sent as is with
// header's Content-Type only. It never fails the test, so it is safe in goroutines.
func Exchange(method, fullURL string, header http.Header, body any) (Response, error) {
	var rd io.Reader
	asJSON := body != nil
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd, asJSON = b, false
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return Response{}, fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, fullURL, rd)
	if err != nil {
		return Response{}, fmt.Errorf("build request: %w", err)
	}
	if asJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, fullURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("read answer of %s %s: %w", method, fullURL, err)
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	checkContract(method, fullURL, req.Header, r)
	return r, nil
}
