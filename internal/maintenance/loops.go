package maintenance

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/gatewaysync"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/partitions"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/sweeper"
)

// The loops, each declared once: its name, its pass (kept with its domain) and what it is
// given. The intervals come from config (APIServer, Worker) or from a test.

// ReconcileGrace is how long a stored gateway request may wait for its workflow's start
// before the reconciler starts it.
const ReconcileGrace = 30 * time.Second

// ExpiryGrace is how long a lapsed hold is left to its workflow before the sweep writes it back.
const ExpiryGrace = time.Minute

// OutboxSweep dispatches the outbox items whose immediate dispatch was lost or failed.
func OutboxSweep(every time.Duration, d *outbox.Dispatcher) Loop {
	return Loop{Name: "outbox_sweep", Every: every, Pass: d.Sweep}
}

// GatewayRequestReconciler starts the workflows of the gateway requests stored but never
// sent for longer than grace (the apiserver's Server, by internal/gatewayexec).
type GatewayRequestReconciler interface {
	ReconcileGatewayRequests(ctx context.Context, grace time.Duration) error
}

// GatewayRequestReconcile starts the workflows of gateway requests stored but never sent
// for longer than grace.
func GatewayRequestReconcile(every, grace time.Duration, s GatewayRequestReconciler) Loop {
	return Loop{Name: "gateway_request_reconcile", Every: every,
		Pass: func(ctx context.Context) error { return s.ReconcileGatewayRequests(ctx, grace) }}
}

// GatewaySync checks the health and mirrors the lockers of the gateways due a sync.
func GatewaySync(tick time.Duration, g *gatewaysync.GatewaySync) Loop {
	return Loop{Name: "gateway_sync", Every: tick, AtStart: true, Pass: g.SyncDue}
}

// GatewayRequestPrune deletes expired idempotency keys and the id claims of gateway requests
// whose month the history loop dropped.
func GatewayRequestPrune(every time.Duration, g *gatewaysync.GatewaySync) Loop {
	return Loop{Name: "gateway_request_prune", Every: every, AtStart: true, Pass: g.Prune}
}

// GatewayAlerts claims the gateways whose alert long poll no process holds and starts their
// polls (they run until the process stops: gatewayalerts.Watcher.Wait).
func GatewayAlerts(tick time.Duration, w *gatewayalerts.Watcher) Loop {
	return Loop{Name: "gateway_alerts", Every: tick, AtStart: true, Pass: w.Claim}
}

// GatewayAlertPrune deletes the gateway alerts kept past their retention (their webhook
// events go with the events' own).
func GatewayAlertPrune(every time.Duration, w *gatewayalerts.Watcher) Loop {
	return Loop{Name: "gateway_alert_prune", Every: every, AtStart: true, Pass: w.Prune}
}

// ExpirySweep writes back the holds lapsed for longer than ExpiryGrace that their
// workflows have not.
func ExpirySweep(every time.Duration, st sweeper.Store, logger *slog.Logger) Loop {
	return Loop{Name: "expiry_sweep", Every: every,
		Pass: func(ctx context.Context) error { return sweeper.ReleaseLapsedHolds(ctx, st, logger, ExpiryGrace) }}
}

// PickupDueStore marks the pickup windows past their end in batches: HoldHandoff gives the
// store a round of marks is made with, its deliveries' starts kept until the round has
// committed; NextPickupEnd is how long until the earliest end of an open window.
type PickupDueStore interface {
	HoldHandoff() (*store.Store, func())
	NextPickupEnd(ctx context.Context) (time.Duration, bool, error)
}

// pickupDueBatch is how many windows one transaction of the due pass marks, and
// pickupDueParallel how many such transactions run at once (each skips the windows the others
// hold). Postgres alone marks 10,000 windows in 0.57 s in batches of 2,500 four at a time, in
// 0.75 s in batches of 500 (BenchmarkMarkDuePickupWindows).
const (
	pickupDueBatch    = 2500
	pickupDueParallel = 4
)

