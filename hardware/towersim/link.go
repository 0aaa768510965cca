package towersim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// The tower's side of the BLE link (DESIGN §4.8). A phone connects with a session the cloud
// sealed for this tower and a request nonce; the tower checks the session, answers a grant,
// and from then on every message is a sealed packet on the keys both ends derive. The
// session's permission decides what the phone may do.

// Message is the CBOR body of every packet after the grant, both ways. Which fields a
// message uses depends on its type (towerproto.Msg*).
type Message struct {
	Type int    `cbor:"type"`
	Seq  uint64 `cbor:"seq"` // phone → tower: 1, 2, 3, ...; the answer repeats it

	BootEpoch        uint32 `cbor:"bootEpoch,omitempty"`
	SyncEventStart   uint64 `cbor:"syncEventStart,omitempty"`
	SyncEventCount   int    `cbor:"syncEventCount,omitempty"`
	SyncCommandStart uint64 `cbor:"syncCommandStart,omitempty"`
	Payload          []byte `cbor:"payload,omitempty"`
	PayloadAuth      []byte `cbor:"payloadAuth,omitempty"`
	Packet           []byte `cbor:"packet,omitempty"`
	LockerID         int64  `cbor:"lockerId,omitempty"`
	TokenType        string `cbor:"tokenType,omitempty"`
	ItemInside       bool   `cbor:"itemInside,omitempty"`
	Applied          int    `cbor:"applied,omitempty"`
	Code             string `cbor:"code,omitempty"`
	Message          string `cbor:"message,omitempty"`
	// Resynced (a configuration's answer): the configuration showed that the cloud's command
	// log went back, and the tower dropped what that log no longer backs; Message says why.
	Resynced bool `cbor:"resynced,omitempty"`
}

// maxPullEvents is the most events one pull answer carries.
const maxPullEvents = 128

// sessionSkew is how far before its issue time (by the tower's clock) a session is accepted:
// the cloud's and the tower's clocks differ a little.
const sessionSkew = 5 * time.Minute

// Link is one phone's BLE connection to the tower, after the handshake.
type Link struct {
	t       *Tower
	session towerproto.Session
	keys    towerproto.ChannelKeys
	lastSeq uint64
	closed  bool
	// door is the physical world at the phone's locker: whether an item is inside when the
	// door closes after an open. The simulator sets it; nothing on the wire carries it.
	door func(towerproto.TokenType) bool
}

// Connect is the phone's session request: the sealed session (hex, either case) and a
// 16-byte request nonce. The tower refuses a session not sealed for it or expired by its
// clock (ErrInvalidSession); otherwise it answers the grant.
func (t *Tower) Connect(payloadHex, authHex string, requestNonce []byte) (*Link, towerproto.GrantReply, error) {
	s, err := towerproto.OpenSession(payloadHex, authHex, t.sessionKey)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	switch {
	case err != nil:
		return nil, towerproto.GrantReply{}, t.refuseLocked(fmt.Errorf("%w: %w", ErrInvalidSession, err))
	case s.TowerID != t.id:
		return nil, towerproto.GrantReply{}, t.refuseLocked(fmt.Errorf("%w: sealed for tower %s", ErrInvalidSession, s.TowerID))
	case !now.Before(s.ExpiresAt) || now.Add(sessionSkew).Before(s.IssuedAt):
		return nil, towerproto.GrantReply{}, t.refuseLocked(fmt.Errorf("%w: valid %s to %s", ErrInvalidSession,
			s.IssuedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339)))
	}
	t.sessions++
	reply, keys, err := towerproto.SealGrant(s.Seed, requestNonce, t.sessions, now, rand.Reader)
	if err != nil {
		return nil, towerproto.GrantReply{}, t.refuseLocked(fmt.Errorf("%w: %w", ErrInvalidSession, err))
	}
	t.logger.Info("session granted", "client", s.ClientID, "user", s.UserID, "claims", s.Claims, "sessionId", t.sessions)
	return &Link{t: t, session: s, keys: keys}, reply, nil
}

// Session returns what the cloud said about the phone.
func (l *Link) Session() towerproto.Session { return l.session }

// SetDoor sets whether an item is inside when a door this link opens closes again.
func (l *Link) SetDoor(itemInside func(towerproto.TokenType) bool) { l.door = itemInside }

// ErrLink means a packet the tower could not accept on this link: forged, replayed, or the
// link is closed. The tower answers nothing to such a packet.
var ErrLink = errors.New("link refused the packet")

