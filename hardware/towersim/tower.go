package towersim

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// maxUploadedKept bounds how many already-uploaded events a tower keeps for the debug log;
// events not yet uploaded are never dropped.
const maxUploadedKept = 1000

// Tower is one simulated tower. It is safe for concurrent use.
type Tower struct {
	id         string
	tokenKey   []byte
	eventKey   []byte
	sessionKey []byte
	commandKey []byte
	secretID   string // names the secret in the state file (secretID)
	statePath  string
	now        func() time.Time
	logger     *slog.Logger

	mu          sync.Mutex
	lockers     map[int64]*lockerState
	used        map[[16]byte]time.Time // accepted token ids → their expiry
	bootEpoch   uint32
	lastSeq     uint64 // last sequence number used in this boot epoch
	log         []LoggedEvent
	refusals    map[string]int
	cmdPosition uint64 // the last command number applied
	sessions    uint32 // handshakes so far (the grant's sessionId)
	// cmdExpiry is the latest expiry of the command batches and configurations that moved
	// cmdPosition. The cloud sets every expiry the same time after signing and its command
	// log never shrinks, so a configuration that expires later was signed later, when the
	// log had reached cmdPosition: if it numbers fewer commands, the log went back (link.go).
	cmdExpiry time.Time

	// uploadMu makes uploads of this tower's events take turns, so two concurrent opens
	// never send the same events twice.
	uploadMu sync.Mutex
	// commandsMu makes command syncs of this tower take turns, so a phone compares the
	// cloud's command log with a tower position no other phone moves meanwhile.
	commandsMu sync.Mutex
}

type lockerState struct {
	doorOpen     bool
	itemInside   bool
	generation   uint32 // highest possession generation seen, reached by a bump, or set as a floor by the cloud
	outOfService bool   // the cloud's service state: no token opens the locker
}

// LoggedEvent is an event in a tower's log. Uploaded: a phone has handed it to the cloud;
// Acked: the cloud's events_ack command says it is stored, so the tower may forget it.
type LoggedEvent struct {
	BootEpoch uint32
	towerproto.Event
	Uploaded bool
	Acked    bool
}

// OpenResult describes an open. After a refusal only the token fields are set, and only
// when the token itself was genuine.
type OpenResult struct {
	LockerID   int64
	TokenID    [16]byte
	TokenType  towerproto.TokenType
	Generation uint32 // the token's generation
	ItemInside bool   // what the door sensor saw on closing
	Events     []LoggedEvent
}

// LockerStatus is a locker's door sensor, generation and service state.
type LockerStatus struct {
	LockerID     int64  `json:"lockerId"`
	DoorOpen     bool   `json:"doorOpen"`
	ItemInside   bool   `json:"itemInside"`
	Generation   uint32 `json:"generation"`
	OutOfService bool   `json:"outOfService"`
}

// TowerStatus is a snapshot of a tower for people and tests.
type TowerStatus struct {
	ID              string         `json:"id"`
	Firmware        string         `json:"firmware"`
	BootEpoch       uint32         `json:"bootEpoch"`
	LastSeq         uint64         `json:"lastSeq"`
	EventsPending   int            `json:"eventsPending"`
	CommandPosition uint64         `json:"commandPosition"`
	Refusals        map[string]int `json:"refusals"`
	Lockers         []LockerStatus `json:"lockers"`
}

// Firmware is the firmware version the simulated towers report over BLE.
const Firmware = "lockernet-towersim/2"

// NewTower starts a tower: a new boot epoch whose sequence numbers restart at 1. With a
// statePath, generations, used tokens, door sensors, the boot-epoch counter and events not
// yet uploaded are loaded from that file (if it exists) and written back after every change.
// A file written with another secret is dropped, with a warning, except for its boot-epoch
// counter: the tower was provisioned again and its cloud no longer backs that state.
func NewTower(cfg TowerConfig, statePath string, opts ...Option) (*Tower, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new tower: %w", err)
	}
	secret, err := cfg.secret()
	if err != nil {
		return nil, fmt.Errorf("new tower: %w", err)
	}
	o := buildOptions(opts)
	t := &Tower{
		id:         cfg.ID,
		tokenKey:   towerproto.TokenKey(secret),
		eventKey:   towerproto.EventKey(secret),
		sessionKey: towerproto.SessionKey(secret),
		commandKey: towerproto.CommandKey(secret),
		secretID:   secretID(secret),
		statePath:  statePath,
		now:        o.now,
		logger:     o.logger.With("tower", cfg.ID),
		lockers:    make(map[int64]*lockerState, len(cfg.LockerIDs)),
		used:       make(map[[16]byte]time.Time),
		refusals:   make(map[string]int),
	}
	for _, id := range cfg.LockerIDs {
		t.lockers[id] = &lockerState{}
	}
	if statePath != "" {
		if err := t.loadState(); err != nil {
			return nil, fmt.Errorf("new tower %s: %w", t.id, err)
		}
	}
	t.bootEpoch++
	if err := t.saveState(); err != nil {
		return nil, fmt.Errorf("new tower %s: %w", t.id, err)
	}
	t.logger.Info("tower booted", "bootEpoch", t.bootEpoch, "eventsPending", t.pendingCountLocked())
	return t, nil
}

