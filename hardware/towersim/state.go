package towersim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// stateVersion is the version of the state file layout. Version 1 files (before commands and
// sessions) and version 2 files (before the secret id and the commands' expiry) load too: what
// they lack starts empty. A file without a secret id cannot tell that the tower was
// provisioned again; the first sync's check of the cloud's command log still can.
const stateVersion = 3

// stateFile is what survives a simulator restart.
type stateFile struct {
	Version    int           `json:"version"`
	TowerID    string        `json:"towerId"`
	BootEpoch  uint32        `json:"bootEpoch"` // the epoch running when the file was written
	LastSeq    uint64        `json:"lastSeq,omitempty"`
	Commands   uint64        `json:"commandPosition,omitempty"`
	Sessions   uint32        `json:"sessions,omitempty"`
	Lockers    []stateLocker `json:"lockers"`
	UsedTokens []stateToken  `json:"usedTokens"`
	Events     []EventJSON   `json:"events"`
	// CommandsExpire is the latest expiry of the commands that moved the command position
	// (Tower.cmdExpiry).
	CommandsExpire *time.Time `json:"commandsExpireAt,omitempty"`
	// SecretID names the tower secret the state was built with (secretID), never the secret.
	SecretID string `json:"secretId,omitempty"`
}

type stateLocker struct {
	LockerID     int64  `json:"lockerId"`
	Generation   uint32 `json:"generation"`
	ItemInside   bool   `json:"itemInside"`
	OutOfService bool   `json:"outOfService,omitempty"`
}