// Exchange takes one sealed packet of the phone and returns the tower's sealed answer.
func (l *Link) Exchange(ctx context.Context, packet, auth []byte) (answer, answerAuth []byte, err error) {
	var req Message
	if err := towerproto.OpenPacket(l.keys, packet, auth, &req); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrLink, err)
	}
	if l.closed || req.Seq != l.lastSeq+1 || req.Type < 100 || req.Type > 199 {
		return nil, nil, fmt.Errorf("%w: message %d seq %d after %d (closed %v)", ErrLink, req.Type, req.Seq, l.lastSeq, l.closed)
	}
	l.lastSeq = req.Seq
	resp := l.handle(ctx, req)
	resp.Seq = req.Seq
	return towerproto.SealPacket(l.keys, resp, rand.Reader)
}

func refusalMessage(err error) Message {
	code := RefusalCode(err)
	if code == "" {
		code = "error"
	}
	return Message{Type: towerproto.MsgError, Code: code, Message: err.Error()}
}

func (l *Link) handle(ctx context.Context, req Message) Message {
	t := l.t
	t.mu.Lock()
	defer t.mu.Unlock()
	perm := l.session.Permission
	need := map[int]towerproto.Permission{
		towerproto.MsgSyncStatus: towerproto.PermSync, towerproto.MsgSyncPull: towerproto.PermSync,
		towerproto.MsgSyncPush: towerproto.PermSync, towerproto.MsgConfigure: towerproto.PermSync,
		towerproto.MsgMaintenanceOpen: towerproto.PermMaintenance, towerproto.MsgResetEvents: towerproto.PermConfigure,
	}
	if p, ok := need[req.Type]; ok && !perm.Has(p) {
		return refusalMessage(t.refuseLocked(fmt.Errorf("%w: message %d", ErrNotPermitted, req.Type)))
	}
	switch req.Type {
	case towerproto.MsgSyncStatus:
		return t.statusLocked()
	case towerproto.MsgSyncPull:
		return t.pullLocked(req.BootEpoch, req.SyncEventStart)
	case towerproto.MsgSyncPush:
		return t.applyCommandsLocked(req.Payload, req.PayloadAuth, false)
	case towerproto.MsgConfigure:
		payload, auth, err := towerproto.SplitPacket(req.Packet)
		if err != nil {
			return Message{Type: towerproto.MsgError, Code: "invalid_commands", Message: err.Error()}
		}
		return t.applyCommandsLocked(payload, auth, true)
	case towerproto.MsgOpenWithToken:
		door := l.door
		if door == nil {
			door = func(typ towerproto.TokenType) bool { return typ == towerproto.TokenDropoff }
		}
		res, err := t.openLocked(ctx, hex.EncodeToString(req.Payload), hex.EncodeToString(req.PayloadAuth), perm, door)
		if err != nil {
			m := refusalMessage(err)
			m.LockerID = res.LockerID
			return m
		}
		return Message{Type: towerproto.MsgOpened, LockerID: res.LockerID, TokenType: res.TokenType.String(), ItemInside: res.ItemInside}
	case towerproto.MsgMaintenanceOpen:
		return t.maintenanceOpenLocked(req.LockerID)
	case towerproto.MsgResetEvents:
		t.resetEventsLocked()
		return t.statusLocked()
	case towerproto.MsgTerminate:
		l.closed = true
		return Message{Type: towerproto.MsgTerminated}
	}
	return Message{Type: towerproto.MsgError, Code: "unknown_message", Message: fmt.Sprintf("message type %d", req.Type)}
}

// statusLocked answers the sync status: where the tower's unacknowledged events start in
// this boot epoch, how many there are, and the next command number it expects.
func (t *Tower) statusLocked() Message {
	m := Message{Type: towerproto.MsgSyncStatusReply, BootEpoch: t.bootEpoch, SyncEventStart: t.lastSeq + 1,
		SyncCommandStart: t.cmdPosition + 1}
	for _, e := range t.log {
		if e.BootEpoch == t.bootEpoch && !e.Acked {
			if m.SyncEventCount == 0 {
				m.SyncEventStart = e.Seq
			}
			m.SyncEventCount++
		}
	}
	return m
}

