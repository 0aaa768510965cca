package config

import (
	"fmt"
	"os"
	"time"
)

// Retention of the stored history (DESIGN §11; the table in docs/data-lifecycle.md). A
// partitioned table keeps a row at least its retention and at most a month longer (its month
// is dropped whole); 0 keeps everything.
//
//	LOCKERNET_RETENTION_TOWER_EVENTS      tower events, by the tower's time            [2160h = 90 days]
//	LOCKERNET_RETENTION_TRANSACTIONS      organization transactions (the app engine
//	                                      lists every one kept)                        [0: kept]
//	LOCKERNET_RETENTION_WEBHOOK_EVENTS    webhook events and their deliveries          [720h = 30 days]
//	LOCKERNET_RETENTION_GATEWAY_REQUESTS  gateway requests with their stored outcomes,
//	                                      at least LOCKERNET_IDEMPOTENCY_TTL           [LOCKERNET_IDEMPOTENCY_TTL]
//	LOCKERNET_HISTORY_INTERVAL            the worker's pass over the partitions        [1h]
//
// A retention other than 0 is at least 720h (the API promises its webhook event log 30 days),
// and the gateway requests' at least the idempotency keys' (a replayed key returns the
// outcome it stands for).

// MinRetention is the shortest retention other than 0 a setting takes.
const MinRetention = 30 * 24 * time.Hour

// Retention is how long each kind of history is kept (0: kept for ever).
type Retention struct {
	TowerEvents     time.Duration
	Transactions    time.Duration
	WebhookEvents   time.Duration
	GatewayRequests time.Duration
}

func (c *Config) loadRetention() error {
	vars := []struct {
		name string
		def  string
		dst  *time.Duration
	}{
		{"LOCKERNET_RETENTION_TOWER_EVENTS", "2160h", &c.Retention.TowerEvents},
		{"LOCKERNET_RETENTION_TRANSACTIONS", "0", &c.Retention.Transactions},
		{"LOCKERNET_RETENTION_WEBHOOK_EVENTS", "720h", &c.Retention.WebhookEvents},
	}
	for _, v := range vars {
		d, err := time.ParseDuration(env(v.name, v.def))
		if err != nil || d < 0 || (d > 0 && d < MinRetention) {
			return fmt.Errorf("parse %s: must be 0 (kept for ever) or a duration of at least 720h (got %q)", v.name, os.Getenv(v.name))
		}
		*v.dst = d
	}
	d, err := time.ParseDuration(env("LOCKERNET_RETENTION_GATEWAY_REQUESTS", c.IdempotencyTTL.String()))
	if err != nil || d < c.IdempotencyTTL {
		return fmt.Errorf("parse LOCKERNET_RETENTION_GATEWAY_REQUESTS: must be a duration of at least LOCKERNET_IDEMPOTENCY_TTL (%s): "+
			"a replayed Idempotency-Key finds its stored outcome (got %q)", c.IdempotencyTTL, os.Getenv("LOCKERNET_RETENTION_GATEWAY_REQUESTS"))
	}
	c.Retention.GatewayRequests = d
	c.HistoryInterval, err = time.ParseDuration(env("LOCKERNET_HISTORY_INTERVAL", "1h"))
	if err != nil || c.HistoryInterval <= 0 {
		return fmt.Errorf("parse LOCKERNET_HISTORY_INTERVAL: must be a positive duration such as 1h (got %q)",
			os.Getenv("LOCKERNET_HISTORY_INTERVAL"))
	}
	return nil
}