type stateToken struct {
	ID        uuid.UUID `json:"id"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// EventJSON is the JSON form of a logged event (state file and debug API).
type EventJSON struct {
	BootEpoch  uint32    `json:"bootEpoch"`
	Seq        uint64    `json:"seq"`
	Kind       string    `json:"kind"`
	At         time.Time `json:"at"`
	LockerID   int64     `json:"lockerId"`
	TokenID    string    `json:"tokenId,omitempty"`
	Generation uint32    `json:"generation"`
	ItemInside bool      `json:"itemInside"`
	Command    uint64    `json:"command,omitempty"`
	Uploaded   bool      `json:"uploaded"`
	Acked      bool      `json:"acked,omitempty"`
}

// JSON returns the event in its JSON form.
func (e LoggedEvent) JSON() EventJSON {
	j := EventJSON{
		BootEpoch:  e.BootEpoch,
		Seq:        e.Seq,
		Kind:       e.Kind.String(),
		At:         e.At.UTC(),
		LockerID:   e.LockerID,
		Generation: e.Generation,
		ItemInside: e.ItemInside,
		Command:    e.Command,
		Uploaded:   e.Uploaded,
		Acked:      e.Acked,
	}
	if e.TokenID != ([16]byte{}) {
		j.TokenID = uuid.UUID(e.TokenID).String()
	}
	return j
}

func (j EventJSON) logged() (LoggedEvent, error) {
	kind, err := towerproto.ParseEventKind(j.Kind)
	if err != nil {
		return LoggedEvent{}, err
	}
	e := LoggedEvent{
		BootEpoch: j.BootEpoch,
		Event: towerproto.Event{
			Seq: j.Seq, Kind: kind, At: j.At, LockerID: j.LockerID,
			Generation: j.Generation, ItemInside: j.ItemInside, Command: j.Command,
		},
		Uploaded: j.Uploaded,
		Acked:    j.Acked,
	}
	if j.TokenID != "" {
		id, err := uuid.Parse(j.TokenID)
		if err != nil {
			return LoggedEvent{}, fmt.Errorf("parse token id: %w", err)
		}
		e.TokenID = id
	}
	return e, nil
}

// loadState reads the state file, if there is one. Lockers no longer provisioned are
// forgotten; new ones start fresh.
func (t *Tower) loadState() error {
	raw, err := os.ReadFile(t.statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("parse state %s: %w", t.statePath, err)
	}
	switch {
	case st.Version < 1 || st.Version > stateVersion:
		return fmt.Errorf("parse state %s: version %d, want %d", t.statePath, st.Version, stateVersion)
	case st.TowerID != t.id:
		return fmt.Errorf("parse state %s: it belongs to tower %q", t.statePath, st.TowerID)
	case st.SecretID != "" && st.SecretID != t.secretID:
		t.startClean(st)
		return nil
	}
	t.bootEpoch, t.cmdPosition, t.sessions = st.BootEpoch, st.Commands, st.Sessions
	if st.CommandsExpire != nil {
		t.cmdExpiry = *st.CommandsExpire
	}
	for _, sl := range st.Lockers {
		if l, ok := t.lockers[sl.LockerID]; ok {
			l.generation, l.itemInside, l.outOfService = sl.Generation, sl.ItemInside, sl.OutOfService
		}
	}
	for _, u := range st.UsedTokens {
		t.used[u.ID] = u.ExpiresAt
	}
	for i, j := range st.Events {
		e, err := j.logged()
		if err != nil {
			return fmt.Errorf("parse state %s: event %d: %w", t.statePath, i, err)
		}
		t.log = append(t.log, e)
	}
	slices.SortFunc(t.log, compareEvents)
	return nil
}

// startClean drops a state file built with another secret. The cloud provisions a tower's
// secret once, so a new secret means the tower was provisioned again, as the dev stack does
// when its database is re-created: generation floors, service states, the command position
// and used tokens came from a cloud that no longer backs them, and would refuse every token
// of the new one. The tower starts as a factory-new one; only its boot-epoch counter carries
// on, so no (boot epoch, sequence) pair is ever used twice.
func (t *Tower) startClean(st stateFile) {
	t.bootEpoch = st.BootEpoch
	pending := 0
	for _, e := range st.Events {
		if !e.Uploaded {
			pending++
		}
	}
	gens := make(map[int64]uint32, len(st.Lockers))
	for _, l := range st.Lockers {
		gens[l.LockerID] = l.Generation
	}
	t.logger.Warn("saved tower state dropped: it was built with another tower secret (the tower was provisioned again, "+
		"as when the cloud's database is re-created); starting clean and learning the lockers' state from the cloud at the next sync",
		"state", t.statePath, "droppedCommandPosition", st.Commands, "droppedGenerations", formatGenerations(gens),
		"eventsNotUploadedDropped", pending, "usedTokensDropped", len(st.UsedTokens))
}

// secretID names a tower secret in the state file: a one-way digest, so the file never
// holds the secret or a key derived from it that the protocol uses.
func secretID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("lockernet towersim state secret id\x00"))
	h.Write(secret)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// formatGenerations renders locker generations for a log line: "959:5 960:0".
func formatGenerations(gens map[int64]uint32) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(gens)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(id, 10) + ":" + strconv.FormatUint(uint64(gens[id]), 10))
	}
	return b.String()
}

// saveState writes the state file atomically (temp file, fsync, rename). Callers hold t.mu
// or own t exclusively.
func (t *Tower) saveState() error {
	if t.statePath == "" {
		return nil
	}
	st := stateFile{Version: stateVersion, TowerID: t.id, SecretID: t.secretID, BootEpoch: t.bootEpoch, LastSeq: t.lastSeq,
		Commands: t.cmdPosition, Sessions: t.sessions}
	if !t.cmdExpiry.IsZero() {
		exp := t.cmdExpiry.UTC()
		st.CommandsExpire = &exp
	}
	for _, id := range slices.Sorted(maps.Keys(t.lockers)) {
		l := t.lockers[id]
		st.Lockers = append(st.Lockers, stateLocker{LockerID: id, Generation: l.generation, ItemInside: l.itemInside, OutOfService: l.outOfService})
	}
	for id, exp := range t.used {
		st.UsedTokens = append(st.UsedTokens, stateToken{ID: id, ExpiresAt: exp})
	}
	slices.SortFunc(st.UsedTokens, func(a, b stateToken) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	for _, e := range t.log {
		st.Events = append(st.Events, e.JSON())
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(t.statePath, raw)
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create state file: %w", err)
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write state file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync state file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close state file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("replace state file: %w", err)
	}
	return nil
}
