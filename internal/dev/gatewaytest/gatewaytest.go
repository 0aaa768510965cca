// Package gatewaytest starts real gateways for tests: a gateway.Server with
// simulated lock controllers (simctl), serving on a free 127.0.0.1 port behind
// the simulator's fault listener and middleware, plus the simulator control API
// on a second port — the same wiring as a "-tags simcontrol" gateway binary,
// with the open policy scaled down to milliseconds.
//
//	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetTwoBanks})
//	resp, body, err := gw.Do(ctx, http.MethodPost, "/transactions", map[string]any{"lockerTypeId": 1})
//	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeHang})
//	gw.Restart(t) // same SQLite file, same address
//
// Launch does the same without a testing.TB, on chosen addresses, for the dev
// stack (which runs simulated gateways inside one process).
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/contract"
)

// ScaledOpenPolicy is the open policy tests use: the design's policy with
// seconds turned into tens of milliseconds.
func ScaledOpenPolicy() gateway.OpenPolicy {
	return gateway.OpenPolicy{AttemptTimeout: 300 * time.Millisecond, Attempts: 3, RetryDelay: 20 * time.Millisecond}
}

// Options configures a test gateway; the zero value is a "two-banks" gateway
// with a random secret, a fresh database and the scaled open policy.
type Options struct {
	// Preset is a layout preset name (default gateway.PresetTwoBanks).
	Preset string
	// Layout, when set, is used instead of Preset.
	Layout *gateway.Layout
	// GatewayID defaults to the layout's.
	GatewayID string
	// Secret defaults to a random one.
	Secret string
	// DBPath defaults to a file in t.TempDir().
	DBPath string
	// Open defaults to ScaledOpenPolicy().
	Open *gateway.OpenPolicy
	// SensorTimeout defaults to 300 ms.
	SensorTimeout time.Duration
	// Latency of every simulated controller command (default 0).
	Latency time.Duration
	// DoorCloseAfter closes doors automatically (default 0: they stay open
	// until closed through the simulator).
	DoorCloseAfter time.Duration
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// Addr and SimAddr are the listen addresses of the local API and of the
	// simulator control (default 127.0.0.1:0, a free port each).
	Addr, SimAddr string
	// Version is what GET /system reports (default "test").
	Version string
	// StopGrace is the gateway's stop grace (default gateway.DefaultStopGrace of the open
	// policy).
	StopGrace time.Duration
	// Watch is the gateway's watch of its controllers (default none: a zero Interval).
	Watch gateway.WatchConfig
	// WrapController, when set, wraps each simulated controller the gateway drives (on every
	// start), e.g. to look at the gateway's database when a lock is pulsed.
	WrapController func(lockctl.Controller) lockctl.Controller
	// WrapHandler, when set, wraps the gateway's handler (inside the simulator's middleware),
	// e.g. to look at the gateway's database when an answer is written.
	WrapHandler func(http.Handler) http.Handler
}

// Gateway is a running test gateway.
type Gateway struct {
	// ID is the gateway serial.
	ID string
	// URL is the local API's base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Secret is the bearer secret of the local API.
	Secret string
	// SimURL is the simulator control API's base URL (POST {SimURL}/sim/faults).
	SimURL string
	// DBPath is the SQLite file; it survives Restart.
	DBPath string
	// Sim is the simulated hardware; it survives Restart.
	Sim *simctl.Sim
	// Contract validates every answer of the local API against the OpenAPI document the
	// gateway serves (internal/dev/contract); Start fails the test with its violations.
	Contract *contract.Contract

	cfg         gateway.Config
	logger      *slog.Logger
	addr        string
	wrapCtl     func(lockctl.Controller) lockctl.Controller
	wrapHandler func(http.Handler) http.Handler

	mu      sync.Mutex
	server  *gateway.Server
	stop    context.CancelFunc
	stopped chan struct{}
	closed  bool

	simStop    context.CancelFunc
	simStopped chan struct{}
	tmpDir     string // removed on Close when Launch made it
}

// Start starts a gateway and registers its Close with t.Cleanup. Its database
// lives in t.TempDir() unless opts.DBPath says otherwise.
func Start(t testing.TB, opts Options) *Gateway {
	t.Helper()
	if opts.DBPath == "" {
		opts.DBPath = filepath.Join(t.TempDir(), "gateway.db")
	}
	g, err := Launch(t.Context(), opts)
	if err != nil {
		t.Fatalf("start test gateway: %v", err)
	}
	t.Cleanup(func() {
		for _, v := range g.Contract.Violations() {
			t.Errorf("gateway %s contract: %s", g.ID, v)
		}
	})
	t.Cleanup(g.Close)
	return g
}