// ID returns the tower id (lower-case).
func (t *Tower) ID() string { return t.id }

// Open verifies a locker token offline and, if the tower accepts it, opens the door and
// closes it again, with or without an item inside, as within a session that allows every
// open (a phone goes through Connect and a Link, whose session's claim may allow less). It
// refuses (returning an error wrapping a *Refusal, see RefusalCode) a token that is
// malformed or whose MAC fails, that names another tower or a locker it does not have, whose
// locker the cloud has taken out of service, whose generation is lower than the highest the
// tower has seen or been told for that locker, that has expired by the tower's clock, or that
// it has accepted before. A refusal changes nothing and records no event.
//
// On success the tower records token_used, door_opened and door_closed, raises its
// generation for the locker to the token's, and, when a pickup or release token leaves the
// locker empty, bumps that generation by one so no token of the ended possession can open the
// locker again.
func (t *Tower) Open(ctx context.Context, payloadHex, authHex string, closeWithItem bool) (OpenResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.openLocked(ctx, payloadHex, authHex, towerproto.PermAll, func(towerproto.TokenType) bool { return closeWithItem })
}

// openLocked is Open within a session of the given permission, with the door sensor's
// closing state chosen once the token type is known. The caller holds t.mu.
func (t *Tower) openLocked(ctx context.Context, payloadHex, authHex string, perm towerproto.Permission,
	itemInside func(towerproto.TokenType) bool) (OpenResult, error) {
	if err := ctx.Err(); err != nil {
		return OpenResult{}, fmt.Errorf("open locker: %w", err)
	}
	tok, err := t.verify(payloadHex, authHex)
	if err != nil {
		return OpenResult{}, t.refuseLocked(err)
	}

	// From here on the token is genuine, so a refusal can say which locker it named.
	res := OpenResult{LockerID: tok.LockerID, TokenID: tok.ID, TokenType: tok.Type, Generation: tok.Generation}
	need := towerproto.PermOpenDropoff
	if tok.Type != towerproto.TokenDropoff {
		need = towerproto.PermOpenPickup
	}
	if !perm.Has(need) {
		return res, t.refuseLocked(fmt.Errorf("%w: a %s token needs a session that allows it", ErrNotPermitted, tok.Type))
	}
	l, ok := t.lockers[tok.LockerID]
	if !ok {
		return res, t.refuseLocked(fmt.Errorf("%w: locker %d", ErrUnknownLocker, tok.LockerID))
	}
	if l.outOfService {
		return res, t.refuseLocked(fmt.Errorf("%w: locker %d", ErrOutOfService, tok.LockerID))
	}
	if tok.Generation < l.generation {
		return res, t.refuseLocked(fmt.Errorf("%w: token generation %d, tower has seen %d", ErrStaleGeneration, tok.Generation, l.generation))
	}
	now := t.now()
	if !now.Before(tok.ExpiresAt) {
		return res, t.refuseLocked(fmt.Errorf("%w: at %s", ErrExpired, tok.ExpiresAt.Format(time.RFC3339)))
	}
	if _, seen := t.used[tok.ID]; seen {
		return res, t.refuseLocked(ErrAlreadyUsed)
	}

	// Accepted. Forget used tokens that can no longer pass the expiry check anyway.
	maps.DeleteFunc(t.used, func(_ [16]byte, exp time.Time) bool { return !now.Before(exp) })
	t.used[tok.ID] = tok.ExpiresAt
	l.generation = max(l.generation, tok.Generation)
	withItem := itemInside(tok.Type)

	res.ItemInside = withItem
	base := towerproto.Event{At: now, LockerID: tok.LockerID, TokenID: tok.ID, Generation: tok.Generation}
	res.Events = append(res.Events, t.recordLocked(base, towerproto.EventTokenUsed, false))
	l.doorOpen = true
	res.Events = append(res.Events, t.recordLocked(base, towerproto.EventDoorOpened, false))
	l.doorOpen, l.itemInside = false, withItem
	res.Events = append(res.Events, t.recordLocked(base, towerproto.EventDoorClosed, withItem))

	// The cloud ends the possession (and bumps its generation) exactly when a pickup or
	// release closes the door on an empty locker (DESIGN §4.7); the tower follows the same
	// rule so the next token the cloud issues carries the generation the tower expects.
	if (tok.Type == towerproto.TokenPickup || tok.Type == towerproto.TokenRelease) && !withItem {
		l.generation++
	}

	if err := t.saveState(); err != nil {
		// The door has already opened; a simulator keeps going and says so.
		t.logger.Error("save tower state", "error", err)
	}
	t.logger.Info("locker opened", "locker", tok.LockerID, "tokenType", tok.Type.String(),
		"generation", tok.Generation, "itemInside", withItem)
	return res, nil
}

