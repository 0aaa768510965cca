package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/httpserve"
	"github.com/lockernet/lockernet/internal/webhook"
)

// webhookCmd runs `webhook listen`: a verifying receiver that prints each event as one JSON
// line, for trying webhooks out and as a model receiver (docs/webhooks.md).
func webhookCmd(ctx context.Context, env *adminEnv, args []string) error {
	if len(args) == 0 || args[0] != "listen" {
		return errors.New("usage: webhook listen -addr HOST:PORT (-secret whsec_... | -secret-file F) [-tolerance 5m]")
	}
	fs := flag.NewFlagSet("webhook listen", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9099", "address to listen on")
	secret := fs.String("secret", "", "the endpoint's secret (whsec_...)")
	secretFile := fs.String("secret-file", "", "file holding the endpoint's secret")
	tolerance := fs.Duration("tolerance", 5*time.Minute, "how far a delivery's timestamp may be from now")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	raw := *secret
	if raw == "" && *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		raw = strings.TrimSpace(string(b))
	}
	key, err := webhook.ParseSecret(raw)
	if err != nil {
		return fmt.Errorf("-secret or -secret-file: %w", err)
	}
	ln, err := httpserve.Listen(*addr, "-addr")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(env.out)
	rc := &webhook.Receiver{Key: key, Tolerance: *tolerance,
		Event: func(p webhook.Payload) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(p)
		},
		Duplicate: func(id string) { fmt.Fprintf(os.Stderr, "duplicate delivery of %s (already printed)\n", id) },
		Refused:   func(reason string) { fmt.Fprintf(os.Stderr, "refused a delivery: %s\n", reason) },
	}
	fmt.Fprintf(os.Stderr, "listening for webhook deliveries on http://%s/\n", ln.Addr())
	return httpserve.Serve(ctx, ln, rc, 5*time.Second)
}