// Launch starts a gateway until Close; ctx only bounds the start. Without
// opts.DBPath the database goes to a temporary directory removed on Close.
func Launch(ctx context.Context, opts Options) (*Gateway, error) {
	layout := opts.Layout
	if layout == nil {
		name := opts.Preset
		if name == "" {
			name = gateway.PresetTwoBanks
		}
		l, err := gateway.Preset(name)
		if err != nil {
			return nil, err
		}
		layout = &l
	}
	secret := opts.Secret
	if secret == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		secret = "test-" + hex.EncodeToString(b)
	}
	var tmpDir string
	dbPath := opts.DBPath
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "gatewaytest-")
		if err != nil {
			return nil, fmt.Errorf("make database directory: %w", err)
		}
		tmpDir, dbPath = dir, filepath.Join(dir, "gateway.db")
	}
	policy := ScaledOpenPolicy()
	if opts.Open != nil {
		policy = *opts.Open
	}
	sensor := opts.SensorTimeout
	if sensor == 0 {
		sensor = 300 * time.Millisecond
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	id := opts.GatewayID
	if id == "" {
		id = layout.GatewayID
	}
	version := opts.Version
	if version == "" {
		version = "test"
	}
	addr, simAddr := opts.Addr, opts.SimAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if simAddr == "" {
		simAddr = "127.0.0.1:0"
	}

	g := &Gateway{
		ID:          id,
		Secret:      secret,
		DBPath:      dbPath,
		Sim:         simctl.New(simctl.Config{Latency: opts.Latency, DoorCloseAfter: opts.DoorCloseAfter}, layout.Wiring()),
		logger:      logger,
		tmpDir:      tmpDir,
		wrapCtl:     opts.WrapController,
		wrapHandler: opts.WrapHandler,
		cfg: gateway.Config{
			GatewayID: id, Secret: secret, DBPath: dbPath, Layout: *layout,
			Open: policy, SensorTimeout: sensor, Version: version, Logger: logger, StopGrace: opts.StopGrace,
			Watch: opts.Watch,
		},
	}

	simLn, err := net.Listen("tcp", simAddr)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("listen on %s for the simulator control: %w", simAddr, err)
	}
	g.SimURL = "http://" + simLn.Addr().String()
	simCtx, simStop := context.WithCancel(context.WithoutCancel(ctx))
	g.simStop, g.simStopped = simStop, make(chan struct{})
	go func() {
		defer close(g.simStopped)
		_ = gateway.Serve(simCtx, simLn, g.Sim.ControlHandler(), logger)
	}()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("listen on %s for the local API: %w", addr, err)
	}
	g.addr = ln.Addr().String()
	g.URL = "http://" + g.addr
	spec, err := gateway.OpenAPIJSON()
	if err == nil {
		g.Contract, err = contract.New(g.URL, spec)
	}
	if err != nil {
		_ = ln.Close()
		g.Close()
		return nil, fmt.Errorf("the local API's OpenAPI document: %w", err)
	}
	if err := g.serve(ctx, ln); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// serve opens the gateway on its database and serves it on ln until shutdown, which stops
// it as a gateway process stops (gateway.Server.Serve: requests in flight finish and record
// their results, then the database closes).
func (g *Gateway) serve(ctx context.Context, ln net.Listener) error {
	ctls := g.Sim.Controllers()
	if g.wrapCtl != nil {
		for i, c := range ctls {
			ctls[i] = g.wrapCtl(c)
		}
	}
	srv, err := gateway.New(ctx, g.cfg, ctls...)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("new gateway: %w", err)
	}
	h := srv.Handler()
	if g.wrapHandler != nil {
		h = g.wrapHandler(h)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := srv.Serve(sctx, g.Sim.Listener(ln), g.Sim.Middleware(g.Contract.Middleware(h))); err != nil {
			g.logger.Error("test gateway stopped serving", "err", err)
		}
	}()
	g.mu.Lock()
	g.server, g.stop, g.stopped = srv, stop, stopped
	g.mu.Unlock()
	return nil
}

// shutdown stops serving gracefully; the database is closed once it returns.
func (g *Gateway) shutdown() {
	g.mu.Lock()
	srv, stop, stopped := g.server, g.stop, g.stopped
	g.server, g.stop, g.stopped = nil, nil, nil
	g.mu.Unlock()
	if srv == nil {
		return
	}
	stop()
	<-stopped
	_ = srv.Close()
}

// Server returns the running gateway.Server (it changes on Restart).
func (g *Gateway) Server() *gateway.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.server
}

// Restart stops the gateway and starts it again on the same SQLite file and the
// same address, as a process restart would. The simulator (door states,
// counters, fault mode) carries over.
func (g *Gateway) Restart(t testing.TB) {
	t.Helper()
	if err := g.Reopen(t.Context()); err != nil {
		t.Fatalf("restart test gateway: %v", err)
	}
}

// Reopen is Restart without a testing.TB.
func (g *Gateway) Reopen(ctx context.Context) error {
	g.shutdown()
	var ln net.Listener
	var err error
	for i := 0; i < 40; i++ {
		if ln, err = net.Listen("tcp", g.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("listen on %s again: %w", g.addr, err)
	}
	return g.serve(ctx, ln)
}

// Close stops the gateway, its simulator control API and the simulator.
func (g *Gateway) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	g.Sim.Close() // releases hanging requests first
	g.shutdown()
	if g.simStop != nil {
		g.simStop()
		<-g.simStopped
	}
	if g.tmpDir != "" {
		_ = os.RemoveAll(g.tmpDir)
	}
}

// SetFaults switches the simulator's fault mode directly (no HTTP).
func (g *Gateway) SetFaults(t testing.TB, f simctl.Faults) {
	t.Helper()
	if err := g.Sim.SetFaults(f); err != nil {
		t.Fatalf("set simulator faults: %v", err)
	}
}

// Do sends an authenticated request to the local API; body (if not nil) is
// sent as JSON, or as is when it is a []byte. It returns the response with its
// body read.
func (g *Gateway) Do(ctx context.Context, method, path string, body any) (*http.Response, []byte, error) {
	return g.DoWithSecret(ctx, g.Secret, method, path, body)
}

// DoWithSecret is Do with another bearer secret ("" sends none).
func (g *Gateway) DoWithSecret(ctx context.Context, secret, method, path string, body any) (*http.Response, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, nil, fmt.Errorf("encode request body: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+path, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, data, fmt.Errorf("read response body: %w", err)
	}
	return resp, data, nil
}
