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
//	LOCKERNET_RETENTION_RESERVATIONS      closed reservations, by when they closed     [2160h = 90 days]
//	LOCKERNET_RETENTION_TOKENS            closed locker tokens with their uses, by
//	                                      when they closed                             [2160h = 90 days]
//	LOCKERNET_HISTORY_INTERVAL            the worker's pass over the partitions        [1h]
//	LOCKERNET_HISTORY_MOVE_AFTER          how long a closed reservation or token stays
//	                                      in its live table before it moves to the
//	                                      history, at least 1h                         [24h]
//	LOCKERNET_HISTORY_MOVE_INTERVAL       the worker's pass moving them                [1m]
//
// A retention other than 0 is at least 720h (the API promises its webhook event log 30 days),
// and the gateway requests' at least the idempotency keys' (a replayed key returns the
// outcome it stands for). Reservations and tokens have no create replay that reads them
// back; their default follows the tower events' (90 days): a token's use is paired from its
// tower's events, and a late event of a token still kept answers as it always did.

// MinRetention is the shortest retention other than 0 a setting takes.
const MinRetention = 30 * 24 * time.Hour

// Retention is how long each kind of history is kept (0: kept for ever).
type Retention struct {
	TowerEvents     time.Duration
	Transactions    time.Duration
	WebhookEvents   time.Duration
	GatewayRequests time.Duration
	Reservations    time.Duration
	Tokens          time.Duration
}

// MinHistoryMoveAfter is the shortest LOCKERNET_HISTORY_MOVE_AFTER: a row closed more recently
// may still be read by its workflow's last activity or a repeated request.
const MinHistoryMoveAfter = time.Hour

func (c *Config) loadRetention() error {
	vars := []struct {
		name string
		def  string
		dst  *time.Duration
	}{
		{"LOCKERNET_RETENTION_TOWER_EVENTS", "2160h", &c.Retention.TowerEvents},
		{"LOCKERNET_RETENTION_TRANSACTIONS", "0", &c.Retention.Transactions},
		{"LOCKERNET_RETENTION_WEBHOOK_EVENTS", "720h", &c.Retention.WebhookEvents},
		{"LOCKERNET_RETENTION_RESERVATIONS", "2160h", &c.Retention.Reservations},
		{"LOCKERNET_RETENTION_TOKENS", "2160h", &c.Retention.Tokens},
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
	c.HistoryMoveAfter, err = time.ParseDuration(env("LOCKERNET_HISTORY_MOVE_AFTER", "24h"))
	if err != nil || c.HistoryMoveAfter < MinHistoryMoveAfter {
		return fmt.Errorf("parse LOCKERNET_HISTORY_MOVE_AFTER: must be a duration of at least 1h (got %q)",
			os.Getenv("LOCKERNET_HISTORY_MOVE_AFTER"))
	}
	for _, r := range []struct {
		name string
		keep time.Duration
	}{{"LOCKERNET_RETENTION_RESERVATIONS", c.Retention.Reservations}, {"LOCKERNET_RETENTION_TOKENS", c.Retention.Tokens}} {
		if r.keep > 0 && r.keep <= c.HistoryMoveAfter {
			return fmt.Errorf("parse %s: must be longer than LOCKERNET_HISTORY_MOVE_AFTER (%s): a row is kept in the history "+
				"after it moves (got %s)", r.name, c.HistoryMoveAfter, r.keep)
		}
	}
	c.HistoryMoveInterval, err = time.ParseDuration(env("LOCKERNET_HISTORY_MOVE_INTERVAL", "1m"))
	if err != nil || c.HistoryMoveInterval <= 0 {
		return fmt.Errorf("parse LOCKERNET_HISTORY_MOVE_INTERVAL: must be a positive duration such as 1m (got %q)",
			os.Getenv("LOCKERNET_HISTORY_MOVE_INTERVAL"))
	}
	return nil
}
