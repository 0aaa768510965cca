package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// GatewaySyncStore is what the gateway sync loop needs from Postgres.
type GatewaySyncStore interface {
	ClaimDueGatewaySyncs(ctx context.Context, limit int, lease time.Duration) ([]store.Gateway, error)
	ScheduleGatewaySync(ctx context.Context, gatewayID int64, after time.Duration) error
	RecordGatewayHealth(ctx context.Context, gatewayID int64, online bool, cause string) error
	SyncGatewayLockers(ctx context.Context, gatewayID int64, lockers []store.GatewayLocker) error
	PruneGatewayRequests(ctx context.Context, keep time.Duration) (keys, requests int64, err error)
}

// GatewaySync keeps the cloud's view of its gateways fresh: every Interval (and within a
// Tick after a proxied write asked for it) it checks each gateway's health and refreshes the
// read-only mirror of its lockers; it also prunes expired idempotency keys and old requests.
// Every worker runs it; gateways are leased in Postgres, so each is synced by one at a time.
type GatewaySync struct {
	Store   GatewaySyncStore
	Keyring SecretOpener
	HTTP    *http.Client
	Logger  *slog.Logger
	// Interval between two syncs of one gateway (default 30 s).
	Interval time.Duration
	// Tick is how often due gateways are claimed (default 1 s).
	Tick time.Duration
	// Keep is how long terminal requests are kept (default 30 days).
	Keep time.Duration
	// Timeout bounds each call to a gateway (default 5 s).
	Timeout time.Duration
}

func (g *GatewaySync) defaults() {
	if g.Interval <= 0 {
		g.Interval = 30 * time.Second
	}
	if g.Tick <= 0 {
		g.Tick = time.Second
	}
	if g.Keep <= 0 {
		g.Keep = 30 * 24 * time.Hour
	}
	if g.Timeout <= 0 {
		g.Timeout = 5 * time.Second
	}
	if g.Logger == nil {
		g.Logger = slog.New(slog.DiscardHandler)
	}
	if g.HTTP == nil {
		g.HTTP = defaultGatewayClient
	}
}

// Run syncs due gateways until ctx is done.
func (g *GatewaySync) Run(ctx context.Context) error {
	g.defaults()
	t := time.NewTicker(g.Tick)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		g.syncDue(ctx)
		if time.Since(lastPrune) > 10*time.Minute {
			lastPrune = time.Now()
			if keys, reqs, err := g.Store.PruneGatewayRequests(ctx, g.Keep); err != nil && ctx.Err() == nil {
				g.Logger.WarnContext(ctx, "prune gateway requests", "err", err)
			} else if keys+reqs > 0 {
				g.Logger.InfoContext(ctx, "pruned gateway requests", "idempotencyKeys", keys, "requests", reqs)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (g *GatewaySync) syncDue(ctx context.Context) {
	gws, err := g.Store.ClaimDueGatewaySyncs(ctx, 20, g.Interval+4*g.Timeout)
	if err != nil {
		if ctx.Err() == nil {
			g.Logger.WarnContext(ctx, "claim gateway syncs", "err", err)
		}
		return
	}
	for _, gw := range gws {
		if err := g.SyncGateway(ctx, gw); err != nil && ctx.Err() == nil {
			g.Logger.WarnContext(ctx, "sync gateway", "gateway", gw.Serial, "err", err)
		}
		if err := g.Store.ScheduleGatewaySync(ctx, gw.ID, g.Interval); err != nil && ctx.Err() == nil {
			g.Logger.WarnContext(ctx, "schedule gateway sync", "gateway", gw.Serial, "err", err)
		}
	}
}

// SyncGateway checks one gateway's health and refreshes its locker mirror.
func (g *GatewaySync) SyncGateway(ctx context.Context, gw store.Gateway) error {
	g.defaults()
	secret, err := g.Keyring.Open(keyring.GatewaySecretPurpose(gw.Serial), gw.SecretSealed)
	if err != nil {
		return fmt.Errorf("open gateway secret: %w", err)
	}
	var health struct {
		Status string `json:"status"`
	}
	if err := g.get(ctx, gw, string(secret), "/health", &health); err != nil {
		if herr := g.Store.RecordGatewayHealth(ctx, gw.ID, false, err.Error()); herr != nil {
			return herr
		}
		return err
	}
	if err := g.Store.RecordGatewayHealth(ctx, gw.ID, true, ""); err != nil {
		return err
	}
	var lockers []struct {
		LockerID     int    `json:"lockerId"`
		Name         string `json:"name"`
		BankID       int    `json:"bankId"`
		LockerTypeID int    `json:"lockerTypeId"`
		IsLowLocker  bool   `json:"isLowLocker"`
		OutOfService bool   `json:"outOfService"`
	}
	if err := g.get(ctx, gw, string(secret), "/lockers", &lockers); err != nil {
		return err
	}
	var types []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	if err := g.get(ctx, gw, string(secret), "/locker-types", &types); err != nil {
		return err
	}
	typeNames := map[int]string{}
	for _, t := range types {
		typeNames[t.ID] = t.Name
	}
	mirror := make([]store.GatewayLocker, 0, len(lockers))
	for _, l := range lockers {
		m := store.GatewayLocker{LockerID: l.LockerID, Name: l.Name, LockerTypeID: l.LockerTypeID, BankID: l.BankID,
			IsLowLocker: l.IsLowLocker, OutOfService: l.OutOfService}
		if n, ok := typeNames[l.LockerTypeID]; ok {
			m.LockerTypeName = &n
		}
		mirror = append(mirror, m)
	}
	return g.Store.SyncGatewayLockers(ctx, gw.ID, mirror)
}

func (g *GatewaySync) get(ctx context.Context, gw store.Gateway, secret, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(gw.BaseURL, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("build gateway request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("get %s from gateway %s: %w", path, gw.Serial, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGatewayResponse))
	if err != nil {
		return fmt.Errorf("read %s from gateway %s: %w", path, gw.Serial, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s from gateway %s: status %d", path, gw.Serial, resp.StatusCode)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s from gateway %s: %w", path, gw.Serial, err)
	}
	return nil
}

// GatewayMetrics counts gateway requests by terminal state, where the outcome is decided.
type GatewayMetrics struct {
	terminals *prometheus.CounterVec
}

// NewGatewayMetrics registers the gateway-request metrics on reg.
func NewGatewayMetrics(reg prometheus.Registerer) *GatewayMetrics {
	m := &GatewayMetrics{terminals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockernet_gateway_request_terminal_total",
		Help: "Gateway requests that reached a terminal state, by class and state.",
	}, []string{"class", "state"})}
	reg.MustRegister(m.terminals)
	return m
}

func (m *GatewayMetrics) terminal(class, state string) {
	if m != nil {
		m.terminals.WithLabelValues(class, state).Inc()
	}
}
