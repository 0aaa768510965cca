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

// DefaultClaim is the claim of a simulated open when the request names none: Harbor's example
// apps ask for developer sessions.
const DefaultClaim = towerproto.ClaimDeveloper

// Open plays a phone at the tower, as the SDK does: it opens a session with the claim (cached,
// or from the cloud), does the handshake, pulls the cloud's commands and pushes them to the
// tower, presents the token, and uploads the tower's events. After a stale_generation refusal
// it checks the cloud's command log (PhoneLink.CheckLog) and, if the tower resynced because the
// log went back, presents the token once more. A refusal is an answer, not an
// error; errors are ErrUnknownTower, an unknown claim and a cancelled context. Offline (the
// request says so, or SetOffline) it uses the session it has cached and leaves the events
// queued.
func (s *Simulator) Open(ctx context.Context, towerID string, req OpenRequest) (OpenResponse, error) {
	t, ok := s.Tower(towerID)
	if !ok {
		return OpenResponse{}, fmt.Errorf("open on tower %q: %w", towerID, ErrUnknownTower)
	}
	claim := req.Claim
	if claim == "" {
		claim = DefaultClaim
	}
	if _, ok := towerproto.ClaimPermission(claim); !ok {
		return OpenResponse{}, fmt.Errorf("open on tower %s: %w: %q", t.id, ErrUnknownClaim, claim)
	}
	relay := s.relay
	if req.Offline {
		relay = s.relay.offlineView()
	}
	refused := func(err error, lockerID int64) (OpenResponse, error) {
		code := RefusalCode(err)
		if code == "" {
			if ctx.Err() != nil {
				return OpenResponse{}, ctx.Err()
			}
			code = ErrNoSession.Code
		}
		return OpenResponse{Opened: false, LockerID: lockerID, Error: &code, ErrorDescription: DescribeRefusal(code),
			Detail: err.Error(), EventsPending: t.Status().EventsPending}, nil
	}

	link, err := relay.Connect(ctx, t, claim, req.AccessToken)
	if err != nil {
		return refused(err, 0)
	}
	defer link.Close()
	out := OpenResponse{Claim: claim}
	if n, err := link.SyncCommands(ctx); err != nil {
		out.SyncError = err.Error()
		s.logger.Warn("commands not synced; the tower opens with what it knows", "tower", t.id, "error", err)
	} else {
		out.CommandsApplied = n
	}
	link.Link().SetDoor(func(typ towerproto.TokenType) bool {
		if req.CloseWithItem != nil {
			return *req.CloseWithItem
		}
		// Nobody said: a drop-off leaves an item, a pickup or release takes it out.
		return typ == towerproto.TokenDropoff
	})
	ans, openErr := link.OpenWithToken(ctx, req.Payload, req.PayloadAuth)
	if RefusalCode(openErr) == ErrStaleGeneration.Code && !req.Offline && out.SyncError == "" {
		// The cloud issued the token for a generation below the tower's floor: either it is
		// a token of an ended possession, or the cloud's command log went back since the
		// tower's floor was set (its database re-created under a running simulator). Only
		// the cloud's log can tell; the token is presented again only after a resync.
		n, resynced, err := link.CheckLog(ctx)
		out.CommandsApplied += n
		if err != nil {
			s.logger.Warn("the cloud's command log not checked after a stale_generation refusal", "tower", t.id, "error", err)
		} else if resynced {
			ans, openErr = link.OpenWithToken(ctx, req.Payload, req.PayloadAuth)
		}
	}
	if openErr == nil {
		out.Opened, out.LockerID, out.TokenType, out.ItemInside = true, ans.LockerID, ans.TokenType, ans.ItemInside
	}
	if openErr == nil {
		// After a refusal the phone leaves, as a person whose door stayed shut does; the
		// tower's queued events wait for the next sync.
		n, err := link.UploadEvents(ctx)
		out.EventsUploaded = n
		if err != nil {
			out.UploadError = err.Error()
			s.logger.Warn("events not uploaded; they stay queued", "tower", t.id, "error", err)
		}
	}
	out.EventsPending = t.Status().EventsPending
	if openErr != nil {
		if RefusalCode(openErr) == "" {
			return OpenResponse{}, fmt.Errorf("open on tower %s: %w", t.id, openErr)
		}
		code := RefusalCode(openErr)
		out.Error, out.ErrorDescription, out.Detail, out.LockerID = &code, DescribeRefusal(code), ans.Message, ans.LockerID
	}
	return out, nil
}