// pullLocked answers a pull: the first run of consecutive events not yet uploaded at or after
// (epoch, start), signed as one batch; an empty signed batch when there is none.
func (t *Tower) pullLocked(epoch uint32, start uint64) Message {
	var run []LoggedEvent
	for _, e := range slices.SortedFunc(slices.Values(t.log), compareEvents) {
		if e.Uploaded || e.Acked || e.BootEpoch < epoch || e.BootEpoch == epoch && e.Seq < start {
			continue
		}
		if len(run) > 0 {
			last := run[len(run)-1]
			if e.BootEpoch != last.BootEpoch || e.Seq != last.Seq+1 || len(run) == maxPullEvents {
				break
			}
		}
		run = append(run, e)
	}
	b := towerproto.Batch{TowerID: t.id, BootEpoch: t.bootEpoch, Start: t.lastSeq + 1}
	if len(run) > 0 {
		b = batchOf(t.id, run)
	}
	env, err := towerproto.EncodeBatch(b, t.eventKey)
	if err != nil {
		return Message{Type: towerproto.MsgError, Code: "error", Message: err.Error()}
	}
	p, _ := hex.DecodeString(env.Payload)
	a, _ := hex.DecodeString(env.PayloadAuth)
	return Message{Type: towerproto.MsgSyncPullReply, BootEpoch: b.BootEpoch, SyncEventStart: env.SyncEventStart,
		SyncEventCount: env.SyncEventCount, Payload: p, PayloadAuth: a}
}

// applyCommandsLocked verifies a command batch (or a configuration packet) from the cloud and
// applies it: each numbered command once, in order; a snapshot as a whole when it is not
// older than what the tower has applied. Progress is recorded as a sync_commands event.
//
// A snapshot whose log position is below the tower's is normally an old configuration and
// changes nothing. But when it was signed after every command that moved the tower's
// position (it expires later, see cmdExpiry), the cloud's log itself went back: its database
// was re-created or restored. The tower then resyncs (resyncLocked) and applies the snapshot,
// as a factory-reset tower would; a replayed old configuration can never lower a floor.
func (t *Tower) applyCommandsLocked(payload, auth []byte, snapshot bool) Message {
	b, err := towerproto.DecodeCommands(payload, auth, t.commandKey)
	now := t.now()
	switch {
	case err != nil:
		return Message{Type: towerproto.MsgError, Code: "invalid_commands", Message: err.Error()}
	case b.TowerID != t.id:
		return Message{Type: towerproto.MsgError, Code: "invalid_commands", Message: "commands for tower " + b.TowerID}
	case !now.Before(b.ExpiresAt):
		return Message{Type: towerproto.MsgError, Code: "commands_expired", Message: "expired at " + b.ExpiresAt.Format(time.RFC3339)}
	case b.Snapshot != snapshot:
		return Message{Type: towerproto.MsgError, Code: "invalid_commands", Message: "a configuration packet where commands belong, or the reverse"}
	}
	before := t.cmdPosition
	applied := 0
	var reply Message
	if snapshot {
		if b.Number < t.cmdPosition {
			if !b.ExpiresAt.After(t.cmdExpiry) {
				t.logger.Warn("configuration ignored: it is behind the tower and was signed no later than the newest command the tower applied",
					"configurationPosition", b.Number, "towerPosition", t.cmdPosition,
					"configurationExpires", b.ExpiresAt, "newestCommandExpires", t.cmdExpiry)
				return Message{Type: towerproto.MsgSyncPushReply, SyncCommandStart: t.cmdPosition + 1}
			}
			reply.Resynced, reply.Message = true, t.resyncLocked(b.Number)
			before = t.cmdPosition
		}
		for _, c := range b.Commands {
			t.applyCommandLocked(c, true)
		}
		applied = len(b.Commands)
		t.cmdPosition = b.Number
		t.cmdExpiry = maxTime(t.cmdExpiry, b.ExpiresAt)
	} else {
		if b.Number > t.cmdPosition+1 {
			return Message{Type: towerproto.MsgError, Code: "command_gap", SyncCommandStart: t.cmdPosition + 1,
				Message: fmt.Sprintf("commands start at %d; the tower expects %d (it needs the configuration)", b.Number, t.cmdPosition+1)}
		}
		for i, c := range b.Commands {
			if n := b.Number + uint64(i); n > t.cmdPosition {
				t.applyCommandLocked(c, false)
				t.cmdPosition = n
				applied++
			}
		}
		if applied > 0 {
			t.cmdExpiry = maxTime(t.cmdExpiry, b.ExpiresAt)
		}
	}
	// A sync_commands event names a command (position 0, a log with no commands yet, has
	// nothing to report).
	if t.cmdPosition > 0 && (t.cmdPosition != before || snapshot && applied > 0) {
		t.recordLocked(towerproto.Event{At: now, Command: t.cmdPosition}, towerproto.EventSyncCommands, false)
	}
	if err := t.saveState(); err != nil {
		t.logger.Error("save tower state", "error", err)
	}
	if applied > 0 {
		t.logger.Info("commands applied", "applied", applied, "position", t.cmdPosition, "snapshot", snapshot)
	}
	reply.Type, reply.SyncCommandStart, reply.Applied = towerproto.MsgSyncPushReply, t.cmdPosition+1, applied
	return reply
}

