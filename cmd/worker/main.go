// Command worker runs the Temporal worker of the Locker Network Service: the workflows and
// their activities (on LOCKERNET_TASK_QUEUE and LOCKERNET_GATEWAY_TASK_QUEUE), the sweeper of
// lapsed holds, the gateway health and locker-mirror sync, and /healthz, /readyz and /metrics
// (its own metrics, the Temporal SDK's and the workflow outcomes) on LOCKERNET_WORKER_ADDR.
// With LOCKERNET_WORKER_VERSIONING its workers poll as this build's version of the Temporal
// worker deployment (decision 0019). Settings come from the environment (package internal/config).
package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/gatewaysync"
	"github.com/lockernet/lockernet/internal/httpserve"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/maintenance"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/partitions"
	"github.com/lockernet/lockernet/internal/process"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/sweeper"
	"github.com/lockernet/lockernet/worker"
)

func main() { process.Main("worker", run) }

func run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	// The health port answers at once: 503 "starting" until the worker is connected and
	// polling, then /healthz, /readyz and /metrics (DESIGN §8).
	ln, err := httpserve.Listen(cfg.WorkerAddr, "LOCKERNET_WORKER_ADDR")
	if err != nil {
		return err
	}
	defer ln.Close()
	latch := httpserve.NewLatch(httpserve.StartingProbes(nil), 0)
	return httpserve.ServeWhileStarting(ctx, ln, latch, 5*time.Second, func(ctx context.Context) error {
		return serve(ctx, cfg, logger, latch)
	})
}

// serve connects, hands the latch the health handler and runs the worker's pollers and
// loops until ctx is done.
func serve(ctx context.Context, cfg config.Config, logger *slog.Logger, latch *httpserve.Latch) error {
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.DBMaxConns, AcquireTimeout: cfg.DBAcquireTimeout, AppName: "worker"})
	if err != nil {
		return err
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		st.PoolCollector(), sweeper.NewLagCollector(st, logger), activities.NewGatewaySeenCollector(st, logger), activities.NewPickupCollector(st, logger),
		activities.NewWebhookBacklogCollector(st, logger), partitions.NewHistoryCollector(st, logger))
	// The Temporal SDK's metrics and the workflow outcomes, on the same /metrics.
	tc, closeTemporal, err := worker.DialWithMetrics(ctx, cfg.TemporalAddress, cfg.TemporalNS, reg, logger)
	if err != nil {
		return err
	}
	defer closeTemporal()

	ring, err := keyring.Load(cfg.MasterKey, cfg.MasterKeyFile)
	if err != nil {
		return err
	}
	acts := worker.Activities(cfg, st, ring, reg)
	// The webhook events this worker's activities commit (an expiry, a gateway's health)
	// start their deliveries from here at once, eagerly on this worker; the apiserver's
	// outbox sweep is the net.
	disp := outbox.New(st, tc, cfg.TaskQueue, logger)
	disp.Workers = cfg.OutboxWorkers
	st.HandOffEvents(disp, outbox.HandoffGrace)
	// Both queues' workers poll as this build's version of the worker deployment (decision 0019).
	deployment, err := worker.DeploymentFromConfig(cfg)
	if err != nil {
		return err
	}
	opts := worker.Options{Deployment: deployment}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return disp.Run(gctx) })
	g.Go(func() error { return httpserve.ServeDebug(gctx, cfg.DebugAddr, logger) })
	g.Go(func() error {
		logger.Info("worker polling", "task_queue", cfg.TaskQueue, "namespace", cfg.TemporalNS, "version", deployment.String())
		return worker.Run(gctx, tc, cfg.TaskQueue, acts, opts)
	})
	if cfg.GatewayTaskQueue != cfg.TaskQueue {
		g.Go(func() error {
			logger.Info("worker polling", "task_queue", cfg.GatewayTaskQueue, "namespace", cfg.TemporalNS, "version", deployment.String())
			return worker.Run(gctx, tc, cfg.GatewayTaskQueue, acts, opts)
		})
	}
	g.Go(func() error {
		sync := &gatewaysync.GatewaySync{Store: st, Keyring: ring, Logger: logger, Interval: cfg.GatewaySyncInterval, Keep: cfg.Retention.GatewayRequests}
		alerts := &gatewayalerts.Watcher{Store: st, Keyring: ring, Logger: logger, Keep: cfg.Retention.WebhookEvents,
			Metrics: gatewayalerts.NewMetrics(reg)}
		maintenance.Run(gctx, maintenance.NewMetrics(reg), logger, maintenance.Worker(cfg, sync, alerts, st, logger)...)
		alerts.Wait()
		return nil
	})
	latch.Ready(worker.HealthHandler(st, tc, reg))
	return g.Wait()
}
