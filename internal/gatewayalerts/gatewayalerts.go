// Package gatewayalerts picks up the alerts of the gateways' watches of their lock
// controllers (door_ajar, forced_open, item_left, controller_offline, controller_online)
// promptly: one long poll per online gateway (GET /alerts?after=<last seq>&wait=25), whose
// answer is recorded — the cursor moved, each alert stored once by (gateway, seq) with its
// webhook event, a forced door out of service in the locker mirror — in one transaction.
//
// It is a background loop of the worker (internal/maintenance), like the gateway sync: each
// gateway's poll is leased in Postgres (gateway_alert_cursors), so every worker may run the
// loop and one polls a gateway at a time; a worker that dies leaves its leases to lapse and
// another takes its gateways over. The lease is renewed with every recorded answer; a holder
// that lost it records nothing (the new holder reads the same alerts again, and the unique
// (gateway, seq) would drop a second recording anyway).
package gatewayalerts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
	"github.com/lockernet/lockernet/internal/gatewayclient"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// Store is what the watcher needs from Postgres.
type Store interface {
	ClaimGatewayAlertWatches(ctx context.Context, holder string, limit int, lease time.Duration) ([]store.GatewayAlertWatch, error)
	RecordGatewayAlerts(ctx context.Context, b store.GatewayAlertBatch) ([]store.GatewayAlert, error)
	ReleaseGatewayAlertWatch(ctx context.Context, gatewayID int64, holder string, after time.Duration) error
	PruneGatewayAlerts(ctx context.Context, keep time.Duration) (int64, error)
}

// SecretOpener opens the gateways' secrets sealed under the master key.
type SecretOpener interface {
	Open(purpose string, sealed []byte) ([]byte, error)
}

// Defaults of Watcher.
const (
	// DefaultWait is the long poll's wait: the gateway's most (gateway.MaxAlertWait).
	DefaultWait    = 25 * time.Second
	DefaultTimeout = 10 * time.Second
	DefaultBackoff = 5 * time.Second
	DefaultLimit   = 200
)

// NoAlertsPause is how long a gateway without GET /alerts (404: a build before the watch) is
// left before it is asked again.
const NoAlertsPause = 10 * time.Minute

var errNoAlerts = errors.New("the gateway has no GET /alerts")

// Watcher holds the long polls of the gateways it leased. Claim is the loop's pass; Wait
// waits for the polls once the loop's context has ended.
type Watcher struct {
	Store   Store
	Keyring SecretOpener
	HTTP    *http.Client
	Logger  *slog.Logger
	// Holder names this process in the leases (default host, pid and a random suffix).
	Holder string
	// PollWait is the long poll's wait (default DefaultWait; at most 25 s, the gateway's bound).
	PollWait time.Duration
	// Timeout is what a poll may take beyond PollWait (default DefaultTimeout).
	Timeout time.Duration
	// Backoff is how long a gateway that did not answer is left before it is polled again
	// (default DefaultBackoff).
	Backoff time.Duration
	// Limit bounds the gateways this process polls at once (default DefaultLimit).
	Limit int
	// Keep is how long recorded alerts are kept (default 30 days).
	Keep time.Duration
	// Metrics counts the alerts recorded (NewMetrics); nil counts nothing.
	Metrics *Metrics

	once    sync.Once
	mu      sync.Mutex
	polling map[int64]bool
	wg      sync.WaitGroup
}

// Metrics are the watcher's counters.
type Metrics struct {
	alerts *prometheus.CounterVec
}

// NewMetrics registers lockernet_gateway_alerts_total on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockernet_gateway_alerts_total",
		Help: "Alerts of the gateways' lock-controller watches recorded (each once), by kind and location id.",
	}, []string{"kind", "location"})}
	reg.MustRegister(m.alerts)
	return m
}

func (w *Watcher) defaults() {
	w.once.Do(func() {
		if w.PollWait <= 0 || w.PollWait > DefaultWait {
			w.PollWait = DefaultWait
		}
		if w.Timeout <= 0 {
			w.Timeout = DefaultTimeout
		}
		if w.Backoff <= 0 {
			w.Backoff = DefaultBackoff
		}
		if w.Keep <= 0 {
			w.Keep = 30 * 24 * time.Hour
		}
		if w.Limit <= 0 {
			w.Limit = DefaultLimit
		}
		if w.Logger == nil {
			w.Logger = slog.New(slog.DiscardHandler)
		}
		if w.HTTP == nil {
			w.HTTP = gatewayclient.Default()
		}
		if w.Holder == "" {
			host, _ := os.Hostname()
			b := make([]byte, 4)
			_, _ = rand.Read(b)
			w.Holder = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
		}
		w.polling = map[int64]bool{}
	})
}

// lease is how long a claim or a recorded answer holds a gateway: one whole poll and a margin.
func (w *Watcher) lease() time.Duration { return w.PollWait + w.Timeout + 5*time.Second }

// Claim leases the gateways whose polls are free (up to Limit polled here at once) and starts
// a long poll for each; the polls run until ctx ends, their gateway fails to answer, or their
// lease is lost.
func (w *Watcher) Claim(ctx context.Context) error {
	w.defaults()
	w.mu.Lock()
	room := w.Limit - len(w.polling)
	w.mu.Unlock()
	if room <= 0 {
		return nil
	}
	watches, err := w.Store.ClaimGatewayAlertWatches(ctx, w.Holder, room, w.lease())
	if err != nil {
		return fmt.Errorf("claim gateway alert watches: %w", err)
	}
	for _, gw := range watches {
		w.mu.Lock()
		if w.polling[gw.Gateway.ID] {
			// Still polled here (its lease had lapsed under a slow poll): that poll goes on.
			w.mu.Unlock()
			continue
		}
		w.polling[gw.Gateway.ID] = true
		w.mu.Unlock()
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() {
				w.mu.Lock()
				delete(w.polling, gw.Gateway.ID)
				w.mu.Unlock()
			}()
			w.poll(ctx, gw)
		}()
	}
	return nil
}

