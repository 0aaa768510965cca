package towerproto

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// EventKind says what happened at a tower.
type EventKind uint8

// Event kinds; the values are on the wire.
const (
	EventTokenUsed  EventKind = 1
	EventDoorOpened EventKind = 2
	EventDoorClosed EventKind = 3
	// EventSyncCommands reports that the tower has applied the cloud's commands up to and
	// including Event.Command (DESIGN §4.8). It names no locker and no token.
	EventSyncCommands EventKind = 4
)

var eventKinds = wireNames[EventKind]{typ: "EventKind", what: "event kind",
	names: []string{"token_used", "door_opened", "door_closed", "sync_commands"}}

// String returns the event name of DESIGN §4.7 and §4.8 ("token_used", "door_opened",
// "door_closed", "sync_commands").
func (k EventKind) String() string { return eventKinds.name(k) }

// Valid reports whether k is one of the defined event kinds.
func (k EventKind) Valid() bool { return eventKinds.valid(k) }

// ParseEventKind is the inverse of EventKind.String.
func ParseEventKind(s string) (EventKind, error) { return eventKinds.parse(s) }

// Event is one thing a tower recorded.
type Event struct {
	Seq        uint64    // per-boot-epoch sequence number, from 1
	Kind       EventKind //
	At         time.Time // tower clock, millisecond precision on the wire
	LockerID   int64     // > 0; zero for sync_commands
	TokenID    [16]byte  // zero for door events not tied to a token
	Generation uint32    // the token's generation (for events tied to a token)
	ItemInside bool      // for door_closed: the sensor saw an item when the door closed
	Command    uint64    // for sync_commands: the last command number applied (>= 1)
}

// Batch is a run of events with consecutive sequence numbers from one boot epoch of a tower.
// A batch may be empty: a tower answers a pull from an empty log with a signed batch of no
// events (the SDK uploads it all the same, DESIGN §4.8); its header still names the tower,
// the boot epoch and the next sequence number, in Start.
type Batch struct {
	TowerID   string
	BootEpoch uint32
	Events    []Event
	// Start matters only for an empty batch: the next sequence number the tower will use.
	// With events the first event's Seq is the start; EncodeBatch ignores Start then and
	// DecodeBatch leaves it zero.
	Start uint64
}

// BatchEnvelope is one element of the JSON array the SDK uploads to
// POST /api/v1/towers/{tower_id}/events. SyncEventStart and SyncEventCount repeat what the
// signed payload says so the cloud can spot duplicates before doing any crypto; DecodeBatch
// insists they agree (for an empty batch only the count must: a tower may name its next
// sequence number or zero).
type BatchEnvelope struct {
	SyncEventStart uint64 `json:"syncEventStart"`
	SyncEventCount int    `json:"syncEventCount"`
	Payload        string `json:"payload"`
	PayloadAuth    string `json:"payloadAuth"`
}

// BatchVersion is the format version byte of batch payloads written by EncodeBatch.
const BatchVersion = 0x01

// MaxBatchEvents is the most events one batch can carry (the count is a uint16).
const MaxBatchEvents = math.MaxUint16

// Batch payload layout (version 1), all integers big-endian:
//
//	offset size field
//	     0    1 version (0x01)
//	     1    8 tower id
//	     9    4 boot epoch (uint32)
//	    13    8 first sequence number (uint64, >= 1; any value when n = 0)
//	    21    2 event count n (uint16; 0 for an empty pull)
//	    23 38*n events, each:
//	              +0  1 kind (1 token_used, 2 door_opened, 3 door_closed, 4 sync_commands)
//	              +1  8 time (int64 unix milliseconds, tower clock)
//	              +9  8 subject: the locker id (int64, > 0); for sync_commands the last
//	                    command number applied (uint64, > 0)
//	             +17 16 token id (zero when not tied to a token; zero for sync_commands)
//	             +33  4 generation (uint32; zero for sync_commands)
//	             +37  1 flags (bit 0: item inside; other bits zero; zero for sync_commands)
//
// Event i has sequence number first + i.
const (
	batOffTower  = 1
	batOffEpoch  = 9
	batOffStart  = 13
	batOffCount  = 21
	batchHeader  = 23
	eventLen     = 38
	evOffAt      = 1
	evOffLocker  = 9
	evOffToken   = 17
	evOffGen     = 33
	evOffFlags   = 37
	flagItem     = 0x01
	maxBatchSize = batchHeader + eventLen*MaxBatchEvents
)

