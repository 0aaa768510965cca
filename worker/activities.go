package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
)

// Activities are every activity a worker of either task queue runs, from the settings: the
// worker process and an apiserver that hosts workers of its own (LOCKERNET_API_WORKER,
// LOCKERNET_API_GATEWAY_WORKER) build them alike. The gateway and delivery metrics are
// registered on reg.
func Activities(cfg config.Config, st *store.Store, ring activities.SecretOpener, reg prometheus.Registerer) *activities.Activities {
	return &activities.Activities{Reservations: st, Tokens: st, AccessCodes: st, Pickups: st,
		Gateways: activities.GatewayDeps{Store: st, Keyring: ring, Metrics: activities.NewGatewayMetrics(reg), Policy: gatewayreq.Policy{
			CallTimeout: cfg.GatewayCallTimeout, HardwareTimeout: cfg.GatewayHardwareTimeout, DispatchAttempts: cfg.GatewayDispatchAttempts}},
		Webhooks: &activities.WebhookDeps{Store: st, Keyring: ring, Policy: webhook.Policy{Strict: cfg.WebhookStrict()},
			Schedule: cfg.WebhookSchedule, Timeout: cfg.WebhookTimeout, Metrics: activities.NewWebhookMetrics(reg)}}
}