// PickupDue marks every open pickup window past its end overdue, in batches, every interval:
// the windows' workflows keep each one's time durably, and this pass marks many that end in
// the same second without a workflow task each (docs/guides/pickup-windows.md). Until its
// next interval the pass waits for each window that ends before it, so marks start at the
// end itself rather than up to an interval after it. The events' deliveries start after each
// round of marks has committed all of its batches.
func PickupDue(every time.Duration, st PickupDueStore) Loop {
	return Loop{Name: "pickup_due", Every: every, Pass: func(ctx context.Context) error {
		until := time.Now().Add(every)
		for {
			held, release := st.HoldHandoff()
			err := markDueWindows(ctx, held)
			release()
			if err != nil {
				return err
			}
			wait, ok, err := st.NextPickupEnd(ctx)
			if err != nil || !ok || !time.Now().Add(wait).Before(until) {
				return err
			}
			// A window whose end came after the marks' statement began is marked after a
			// short wait, never in a busy loop.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(wait, 5*time.Millisecond)):
			}
		}
	}}
}

// markDueWindows marks every window past its end, pickupDueParallel batches at a time.
func markDueWindows(ctx context.Context, st *store.Store) error {
	var g errgroup.Group
	for range pickupDueParallel {
		g.Go(func() error {
			for {
				marked, err := st.MarkDuePickupWindows(ctx, pickupDueBatch)
				if err != nil || len(marked) < pickupDueBatch {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// HistoryPartitions creates the history tables' months ahead and drops those past their
// retention (keep, by table; see HistoryRetention).
func HistoryPartitions(every time.Duration, st partitions.HistoryStore, logger *slog.Logger, keep map[string]time.Duration) Loop {
	return Loop{Name: "history_partitions", Every: every, AtStart: true,
		Pass: func(ctx context.Context) error { return partitions.MaintainHistory(ctx, st, logger, keep, time.Now()) }}
}

// HistoryMove moves the reservations and locker tokens closed more than after ago out of
// their live tables into the partitioned history.
func HistoryMove(every, after time.Duration, st partitions.HistoryMover, logger *slog.Logger) Loop {
	return Loop{Name: "history_move", Every: every, AtStart: true,
		Pass: func(ctx context.Context) error { return partitions.MoveClosedToHistory(ctx, st, logger, after) }}
}

// HistoryRetention is each history table's retention from the settings; webhook deliveries
// go with their events, token uses with their tokens.
func HistoryRetention(r config.Retention) map[string]time.Duration {
	return map[string]time.Duration{
		store.HistoryTowerEvents:       r.TowerEvents,
		store.HistoryTransactions:      r.Transactions,
		store.HistoryWebhookDeliveries: r.WebhookEvents,
		store.HistoryWebhookEvents:     r.WebhookEvents,
		store.HistoryGatewayRequests:   r.GatewayRequests,
		store.HistoryReservations:      r.Reservations,
		store.HistoryTokenUses:         r.Tokens,
		store.HistoryTokens:            r.Tokens,
	}
}

// APIServer is the apiserver's loops.
func APIServer(cfg config.Config, d *outbox.Dispatcher, s GatewayRequestReconciler) []Loop {
	return []Loop{
		OutboxSweep(cfg.OutboxSweepInterval, d),
		GatewayRequestReconcile(cfg.GatewayReconcileInterval, ReconcileGrace, s),
	}
}

// WorkerStore is what the worker's loops need from Postgres.
type WorkerStore interface {
	sweeper.Store
	partitions.HistoryStore
	partitions.HistoryMover
	PickupDueStore
}

// Worker is the worker's loops.
func Worker(cfg config.Config, g *gatewaysync.GatewaySync, a *gatewayalerts.Watcher, st WorkerStore, logger *slog.Logger) []Loop {
	return []Loop{
		PickupDue(cfg.PickupDueInterval, st),
		GatewaySync(cfg.GatewaySyncTick, g),
		GatewayRequestPrune(cfg.GatewayPruneInterval, g),
		GatewayAlerts(cfg.GatewaySyncTick, a),
		GatewayAlertPrune(cfg.GatewayPruneInterval, a),
		ExpirySweep(cfg.ExpirySweepInterval, st, logger),
		HistoryPartitions(cfg.HistoryInterval, st, logger, HistoryRetention(cfg.Retention)),
		HistoryMove(cfg.HistoryMoveInterval, cfg.HistoryMoveAfter, st, logger),
	}
}