// BatchPayloadLen is the length in bytes of a version-1 batch payload with n events.
func BatchPayloadLen(n int) int { return batchHeader + eventLen*n }

// EncodeBatch signs b with eventKey (from EventKey). The events must have consecutive
// sequence numbers starting at 1 or later.
func EncodeBatch(b Batch, eventKey []byte) (BatchEnvelope, error) {
	tower, err := keyAndTower(eventKey, b.TowerID)
	if err != nil {
		return BatchEnvelope{}, fmt.Errorf("encode batch: %w", err)
	}
	n := len(b.Events)
	if n > MaxBatchEvents {
		return BatchEnvelope{}, fmt.Errorf("encode batch: %w: %d events, at most %d", ErrMalformed, n, MaxBatchEvents)
	}
	start := b.Start
	if n > 0 {
		start = b.Events[0].Seq
		if start == 0 || start > math.MaxUint64-uint64(n-1) {
			return BatchEnvelope{}, fmt.Errorf("encode batch: %w: first sequence number %d", ErrMalformed, start)
		}
	}

	p := make([]byte, BatchPayloadLen(n))
	p[0] = BatchVersion
	copy(p[batOffTower:], tower[:])
	binary.BigEndian.PutUint32(p[batOffEpoch:], b.BootEpoch)
	binary.BigEndian.PutUint64(p[batOffStart:], start)
	binary.BigEndian.PutUint16(p[batOffCount:], uint16(n))
	for i, e := range b.Events {
		switch {
		case e.Seq != start+uint64(i):
			return BatchEnvelope{}, fmt.Errorf("encode batch: %w: event %d has seq %d, want %d", ErrMalformed, i, e.Seq, start+uint64(i))
		case !e.Kind.Valid():
			return BatchEnvelope{}, fmt.Errorf("encode batch: %w: event seq %d has kind %d", ErrMalformed, e.Seq, e.Kind)
		case e.At.IsZero():
			return BatchEnvelope{}, fmt.Errorf("encode batch: %w: event seq %d has no time", ErrMalformed, e.Seq)
		}
		if err := checkSubject(e); err != nil {
			return BatchEnvelope{}, fmt.Errorf("encode batch: %w", err)
		}
		q := p[batchHeader+i*eventLen:]
		q[0] = byte(e.Kind)
		binary.BigEndian.PutUint64(q[evOffAt:], uint64(e.At.UnixMilli()))
		subject := uint64(e.LockerID)
		if e.Kind == EventSyncCommands {
			subject = e.Command
		}
		binary.BigEndian.PutUint64(q[evOffLocker:], subject)
		copy(q[evOffToken:], e.TokenID[:])
		binary.BigEndian.PutUint32(q[evOffGen:], e.Generation)
		if e.ItemInside {
			q[evOffFlags] = flagItem
		}
	}
	return BatchEnvelope{
		SyncEventStart: start,
		SyncEventCount: n,
		Payload:        hex.EncodeToString(p),
		PayloadAuth:    hex.EncodeToString(sign(p, eventKey)),
	}, nil
}