// resyncLocked drops what a cloud whose command log went back to cloudPosition no longer
// backs, before its configuration is applied: the lockers' generation floors and service
// states and the command position (the configuration sets them again), and the event log,
// which starts a new boot epoch (events not yet uploaded are lost: they are about tokens the
// cloud no longer knows, and the new epoch's sequence numbers start at 1 as the cloud expects
// of a tower it has no events from). Used token ids and door sensors stay: a token stays used
// and an item stays inside whatever the cloud knows. It logs what it dropped and returns the
// reason, for the reset report to the cloud.
func (t *Tower) resyncLocked(cloudPosition uint64) string {
	was := t.cmdPosition
	gens := make(map[int64]uint32, len(t.lockers))
	for id, l := range t.lockers {
		gens[id] = l.generation
		l.generation, l.outOfService = 0, false
	}
	lost := t.pendingCountLocked()
	t.log = nil
	t.bootEpoch++
	t.lastSeq = 0
	t.cmdPosition, t.cmdExpiry = 0, time.Time{}
	reason := fmt.Sprintf("resync: the cloud's command log is at command %d, behind the %d commands the tower had applied "+
		"(the cloud's database was re-created or restored); the tower dropped its generation floors, service states and "+
		"event log (%d events not uploaded) and took the cloud's configuration", cloudPosition, was, lost)
	t.logger.Warn("tower resynced from the cloud: its command log went back", "cloudPosition", cloudPosition,
		"droppedCommandPosition", was, "droppedGenerations", formatGenerations(gens), "eventsNotUploadedDropped", lost,
		"bootEpoch", t.bootEpoch, "reason", reason)
	return reason
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (t *Tower) applyCommandLocked(c towerproto.Command, snapshot bool) {
	switch c.Kind {
	case towerproto.CommandGenerationFloor:
		if l, ok := t.lockers[int64(c.Arg1)]; ok {
			l.generation = max(l.generation, uint32(c.Arg2))
		}
	case towerproto.CommandServiceState:
		if l, ok := t.lockers[int64(c.Arg1)]; ok {
			l.outOfService = c.Arg2 == 1
		}
	case towerproto.CommandEventsAck:
		for i := range t.log {
			e := &t.log[i]
			if uint64(e.BootEpoch) == c.Arg1 && e.Seq <= c.Arg2 {
				e.Acked, e.Uploaded = true, true
			}
		}
		t.trimLocked(func(e LoggedEvent) bool { return e.Acked })
	}
}

// maintenanceOpenLocked opens a locker without a token (a technician's session).
func (t *Tower) maintenanceOpenLocked(lockerID int64) Message {
	l, ok := t.lockers[lockerID]
	if !ok {
		return refusalMessage(t.refuseLocked(fmt.Errorf("%w: locker %d", ErrUnknownLocker, lockerID)))
	}
	now := t.now()
	base := towerproto.Event{At: now, LockerID: lockerID}
	t.recordLocked(base, towerproto.EventDoorOpened, false)
	t.recordLocked(base, towerproto.EventDoorClosed, l.itemInside)
	if err := t.saveState(); err != nil {
		t.logger.Error("save tower state", "error", err)
	}
	return Message{Type: towerproto.MsgOpened, LockerID: lockerID, ItemInside: l.itemInside}
}

// resetEventsLocked drops the tower's event log and starts a new boot epoch: the events not
// yet uploaded are lost (the SDK then reports the reset to the cloud).
func (t *Tower) resetEventsLocked() {
	lost := t.pendingCountLocked()
	t.log = nil
	t.bootEpoch++
	t.lastSeq = 0
	if err := t.saveState(); err != nil {
		t.logger.Error("save tower state", "error", err)
	}
	t.logger.Warn("event log reset", "lost", lost, "bootEpoch", t.bootEpoch)
}

// trimLocked forgets the oldest of the events done reports (acknowledged, or uploaded)
// beyond the last maxUploadedKept: the log keeps what is still owed, and a bounded tail of
// the rest for the debug log.
func (t *Tower) trimLocked(done func(LoggedEvent) bool) {
	n := 0
	for _, e := range t.log {
		if done(e) {
			n++
		}
	}
	if drop := n - maxUploadedKept; drop > 0 {
		t.log = slices.DeleteFunc(t.log, func(e LoggedEvent) bool {
			if done(e) && drop > 0 {
				drop--
				return true
			}
			return false
		})
	}
}
