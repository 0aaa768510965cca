package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetentionSettings(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name                            string
		tower, txs, webhooks, gw, ttl   string
		res, tokens                     string
		wantTower, wantTxs, wantWebhook time.Duration
		wantGW                          time.Duration
		wantRes, wantTokens             time.Duration
		wantErr                         string
	}{
		{name: "defaults keep the API's promises", wantTower: 90 * day, wantTxs: 0, wantWebhook: 30 * day, wantGW: 30 * day,
			wantRes: 90 * day, wantTokens: 90 * day},
		{name: "set", tower: "1000h", txs: "9000h", webhooks: "0", gw: "2000h", res: "720h", tokens: "0",
			wantTower: 1000 * time.Hour, wantTxs: 9000 * time.Hour, wantWebhook: 0, wantGW: 2000 * time.Hour,
			wantRes: 30 * day, wantTokens: 0},
		{name: "gateway requests follow the idempotency TTL", ttl: "1000h", wantTower: 90 * day, wantWebhook: 30 * day, wantGW: 1000 * time.Hour,
			wantRes: 90 * day, wantTokens: 90 * day},
		{name: "under 30 days", webhooks: "719h", wantErr: "LOCKERNET_RETENTION_WEBHOOK_EVENTS"},
		{name: "negative", tower: "-1h", wantErr: "LOCKERNET_RETENTION_TOWER_EVENTS"},
		{name: "no unit", txs: "30", wantErr: "LOCKERNET_RETENTION_TRANSACTIONS"},
		{name: "requests shorter than their keys", gw: "700h", wantErr: "LOCKERNET_RETENTION_GATEWAY_REQUESTS"},
		{name: "requests kept for ever is not a setting", gw: "0", wantErr: "LOCKERNET_RETENTION_GATEWAY_REQUESTS"},
		{name: "reservations under 30 days", res: "100h", wantErr: "LOCKERNET_RETENTION_RESERVATIONS"},
		{name: "tokens under 30 days", tokens: "24h", wantErr: "LOCKERNET_RETENTION_TOKENS"},
		{name: "tokens not a duration", tokens: "90d", wantErr: "LOCKERNET_RETENTION_TOKENS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_RETENTION_TOWER_EVENTS":     tt.tower,
				"LOCKERNET_RETENTION_TRANSACTIONS":     tt.txs,
				"LOCKERNET_RETENTION_WEBHOOK_EVENTS":   tt.webhooks,
				"LOCKERNET_RETENTION_GATEWAY_REQUESTS": tt.gw,
				"LOCKERNET_RETENTION_RESERVATIONS":     tt.res,
				"LOCKERNET_RETENTION_TOKENS":           tt.tokens,
				"LOCKERNET_IDEMPOTENCY_TTL":            tt.ttl,
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, Retention{TowerEvents: tt.wantTower, Transactions: tt.wantTxs, WebhookEvents: tt.wantWebhook,
				GatewayRequests: tt.wantGW, Reservations: tt.wantRes, Tokens: tt.wantTokens}, c.Retention)
			assert.Equal(t, time.Hour, c.HistoryInterval)
		})
	}
}

// Closed reservations and tokens move to the history a day after they closed by default,
// every minute; the move waits at least an hour, and a row is kept in the history after it
// moves (a retention must be longer than the wait).
func TestHistoryMoveSettings(t *testing.T) {
	tests := []struct {
		name, after, every, res, tokens string
		wantAfter, wantEvery            time.Duration
		wantErr                         string
	}{
		{name: "defaults", wantAfter: 24 * time.Hour, wantEvery: time.Minute},
		{name: "set", after: "2h", every: "30s", wantAfter: 2 * time.Hour, wantEvery: 30 * time.Second},
		{name: "kept for ever: any wait", after: "5000h", res: "0", tokens: "0", wantAfter: 5000 * time.Hour, wantEvery: time.Minute},
		{name: "under an hour", after: "59m", wantErr: "LOCKERNET_HISTORY_MOVE_AFTER"},
		{name: "not a duration", after: "1", wantErr: "LOCKERNET_HISTORY_MOVE_AFTER"},
		{name: "reservations dropped before they move", after: "800h", res: "720h", tokens: "0", wantErr: "LOCKERNET_RETENTION_RESERVATIONS"},
		{name: "tokens dropped before they move", after: "2160h", res: "0", wantErr: "LOCKERNET_RETENTION_TOKENS"},
		{name: "interval zero", every: "0s", wantErr: "LOCKERNET_HISTORY_MOVE_INTERVAL"},
		{name: "interval negative", every: "-1m", wantErr: "LOCKERNET_HISTORY_MOVE_INTERVAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_HISTORY_MOVE_AFTER":     tt.after,
				"LOCKERNET_HISTORY_MOVE_INTERVAL":  tt.every,
				"LOCKERNET_RETENTION_RESERVATIONS": tt.res,
				"LOCKERNET_RETENTION_TOKENS":       tt.tokens,
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantAfter, c.HistoryMoveAfter)
			assert.Equal(t, tt.wantEvery, c.HistoryMoveInterval)
		})
	}
}