// verify checks the token against this tower. The tower id is read before the MAC is checked
// only to tell "not for this tower" apart from "forged": both refuse.
func (t *Tower) verify(payloadHex, authHex string) (towerproto.Token, error) {
	tower, err := towerproto.PeekTokenTower(payloadHex)
	if err != nil {
		return towerproto.Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if tower != t.id {
		return towerproto.Token{}, fmt.Errorf("%w: token is for tower %s", ErrWrongTower, tower)
	}
	tok, err := towerproto.DecodeToken(payloadHex, authHex, t.tokenKey)
	if err != nil {
		return towerproto.Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if tok.TowerID != t.id {
		// Only reachable if two towers shared a secret.
		return towerproto.Token{}, fmt.Errorf("%w: token is for tower %s", ErrWrongTower, tok.TowerID)
	}
	return tok, nil
}

func (t *Tower) refuseLocked(err error) error {
	code := RefusalCode(err)
	t.refusals[code]++
	t.logger.Info("token refused", "code", code, "error", err)
	return fmt.Errorf("open locker: %w", err)
}

func (t *Tower) recordLocked(base towerproto.Event, kind towerproto.EventKind, itemInside bool) LoggedEvent {
	t.lastSeq++
	e := base
	e.Seq = t.lastSeq
	e.Kind = kind
	e.At = e.At.Truncate(time.Millisecond)
	e.ItemInside = itemInside
	le := LoggedEvent{BootEpoch: t.bootEpoch, Event: e}
	t.log = append(t.log, le)
	return le
}

// Status returns a snapshot of the tower.
func (t *Tower) Status() TowerStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := TowerStatus{
		ID:              t.id,
		Firmware:        Firmware,
		BootEpoch:       t.bootEpoch,
		LastSeq:         t.lastSeq,
		EventsPending:   t.pendingCountLocked(),
		CommandPosition: t.cmdPosition,
		Refusals:        maps.Clone(t.refusals),
	}
	for _, id := range slices.Sorted(maps.Keys(t.lockers)) {
		l := t.lockers[id]
		st.Lockers = append(st.Lockers, LockerStatus{LockerID: id, DoorOpen: l.doorOpen, ItemInside: l.itemInside,
			Generation: l.generation, OutOfService: l.outOfService})
	}
	return st
}

// Events returns the event log, oldest first: every event not yet uploaded and the most
// recent uploaded ones.
func (t *Tower) Events() []LoggedEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.log)
}

// PendingEvents returns the events not yet uploaded, in (boot epoch, seq) order.
func (t *Tower) PendingEvents() []LoggedEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []LoggedEvent
	for _, e := range t.log {
		if !e.Uploaded {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, compareEvents)
	return out
}

func (t *Tower) pendingCountLocked() int {
	n := 0
	for _, e := range t.log {
		if !e.Uploaded {
			n++
		}
	}
	return n
}

type eventKey struct {
	epoch uint32
	seq   uint64
}

// markUploaded flags events as taken by the cloud, trims the log and saves the state.
func (t *Tower) markUploaded(events []LoggedEvent) error {
	done := make(map[eventKey]bool, len(events))
	for _, e := range events {
		done[eventKey{e.BootEpoch, e.Seq}] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.log {
		if done[eventKey{t.log[i].BootEpoch, t.log[i].Seq}] {
			t.log[i].Uploaded = true
		}
	}
	t.trimLocked(func(e LoggedEvent) bool { return e.Uploaded })
	if err := t.saveState(); err != nil {
		return fmt.Errorf("mark events uploaded: %w", err)
	}
	return nil
}

func compareEvents(a, b LoggedEvent) int {
	return cmp.Or(cmp.Compare(a.BootEpoch, b.BootEpoch), cmp.Compare(a.Seq, b.Seq))
}
