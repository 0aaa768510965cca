// Command apiserver serves the Locker Network Service HTTP API. Settings come from the
// environment (see package internal/config); it applies pending migrations at start unless
// LOCKERNET_AUTO_MIGRATE=false. With LOCKERNET_API_GATEWAY_WORKER=true it also runs a worker
// for the gateway-request task queue (eager workflow start for the gateway cloud API), with
// LOCKERNET_API_WORKER=true one for the main task queue (eager starts for the workflows its
// outbox starts: reservations, tokens, access codes, webhook deliveries).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/httpserve"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/process"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/worker"
)

func main() { process.Main("apiserver", run) }

// startingWait is how long a request that arrives while the apiserver is starting waits for
// it to be ready before it is answered 503.
var startingWait = 10 * time.Second

func run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	// Take the port first: a busy port is an error now, not after a minute of start-up. Until
	// the service is ready, /healthz and /readyz answer 503 "starting" at once and API
	// requests wait up to startingWait (DESIGN §8).
	ln, err := httpserve.Listen(cfg.APIAddr, "LOCKERNET_API_ADDR")
	if err != nil {
		return err
	}
	defer ln.Close()
	latch := httpserve.NewLatch(apiserver.Starting(), startingWait)
	logger.Info("apiserver listening", "addr", ln.Addr().String(), "public_url", cfg.PublicURL)
	return httpserve.ServeWhileStarting(ctx, ln, latch, 10*time.Second, func(ctx context.Context) error {
		return serve(ctx, cfg, logger, latch)
	})
}

// serve connects and migrates, hands the latch the API and runs the apiserver's loops until
// ctx is done.
func serve(ctx context.Context, cfg config.Config, logger *slog.Logger, latch *httpserve.Latch) error {
	ring, err := keyring.Load(cfg.MasterKey, cfg.MasterKeyFile)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.DBMaxConns, AcquireTimeout: cfg.DBAcquireTimeout, AppName: "apiserver"})
	if err != nil {
		return err
	}
	defer st.Close()
	if os.Getenv("LOCKERNET_AUTO_MIGRATE") != "false" {
		if err := st.Migrate(ctx, logger); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	// The Temporal SDK's metrics and the outcomes of the workflows its in-process workers
	// finish, on the admin listener's /metrics (the worker process exports its own).
	tc, closeTemporal, err := worker.DialWithMetrics(ctx, cfg.TemporalAddress, cfg.TemporalNS, reg, logger)
	if err != nil {
		return err
	}
	defer closeTemporal()
	auth := jwtauth.New(st, ring, cfg.PublicURL)
	if err := auth.EnsureKey(ctx); err != nil {
		return err
	}
	disp := outbox.New(st, tc, cfg.TaskQueue, logger)
	disp.Workers = cfg.OutboxWorkers
	// A committed webhook event's deliveries start at once from here; the sweep is the net.
	st.HandOffEvents(disp, outbox.HandoffGrace)
	reg.MustRegister(st.PoolCollector(), outbox.NewBacklogCollector(st, logger))
	srv := apiserver.New(apiserver.Deps{
		Store: st, Auth: auth, Keyring: ring, Temporal: tc, Workflows: disp, Logger: logger,
		Registry: reg, PublicURL: cfg.PublicURL,
		TaskQueue: cfg.TaskQueue, Cloud: apiserver.CloudSettingsFromConfig(cfg), SDK: apiserver.SDKSettingsFromConfig(cfg),
		RateLimits: apiserver.RateLimitsFromConfig(cfg), Webhooks: apiserver.WebhookSettingsFromConfig(cfg),
	})
	// On SIGTERM, requests waiting for a gateway answer at once (202 and the request to
	// poll) instead of holding the drain.
	stopDrain := context.AfterFunc(ctx, srv.Drain)
	defer stopDrain()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return disp.Run(gctx) })
	g.Go(func() error { return httpserve.ServeDebug(gctx, cfg.DebugAddr, logger) })
	g.Go(func() error { return httpserve.ServeAdmin(gctx, cfg.AdminAddr, srv.MetricsHandler(), logger) })
	g.Go(func() error { srv.RunGatewayCloud(gctx); return nil })
	g.Go(func() error {
		maintenance.Run(gctx, maintenance.NewMetrics(reg), logger, maintenance.APIServer(cfg, disp, srv)...)
		return nil
	})
	if cfg.APIWorker || cfg.APIGatewayWorker {
		// Workers on this process's own client (decision 0012, 0016): the workflows this
		// apiserver starts on their queues start eagerly (their first task comes back with the
		// start call and runs here), a gateway request's first send is dispatched eagerly to
		// it too, and a request the gateway answers at once settles here.
		acts := worker.Activities(cfg, st, ring, reg)
		acts.Gateways.Stored = srv.GatewayOutcomeStored
		// As this build's version of the worker deployment, as the worker process's are
		// (decision 0019): a gateway request this apiserver starts is pinned to its build.
		deployment, err := worker.DeploymentFromConfig(cfg)
		if err != nil {
			return err
		}
		for _, q := range inProcessQueues(cfg) {
			g.Go(func() error {
				logger.Info("in-process worker polling", "task_queue", q, "version", deployment.String())
				return worker.Run(gctx, tc, q, acts, worker.Options{Deployment: deployment})
			})
		}
	}
	latch.Ready(srv.Handler())
	logger.Info("apiserver ready")
	return g.Wait()
}

// inProcessQueues are the task queues this apiserver runs workers of: the main queue with
// LOCKERNET_API_WORKER, the gateway-request queue with LOCKERNET_API_GATEWAY_WORKER (once
// where the two are one queue).
func inProcessQueues(cfg config.Config) []string {
	var qs []string
	if cfg.APIWorker {
		qs = append(qs, cfg.TaskQueue)
	}
	if cfg.APIGatewayWorker && cfg.GatewayTaskQueue != cfg.TaskQueue {
		qs = append(qs, cfg.GatewayTaskQueue)
	}
	return qs
}