// DecodeBatch verifies env with eventKey and returns the batch. It checks the MAC (constant
// time) before reading any field, then that SyncEventStart and SyncEventCount match the
// payload (ErrMalformed otherwise). The tower id is returned lower-case.
func DecodeBatch(env BatchEnvelope, eventKey []byte) (Batch, error) {
	if err := checkKey(eventKey); err != nil {
		return Batch{}, fmt.Errorf("decode batch: %w", err)
	}
	p, err := batchPayload(env.Payload)
	if err := verifyPayload("decode batch", p, err, env.PayloadAuth, eventKey, BatchVersion); err != nil {
		return Batch{}, err
	}

	start := binary.BigEndian.Uint64(p[batOffStart:])
	n := int(binary.BigEndian.Uint16(p[batOffCount:]))
	switch {
	case n > 0 && (start == 0 || start > math.MaxUint64-uint64(n-1)):
		return Batch{}, fmt.Errorf("decode batch: %w: first sequence number %d", ErrMalformed, start)
	case env.SyncEventCount != n || (n > 0 || env.SyncEventStart != 0) && env.SyncEventStart != start:
		return Batch{}, fmt.Errorf("decode batch: %w: envelope says start %d count %d, payload says start %d count %d",
			ErrMalformed, env.SyncEventStart, env.SyncEventCount, start, n)
	}

	b := Batch{
		TowerID:   hex.EncodeToString(p[batOffTower:batOffEpoch]),
		BootEpoch: binary.BigEndian.Uint32(p[batOffEpoch:]),
		Events:    make([]Event, n),
	}
	if n == 0 {
		b.Start = start
	}
	for i := range b.Events {
		q := p[batchHeader+i*eventLen : batchHeader+(i+1)*eventLen]
		e := Event{
			Seq:        start + uint64(i),
			Kind:       EventKind(q[0]),
			At:         time.UnixMilli(int64(binary.BigEndian.Uint64(q[evOffAt:]))).UTC(),
			Generation: binary.BigEndian.Uint32(q[evOffGen:]),
			ItemInside: q[evOffFlags]&flagItem != 0,
		}
		copy(e.TokenID[:], q[evOffToken:])
		subject := binary.BigEndian.Uint64(q[evOffLocker:])
		if e.Kind == EventSyncCommands {
			e.Command = subject
		} else {
			e.LockerID = int64(subject)
		}
		switch {
		case !e.Kind.Valid():
			return Batch{}, fmt.Errorf("decode batch: %w: event seq %d has kind %d", ErrMalformed, e.Seq, e.Kind)
		case q[evOffFlags]&^flagItem != 0:
			return Batch{}, fmt.Errorf("decode batch: %w: event seq %d has flags %#02x", ErrMalformed, e.Seq, q[evOffFlags])
		}
		if err := checkSubject(e); err != nil {
			return Batch{}, fmt.Errorf("decode batch: %w", err)
		}
		b.Events[i] = e
	}
	return b, nil
}

// checkSubject checks what an event is about: a locker for the door and token events; a
// command number, and nothing else, for sync_commands.
func checkSubject(e Event) error {
	if e.Kind != EventSyncCommands {
		if e.LockerID <= 0 {
			return fmt.Errorf("%w: event seq %d has locker id %d", ErrMalformed, e.Seq, e.LockerID)
		}
		if e.Command != 0 {
			return fmt.Errorf("%w: event seq %d is a %s with a command number", ErrMalformed, e.Seq, e.Kind)
		}
		return nil
	}
	switch {
	case e.Command == 0 || e.Command > math.MaxInt64:
		return fmt.Errorf("%w: sync_commands event seq %d has command number %d", ErrMalformed, e.Seq, e.Command)
	case e.LockerID != 0 || e.TokenID != [16]byte{} || e.Generation != 0 || e.ItemInside:
		return fmt.Errorf("%w: sync_commands event seq %d names a locker, token, generation or item", ErrMalformed, e.Seq)
	}
	return nil
}

// PeekBatchTower returns the (lower-case) tower id an envelope's payload names, without
// verifying it, so the cloud can pick which tower's key to use.
func PeekBatchTower(env BatchEnvelope) (string, error) {
	p, err := batchPayload(env.Payload)
	return peekTower("peek batch tower", p, err, BatchVersion, batOffTower, batOffEpoch)
}

// batchPayload decodes the hex and checks the structure a version-1 payload must have (its
// length agrees with its event count). Other versions are left for the caller to reject
// after the MAC check.
func batchPayload(payloadHex string) ([]byte, error) {
	p, err := decodeHex(payloadHex, maxBatchSize)
	if err != nil {
		return nil, err
	}
	if p[0] != BatchVersion {
		return p, nil
	}
	if len(p) < batchHeader {
		return nil, fmt.Errorf("%w: version-1 batch payload is %d bytes, header alone is %d", ErrMalformed, len(p), batchHeader)
	}
	n := int(binary.BigEndian.Uint16(p[batOffCount:]))
	if len(p) != BatchPayloadLen(n) {
		return nil, fmt.Errorf("%w: version-1 batch payload of %d events is %d bytes, want %d", ErrMalformed, n, len(p), BatchPayloadLen(n))
	}
	return p, nil
}