// Prune deletes the alerts recorded more than Keep ago.
func (w *Watcher) Prune(ctx context.Context) error {
	w.defaults()
	n, err := w.Store.PruneGatewayAlerts(ctx, w.Keep)
	if err != nil {
		return err
	}
	if n > 0 {
		w.Logger.InfoContext(ctx, "pruned gateway alerts", "alerts", n)
	}
	return nil
}

// Wait waits until every poll has returned (call it once the context given to Claim ended).
func (w *Watcher) Wait() { w.wg.Wait() }

// poll holds one gateway's long poll until ctx ends, the gateway fails, or the lease is lost.
func (w *Watcher) poll(ctx context.Context, watch store.GatewayAlertWatch) {
	gw := watch.Gateway
	release := func(after time.Duration) {
		if err := w.Store.ReleaseGatewayAlertWatch(context.WithoutCancel(ctx), gw.ID, w.Holder, after); err != nil {
			w.Logger.WarnContext(ctx, "release gateway alert watch", "gateway", gw.Serial, "err", err)
		}
	}
	secret, err := w.Keyring.Open(keyring.GatewaySecretPurpose(gw.Serial), gw.SecretSealed)
	if err != nil {
		w.Logger.ErrorContext(ctx, "open gateway secret for its alerts", "gateway", gw.Serial, "err", err)
		release(w.Backoff)
		return
	}
	after, stream := watch.LastSeq, watch.Stream
	for {
		list, err := w.get(ctx, gw, string(secret), after)
		if ctx.Err() != nil {
			release(0) // stopping: another process may take it over at once
			return
		}
		if errors.Is(err, errNoAlerts) {
			w.Logger.InfoContext(ctx, "gateway has no alerts (a build before the watch); asking again later", "gateway", gw.Serial)
			release(NoAlertsPause)
			return
		}
		if err != nil {
			w.Logger.WarnContext(ctx, "poll gateway alerts", "gateway", gw.Serial, "err", err)
			release(w.Backoff)
			return
		}
		if list.Stream != stream && stream != "" && after > 0 {
			// The gateway's alert log is not the one the cursor follows: it started on a new
			// database, whose seqs began again at 1. Read the new log from its start.
			w.Logger.WarnContext(ctx, "gateway alert log is new; reading it from its start", "gateway", gw.Serial,
				"stream", list.Stream, "previous", stream, "previousSeq", after)
			after, stream = 0, list.Stream
			continue
		}
		stream = list.Stream
		batch := store.GatewayAlertBatch{GatewayID: gw.ID, Holder: w.Holder, Next: list.Next, Stream: stream, Lease: w.lease(),
			Alerts: make([]store.GatewayAlert, 0, len(list.Alerts))}
		for _, a := range list.Alerts {
			at, err := time.Parse(time.RFC3339Nano, a.At)
			if err != nil {
				at = time.Now()
			}
			batch.Alerts = append(batch.Alerts, store.GatewayAlert{Seq: a.Seq, Kind: a.Kind, LockerID: a.LockerID,
				LockerName: a.LockerName, BankID: a.BankID, ControllerID: a.ControllerID, At: at, Message: a.Message,
				TransactionID: a.TransactionID})
		}
		recorded, err := w.Store.RecordGatewayAlerts(ctx, batch)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			w.Logger.InfoContext(ctx, "gateway alert lease lost to another process", "gateway", gw.Serial)
			return
		case err != nil:
			if ctx.Err() == nil {
				w.Logger.ErrorContext(ctx, "record gateway alerts", "gateway", gw.Serial, "err", err)
			}
			release(w.Backoff)
			return
		}
		for _, a := range recorded {
			w.Logger.InfoContext(ctx, "gateway alert", "gateway", gw.Serial, "kind", a.Kind, "seq", a.Seq, "lockerId", a.LockerID)
			if w.Metrics != nil {
				w.Metrics.alerts.WithLabelValues(a.Kind, strconv.FormatInt(gw.LocationID, 10)).Inc()
			}
		}
		after = list.Next
	}
}

// get is one long poll of the gateway's GET /alerts.
func (w *Watcher) get(ctx context.Context, gw store.Gateway, secret string, after int64) (gwapi.AlertList, error) {
	var list gwapi.AlertList
	ctx, cancel := context.WithTimeout(ctx, w.PollWait+w.Timeout)
	defer cancel()
	url := fmt.Sprintf("%s/alerts?after=%d&wait=%d", strings.TrimRight(gw.BaseURL, "/"), after, int(w.PollWait/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return list, fmt.Errorf("build alerts request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := w.HTTP.Do(req)
	if err != nil {
		return list, fmt.Errorf("get alerts from gateway %s: %w", gw.Serial, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, gatewayclient.MaxAnswer))
	if err != nil {
		return list, fmt.Errorf("read alerts from gateway %s: %w", gw.Serial, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return list, fmt.Errorf("get alerts from gateway %s: %w", gw.Serial, errNoAlerts)
	}
	if resp.StatusCode != http.StatusOK {
		return list, fmt.Errorf("get alerts from gateway %s: status %d", gw.Serial, resp.StatusCode)
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return list, fmt.Errorf("decode alerts from gateway %s: %w", gw.Serial, err)
	}
	if list.Next < after {
		return list, fmt.Errorf("alerts from gateway %s: next %d is behind after %d", gw.Serial, list.Next, after)
	}
	return list, nil
}
