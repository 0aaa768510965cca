package towersim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Simulator is the set of provisioned towers and the SDK relay that uploads their events.
type Simulator struct {
	towers map[string]*Tower
	ids    []string
	relay  *Relay
	logger *slog.Logger
}

// NewSimulator boots every tower of cfg (each in a new boot epoch) with its state file
// <stateDir>/tower-<id>.json when cfg.StateDir is set. Unless WithTokenSource says
// otherwise, uploads use a ClientCredentials source built from cfg's client id and secret.
func NewSimulator(cfg Config, opts ...Option) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new simulator: %w", err)
	}
	o := buildOptions(opts)
	tokens := o.tokenSource
	if tokens == nil && cfg.ClientID != "" && cfg.APIBaseURL != "" {
		tokens = NewClientCredentials(cfg.APIBaseURL, cfg.ClientID, cfg.ClientSecret, opts...)
	}
	s := &Simulator{
		towers: make(map[string]*Tower, len(cfg.Towers)),
		relay:  NewRelay(cfg.APIBaseURL, tokens, opts...),
		logger: o.logger,
	}
	for _, tc := range cfg.Towers {
		statePath := ""
		if cfg.StateDir != "" {
			statePath = filepath.Join(cfg.StateDir, "tower-"+tc.ID+".json")
		}
		t, err := NewTower(tc, statePath, opts...)
		if err != nil {
			return nil, fmt.Errorf("new simulator: %w", err)
		}
		s.towers[t.id] = t
		s.ids = append(s.ids, t.id)
	}
	slices.Sort(s.ids)
	return s, nil
}

// Tower returns the tower with the id (either case).
func (s *Simulator) Tower(id string) (*Tower, bool) {
	t, ok := s.towers[strings.ToLower(id)]
	return t, ok
}

// Towers returns the towers ordered by id.
func (s *Simulator) Towers() []*Tower {
	out := make([]*Tower, len(s.ids))
	for i, id := range s.ids {
		out[i] = s.towers[id]
	}
	return out
}

// Relay returns the simulator's SDK relay.
func (s *Simulator) Relay() *Relay { return s.relay }

// ErrUnknownTower means the simulator has no tower with the id asked for.
var ErrUnknownTower = errors.New("unknown tower")

// Open plays a phone at the tower: it presents the token, and if the tower opens, uploads
// the tower's queued events as the SDK would. A refusal is an answer, not an error; errors
// are ErrUnknownTower and a cancelled context.
func (s *Simulator) Open(ctx context.Context, towerID string, req OpenRequest) (OpenResponse, error) {
	t, ok := s.Tower(towerID)
	if !ok {
		return OpenResponse{}, fmt.Errorf("open on tower %q: %w", towerID, ErrUnknownTower)
	}
	res, err := t.open(ctx, req.Payload, req.PayloadAuth, func(typ towerproto.TokenType) bool {
		if req.CloseWithItem != nil {
			return *req.CloseWithItem
		}
		// Nobody said: a drop-off leaves an item, a pickup or release takes it out.
		return typ == towerproto.TokenDropoff
	})
	if code := RefusalCode(err); code != "" {
		return OpenResponse{
			Opened:           false,
			LockerID:         res.LockerID,
			Error:            &code,
			ErrorDescription: DescribeRefusal(code),
			EventsPending:    t.Status().EventsPending,
		}, nil
	}
	if err != nil {
		return OpenResponse{}, err
	}

	out := OpenResponse{
		Opened:     true,
		LockerID:   res.LockerID,
		TokenType:  res.TokenType.String(),
		ItemInside: res.ItemInside,
	}
	n, err := s.relay.Upload(ctx, t, req.AccessToken)
	out.EventsUploaded = n
	if err != nil {
		out.UploadError = err.Error()
		s.logger.Warn("events not uploaded; they stay queued", "tower", t.id, "error", err)
	}
	out.EventsPending = t.Status().EventsPending
	return out, nil
}

// Sync uploads the queued events of every tower; it tries every tower and returns the
// errors joined.
func (s *Simulator) Sync(ctx context.Context, bearer string) (int, error) {
	total := 0
	var errs []error
	for _, t := range s.Towers() {
		n, err := s.relay.Upload(ctx, t, bearer)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("tower %s: %w", t.id, err))
		}
	}
	return total, errors.Join(errs...)
}

// RunSync uploads queued events at once (a restart may have left some) and then every
// interval until ctx is done, as a phone that stays near the tower would. Failures are
// logged; the events stay queued.
func (s *Simulator) RunSync(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if _, err := s.Sync(ctx, ""); err != nil && ctx.Err() == nil {
			s.logger.Warn("background event upload; events stay queued", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