// ErrUnknownClaim means a claim that is none of DESIGN §4.8's six.
var ErrUnknownClaim = errors.New("unknown claim")

// Prepare caches a session of the claim for the tower, as a phone that was online once does
// before it goes offline.
func (s *Simulator) Prepare(ctx context.Context, towerID, claim, bearer string) error {
	t, ok := s.Tower(towerID)
	if !ok {
		return fmt.Errorf("prepare tower %q: %w", towerID, ErrUnknownTower)
	}
	_, _, _, err := s.relay.Session(ctx, t, claim, bearer)
	return err
}

// SetOffline takes the simulated phone off the network (true) or back on it.
func (s *Simulator) SetOffline(off bool) { s.relay.SetOffline(off) }

// SyncTower is a phone near the tower syncing with a sync_packet session: the tower's events
// up, the cloud's commands down. It returns the events the cloud took and the commands the
// tower applied.
func (s *Simulator) SyncTower(ctx context.Context, towerID, bearer string) (uploaded, applied int, err error) {
	t, ok := s.Tower(towerID)
	if !ok {
		return 0, 0, fmt.Errorf("sync tower %q: %w", towerID, ErrUnknownTower)
	}
	link, err := s.relay.Connect(ctx, t, towerproto.ClaimSyncPacket, bearer)
	if err != nil {
		return 0, 0, fmt.Errorf("sync tower %s: %w", t.id, err)
	}
	defer link.Close()
	uploaded, upErr := link.UploadEvents(ctx)
	applied, cmdErr := link.SyncCommands(ctx)
	if cmdErr == nil && applied > 0 {
		// Report the progress at once rather than at the next sync.
		n, err := link.UploadEvents(ctx)
		uploaded += n
		upErr = errors.Join(upErr, err)
	}
	return uploaded, applied, errors.Join(upErr, cmdErr)
}

// ResetEvents resets a tower's event log with a session of the claim (it needs the configure
// permission: technician, owner or developer) and reports the reset to the cloud.
func (s *Simulator) ResetEvents(ctx context.Context, towerID, claim, reason, bearer string) error {
	t, ok := s.Tower(towerID)
	if !ok {
		return fmt.Errorf("reset tower %q: %w", towerID, ErrUnknownTower)
	}
	link, err := s.relay.Connect(ctx, t, claim, bearer)
	if err != nil {
		return fmt.Errorf("reset tower %s: %w", t.id, err)
	}
	defer link.Close()
	return link.ResetEvents(ctx, reason)
}

// Sync syncs every tower (events up, commands down); it tries every tower and returns the
// events uploaded and the errors joined.
func (s *Simulator) Sync(ctx context.Context, bearer string) (int, error) {
	total := 0
	var errs []error
	for _, t := range s.Towers() {
		n, _, err := s.SyncTower(ctx, t.id, bearer)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("tower %s: %w", t.id, err))
		}
	}
	return total, errors.Join(errs...)
}

// RunSync syncs at once (a restart may have left events queued) and then every interval
// until ctx is done, as a phone that stays near the towers would. Failures are logged; the
// events stay queued.
func (s *Simulator) RunSync(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if _, err := s.Sync(ctx, ""); err != nil && ctx.Err() == nil {
			s.logger.Warn("background sync; events stay queued", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
