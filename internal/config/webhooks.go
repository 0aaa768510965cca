package config

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Webhook settings (DESIGN §10):
//
//	LOCKERNET_WEBHOOK_RETRY_SCHEDULE  waits after each failed delivery attempt, comma-separated
//	                                  [webhook.DefaultRetrySchedule: 5s,5m,30m,2h,5h,10h,10h]
//	LOCKERNET_WEBHOOK_TIMEOUT         deadline of one delivery attempt [15s]
//
// Deliveries in the "production" environment go only to https URLs with public addresses.

// WebhookStrict reports whether deliveries must go to public https addresses only.
func (c Config) WebhookStrict() bool { return c.Environment == "production" }

func (c *Config) loadWebhooks() error {
	// Unset, the schedule stays nil: the deliveries then wait as webhook.DefaultRetrySchedule
	// says, its one definition (activities.WebhookDeps).
	if raw := os.Getenv("LOCKERNET_WEBHOOK_RETRY_SCHEDULE"); raw != "" {
		s, err := ParseSchedule(raw)
		if err != nil {
			return fmt.Errorf("parse LOCKERNET_WEBHOOK_RETRY_SCHEDULE: %w", err)
		}
		c.WebhookSchedule = s
	}
	var err error
	c.WebhookTimeout, err = time.ParseDuration(env("LOCKERNET_WEBHOOK_TIMEOUT", "15s"))
	if err != nil || c.WebhookTimeout <= 0 || c.WebhookTimeout > time.Minute {
		return fmt.Errorf("parse LOCKERNET_WEBHOOK_TIMEOUT: must be a duration from 1ms to 1m, e.g. 15s (got %q)",
			os.Getenv("LOCKERNET_WEBHOOK_TIMEOUT"))
	}
	return nil
}

// ParseSchedule reads a comma-separated list of 1 to 20 positive durations of at most 48 h.
func ParseSchedule(raw string) ([]time.Duration, error) {
	parts := strings.Split(raw, ",")
	if len(parts) > 20 {
		return nil, fmt.Errorf("at most 20 waits, got %d", len(parts))
	}
	out := make([]time.Duration, 0, len(parts))
	for _, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d <= 0 || d > 48*time.Hour {
			return nil, fmt.Errorf("%q is not a positive duration of at most 48h", strings.TrimSpace(p))
		}
		out = append(out, d)
	}
	return out, nil
}
