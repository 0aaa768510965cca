package apiserver

import (
	"context"
	"time"

	"github.com/lockernet/lockernet/internal/gatewayexec"
	"github.com/lockernet/lockernet/internal/store"
)

// Gateway requests run in internal/gatewayexec (store, start the workflow, await, poll,
// reconcile); the apiserver hands it its store, Temporal client and the gateway cloud API's
// settings, and keeps what is HTTP: the Server-Timing phases and each surface's rendering.

func newGatewayRequests(d Deps, settings CloudSettings, draining <-chan struct{}) *gatewayexec.Executor {
	return gatewayexec.New(gatewayexec.Deps{Store: d.Store, Temporal: d.Temporal, Logger: d.Logger, Registry: d.Registry,
		MarkPhase: markTiming, Draining: draining},
		gatewayexec.Settings{TaskQueue: settings.TaskQueue, Policy: settings.Policy,
			DisableEagerStart: settings.DisableEagerStart, MaxWaiters: settings.MaxWaiters})
}

// RunGatewayCloud listens for gateway request outcomes until ctx is done (listening again
// after a lost connection). The reconciler (ReconcileGatewayRequests) is a background loop
// of its own (internal/maintenance).
func (s *Server) RunGatewayCloud(ctx context.Context) {
	s.requests.Listen(ctx)
}

// ReconcileGatewayRequests starts the workflow of every request stored but never sent for
// longer than grace: one pass of the reconciler's loop (gatewayexec.Executor.Reconcile).
func (s *Server) ReconcileGatewayRequests(ctx context.Context, grace time.Duration) error {
	return s.requests.Reconcile(ctx, grace)
}

// GatewayOutcomeStored hands a gateway request's stored outcome to the handlers of this
// apiserver waiting for it. The apiserver's own gateway worker calls it
// (activities.GatewayDeps.Stored), so an answer needs neither the notification from
// Postgres nor another read of the row.
func (s *Server) GatewayOutcomeStored(row store.GatewayRequest) { s.requests.OutcomeStored(row) }
