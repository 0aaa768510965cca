package testenv

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/gatewaysync"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
)

// ScaledCloudSettings are the gateway cloud API's settings for tests: the rules of
// DESIGN §6.2 with deadlines and backoffs in (tens of) milliseconds and seconds, to match
// gatewaytest's scaled open policy (a door open takes at most about a second there).
func ScaledCloudSettings() apiserver.CloudSettings {
	return apiserver.CloudSettings{Policy: gatewayreq.Policy{
		CallTimeout: 3 * time.Second, HardwareTimeout: 5 * time.Second,
		DispatchAttempts: 3, DispatchBackoff: 50 * time.Millisecond,
		ConflictRetries: 3, ConflictBackoff: 20 * time.Millisecond,
	}}
}

// Gateway is a simulated gateway registered with the cloud at a demo location.
type Gateway struct {
	*gatewaytest.Gateway
	Serial     string
	LocationID int64
	// DBID is the gateway's id in Postgres.
	DBID int64
}

// StartDemoGateways starts the two demo gateways of DESIGN §9 — GW-0001 (two banks, 16
// lockers) at Downtown Hub and GW-0002 (one bank, 8 lockers) at Culver City — and registers
// them with their URLs and sealed secrets, as make run does.
func (e *Env) StartDemoGateways(t testing.TB) (gw1, gw2 *Gateway) {
	t.Helper()
	return e.StartGateway(t, "GW-0001", gateway.PresetTwoBanks), e.StartGateway(t, "GW-0002", gateway.PresetOneBank)
}

// StartGateway starts a simulated gateway with a layout preset and registers it at the demo
// location the seed made for serial.
func (e *Env) StartGateway(t testing.TB, serial, preset string) *Gateway {
	t.Helper()
	loc, ok := e.Seed.GatewayLocationID[serial]
	require.True(t, ok, "no demo location for gateway %s", serial)
	g := gatewaytest.Start(t, gatewaytest.Options{Preset: preset, GatewayID: serial})
	return e.RegisterGateway(t, g, serial, loc)
}

// RegisterGateway registers a running test gateway at a location.
func (e *Env) RegisterGateway(t testing.TB, g *gatewaytest.Gateway, serial string, locationID int64) *Gateway {
	t.Helper()
	row, err := e.Store.UpsertGateway(context.Background(), store.NewGateway{Serial: serial, LocationID: locationID, BaseURL: g.URL,
		SecretSealed: e.Keyring.Seal(keyring.GatewaySecretPurpose(serial), []byte(g.Secret))})
	require.NoError(t, err)
	return &Gateway{Gateway: g, Serial: serial, LocationID: locationID, DBID: row.ID}
}

// GatewayKey is the seeded gateway cloud API key of the demo organization.
func (e *Env) GatewayKey() string { return e.Creds.GatewayAPIKey }

// StartGatewaySync runs the worker's gateway sync loop (health checks and locker mirror)
// until the test ends.
func (e *Env) StartGatewaySync(t testing.TB, interval time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	sync := &gatewaysync.GatewaySync{Store: e.Store, Keyring: e.Keyring, Logger: e.Logger, Interval: interval}
	go func() {
		maintenance.Run(ctx, nil, e.Logger, maintenance.GatewaySync(100*time.Millisecond, sync), maintenance.GatewayRequestPrune(10*time.Minute, sync))
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// StartGatewayAlerts runs the worker's gateway alert loop (one long poll per online gateway,
// of wait seconds) as a process named holder, counting into m (nil: not counted), until the
// test ends, and returns its watcher. Two calls with different holders are two workers
// sharing the gateways through their leases.
func (e *Env) StartGatewayAlerts(t testing.TB, holder string, wait time.Duration, m *gatewayalerts.Metrics) *gatewayalerts.Watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	w := &gatewayalerts.Watcher{Store: e.Store, Keyring: e.Keyring, Logger: e.Logger, Holder: holder, PollWait: wait,
		Backoff: 200 * time.Millisecond, Metrics: m}
	go func() {
		maintenance.Run(ctx, nil, e.Logger, maintenance.GatewayAlerts(100*time.Millisecond, w))
		w.Wait()
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// WaitLockersMirrored waits until the gateway sync has mirrored the n lockers of g into
// Postgres (gateway_lockers), failing the test after 30 s.
func (e *Env) WaitLockersMirrored(t testing.TB, g *Gateway, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		_ = e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_lockers WHERE gateway_id = $1`, g.DBID).Scan(&got)
		return got == n
	}, 30*time.Second, 50*time.Millisecond, "the locker mirror of %s is filled", g.Serial)
}

// StartDemoGatewaysMirrored is StartDemoGateways with the gateway sync running every 200 ms,
// once it has mirrored GW-0001's 16 lockers.
func (e *Env) StartDemoGatewaysMirrored(t testing.TB) (gw1, gw2 *Gateway) {
	t.Helper()
	gw1, gw2 = e.StartDemoGateways(t)
	e.StartGatewaySync(t, 200*time.Millisecond)
	e.WaitLockersMirrored(t, gw1, 16)
	return gw1, gw2
}

// StartAPIServer starts another apiserver instance on the env's database and Temporal
// server, with its own customer settings, and returns its base URL. Instances share
// everything through Postgres and Temporal, as in production.
func (e *Env) StartAPIServer(t testing.TB, settings apiserver.CloudSettings) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	server := apiserver.New(apiserver.Deps{
		Store: e.Store, Auth: e.Auth, Keyring: e.Keyring, Temporal: e.Temporal,
		Workflows: outbox.New(e.Store, e.Temporal, e.TaskQueue, e.Logger), Logger: e.Logger,
		PublicURL: e.URL, TaskQueue: e.TaskQueue, Cloud: settings, RateLimits: testRateLimits,
	})
	srv.Config.Handler = server.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	checkServedContract(t, srv.URL)
	metrics := httptest.NewServer(server.MetricsHandler())
	t.Cleanup(metrics.Close)
	e.mu.Lock()
	e.metrics[srv.URL] = metrics.URL
	e.mu.Unlock()
	runGatewayCloud(t, e.ctx, server, e.Logger)
	return srv.URL
}

// MetricsURL is the base URL of the internal listener (/metrics) of the apiserver at apiURL.
func (e *Env) MetricsURL(apiURL string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.metrics[apiURL]
}

// RunGatewayCloud runs the env's apiserver's gateway cloud background work (the listener of
// request outcomes and the reconciler loop), as cmd/apiserver does, until the test ends.
func (e *Env) RunGatewayCloud(t testing.TB) {
	t.Helper()
	runGatewayCloud(t, e.ctx, e.server, e.Logger)
}

func runGatewayCloud(t testing.TB, parent context.Context, s *apiserver.Server, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { s.RunGatewayCloud(ctx) })
		maintenance.Run(ctx, nil, logger, maintenance.GatewayRequestReconcile(10*time.Second, maintenance.ReconcileGrace, s))
		wg.Wait()
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// ReconcileGatewayRequests runs the env's apiserver's reconciler once: it starts the
// workflows of requests stored but never sent for longer than grace.
func (e *Env) ReconcileGatewayRequests(t testing.TB, grace time.Duration) {
	t.Helper()
	require.NoError(t, e.server.ReconcileGatewayRequests(e.ctx, grace))
}
