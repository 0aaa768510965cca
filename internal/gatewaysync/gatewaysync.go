// Package gatewaysync keeps the cloud's view of its gateways fresh: each gateway's health
// and the read-only mirror of its lockers, checked every sync interval (and soon after a
// proxied write asks for it). It is a background loop of the worker (internal/maintenance),
// not an activity: gateways are leased in Postgres, so every worker may run it and each
// gateway is synced by one at a time.
package gatewaysync

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/gatewayclient"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// Store is what the gateway sync needs from Postgres.
type Store interface {
	ClaimDueGatewaySyncs(ctx context.Context, limit int, lease time.Duration) ([]store.Gateway, error)
	ScheduleGatewaySync(ctx context.Context, gatewayID int64, after time.Duration) error
	RecordGatewayHealth(ctx context.Context, gatewayID int64, online bool, cause string) error
	RecordGatewayKeys(ctx context.Context, gatewayID int64, honoured bool) error
	SyncGatewayLockers(ctx context.Context, gatewayID int64, lockers []store.GatewayLocker) error
	PruneGatewayRequests(ctx context.Context, keep time.Duration) (keys, requests int64, err error)
}

// SecretOpener opens the gateways' secrets sealed under the master key.
type SecretOpener interface {
	Open(purpose string, sealed []byte) ([]byte, error)
}

// GatewaySync syncs due gateways (SyncDue, every tick of its loop) and prunes expired
// idempotency keys and the id claims of dropped requests (Prune).
type GatewaySync struct {
	Store   Store
	Keyring SecretOpener
	HTTP    *http.Client
	Logger  *slog.Logger
	// Interval between two syncs of one gateway (default 30 s).
	Interval time.Duration
	// Keep is how long terminal requests are kept (default 30 days).
	Keep time.Duration
	// Timeout bounds each call to a gateway (default 5 s).
	Timeout time.Duration
}

func (g *GatewaySync) defaults() {
	if g.Interval <= 0 {
		g.Interval = 30 * time.Second
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
		g.HTTP = gatewayclient.Default()
	}
}

// Prune deletes expired idempotency keys and the id claims of requests older than Keep whose
// month is dropped (the requests themselves go with their month: the history loop).
func (g *GatewaySync) Prune(ctx context.Context) error {
	g.defaults()
	keys, claims, err := g.Store.PruneGatewayRequests(ctx, g.Keep)
	if err != nil {
		return fmt.Errorf("prune gateway requests: %w", err)
	}
	if keys+claims > 0 {
		g.Logger.InfoContext(ctx, "pruned gateway requests", "idempotencyKeys", keys, "requestIDs", claims)
	}
	return nil
}

// SyncDue syncs the gateways due (up to 20), each rescheduled Interval later. A gateway
// that does not answer is recorded offline and logged; only a failed claim fails the pass.
func (g *GatewaySync) SyncDue(ctx context.Context) error {
	g.defaults()
	gws, err := g.Store.ClaimDueGatewaySyncs(ctx, 20, g.Interval+4*g.Timeout)
	if err != nil {
		return fmt.Errorf("claim gateway syncs: %w", err)
	}
	for _, gw := range gws {
		if err := g.SyncGateway(ctx, gw); err != nil && ctx.Err() == nil {
			g.Logger.WarnContext(ctx, "sync gateway", "gateway", gw.Serial, "err", err)
		}
		if err := g.Store.ScheduleGatewaySync(ctx, gw.ID, g.Interval); err != nil && ctx.Err() == nil {
			g.Logger.WarnContext(ctx, "schedule gateway sync", "gateway", gw.Serial, "err", err)
		}
	}
	return nil
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
	header, err := g.get(ctx, gw, string(secret), "/health", &health)
	if err != nil {
		if herr := g.Store.RecordGatewayHealth(ctx, gw.ID, false, err.Error()); herr != nil {
			return herr
		}
		return err
	}
	if err := g.Store.RecordGatewayHealth(ctx, gw.ID, true, ""); err != nil {
		return err
	}
	// Whether it honours Idempotency-Key: a send whose fate is unknown may then go again.
	if honoured := gatewayclient.HonoursKeys(header); honoured != gw.HonoursKeys {
		if err := g.Store.RecordGatewayKeys(ctx, gw.ID, honoured); err != nil {
			return err
		}
	}
	var lockers []struct {
		LockerID     int    `json:"lockerId"`
		Name         string `json:"name"`
		BankID       int    `json:"bankId"`
		LockerTypeID int    `json:"lockerTypeId"`
		IsLowLocker  bool   `json:"isLowLocker"`
		OutOfService bool   `json:"outOfService"`
	}
	if _, err := g.get(ctx, gw, string(secret), "/lockers", &lockers); err != nil {
		return err
	}
	var types []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	if _, err := g.get(ctx, gw, string(secret), "/locker-types", &types); err != nil {
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

// get reads path from the gateway into v and returns the answer's header.
func (g *GatewaySync) get(ctx context.Context, gw store.Gateway, secret, path string, v any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(gw.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build gateway request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s from gateway %s: %w", path, gw.Serial, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, gatewayclient.MaxAnswer))
	if err != nil {
		return nil, fmt.Errorf("read %s from gateway %s: %w", path, gw.Serial, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s from gateway %s: status %d", path, gw.Serial, resp.StatusCode)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s from gateway %s: %w", path, gw.Serial, err)
	}
	return resp.Header, nil
}
