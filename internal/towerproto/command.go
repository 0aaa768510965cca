package towerproto

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// CommandKind says what a command tells a tower.
type CommandKind uint8

// Command kinds; the values are on the wire.
const (
	// CommandGenerationFloor: the tower refuses every token of the locker (Arg1) whose
	// generation is below Arg2. Floors only ever rise.
	CommandGenerationFloor CommandKind = 1
	// CommandServiceState: the locker (Arg1) is out of service (Arg2 = 1) or in service
	// (Arg2 = 0); an out-of-service locker opens for no token.
	CommandServiceState CommandKind = 2
	// CommandEventsAck: the cloud has stored the tower's events of boot epoch Arg1 up to and
	// including sequence number Arg2; the tower may forget them.
	CommandEventsAck CommandKind = 3
)

var commandKinds = wireNames[CommandKind]{typ: "CommandKind", what: "command kind",
	names: []string{"generation_floor", "service_state", "events_ack"}}

// String returns the command's name.
func (k CommandKind) String() string { return commandKinds.name(k) }

// ParseCommandKind is the inverse of CommandKind.String.
func ParseCommandKind(s string) (CommandKind, error) { return commandKinds.parse(s) }

// Valid reports whether k is one of the defined command kinds.
func (k CommandKind) Valid() bool { return commandKinds.valid(k) }

// Command is one instruction of the cloud to a tower.
type Command struct {
	Kind CommandKind
	Arg1 uint64 // the locker id, or the boot epoch for events_ack
	Arg2 uint64 // the generation, the service state (1 out, 0 in), or the sequence number
}

func (c Command) check() error {
	switch {
	case !c.Kind.Valid():
		return fmt.Errorf("%w: command kind %d", ErrMalformed, c.Kind)
	case c.Kind != CommandEventsAck && (c.Arg1 == 0 || c.Arg1 > math.MaxInt64):
		return fmt.Errorf("%w: %s names locker %d", ErrMalformed, c.Kind, c.Arg1)
	case c.Kind == CommandGenerationFloor && c.Arg2 > math.MaxUint32:
		return fmt.Errorf("%w: generation %d", ErrMalformed, c.Arg2)
	case c.Kind == CommandServiceState && c.Arg2 > 1:
		return fmt.Errorf("%w: service state %d", ErrMalformed, c.Arg2)
	case c.Kind == CommandEventsAck && (c.Arg1 > math.MaxUint32 || c.Arg2 == 0):
		return fmt.Errorf("%w: events_ack of epoch %d through %d", ErrMalformed, c.Arg1, c.Arg2)
	}
	return nil
}

// CommandBatch is a run of commands signed for one tower. A log batch carries the commands
// numbered Number, Number+1, ...; a configuration snapshot (Snapshot true) carries the full
// state of the tower as of command number Number (its position in the log), unnumbered.
type CommandBatch struct {
	TowerID   string
	Number    uint64
	Snapshot  bool
	ExpiresAt time.Time // second precision on the wire
	Commands  []Command
}

// CommandVersion is the format version byte of command payloads.
const CommandVersion = 0x01

// MaxBatchCommands is the most commands one batch carries (the count is a uint16; the cloud
// sends far fewer per batch, so a batch fits a few BLE writes).
const MaxBatchCommands = math.MaxUint16

// Command payload layout (version 1), all integers big-endian:
//
//	offset size field
//	     0    1 version (0x01)
//	     1    1 flags (bit 0: configuration snapshot; other bits zero)
//	     2    8 tower id
//	    10    8 number: the first command's number (>= 1), or a snapshot's log position (>= 0)
//	    18    2 command count n (>= 1)
//	    20    8 expiry (int64 unix seconds, tower clock)
//	    28 17*n commands, each: kind (1), arg1 (uint64), arg2 (uint64)
//
// The authenticator is 00 ‖ HMAC-SHA256(command key, payload). GET .../commands sends
// payload and authenticator apart (payload, payloadAuth); GET .../configuration sends each
// packet as one hex string, payload ‖ authenticator.
const (
	cmdOffFlags  = 1
	cmdOffTower  = 2
	cmdOffNumber = 10
	cmdOffCount  = 18
	cmdOffExpiry = 20
	cmdHeader    = 28
	cmdLen       = 17
	flagSnapshot = 0x01
	maxCmdSize   = cmdHeader + cmdLen*MaxBatchCommands
)

// CommandPayloadLen is the length in bytes of a version-1 command payload with n commands.
func CommandPayloadLen(n int) int { return cmdHeader + cmdLen*n }

// EncodeCommands signs b with commandKey (from CommandKey) and returns the payload and its
// authenticator as bytes.
func EncodeCommands(b CommandBatch, commandKey []byte) (payload, auth []byte, err error) {
	tower, err := keyAndTower(commandKey, b.TowerID)
	if err != nil {
		return nil, nil, fmt.Errorf("encode commands: %w", err)
	}
	n := len(b.Commands)
	switch {
	case n == 0 || n > MaxBatchCommands:
		return nil, nil, fmt.Errorf("encode commands: %w: %d commands, want 1..%d", ErrMalformed, n, MaxBatchCommands)
	case !b.Snapshot && (b.Number == 0 || b.Number > math.MaxInt64-uint64(n)):
		return nil, nil, fmt.Errorf("encode commands: %w: first number %d", ErrMalformed, b.Number)
	case b.Number > math.MaxInt64:
		return nil, nil, fmt.Errorf("encode commands: %w: position %d", ErrMalformed, b.Number)
	case b.ExpiresAt.IsZero():
		return nil, nil, fmt.Errorf("encode commands: %w: no expiry", ErrMalformed)
	}
	p := make([]byte, CommandPayloadLen(n))
	p[0] = CommandVersion
	if b.Snapshot {
		p[cmdOffFlags] = flagSnapshot
	}
	copy(p[cmdOffTower:], tower[:])
	binary.BigEndian.PutUint64(p[cmdOffNumber:], b.Number)
	binary.BigEndian.PutUint16(p[cmdOffCount:], uint16(n))
	binary.BigEndian.PutUint64(p[cmdOffExpiry:], uint64(b.ExpiresAt.Unix()))
	for i, c := range b.Commands {
		if err := c.check(); err != nil {
			return nil, nil, fmt.Errorf("encode commands: command %d: %w", i, err)
		}
		q := p[cmdHeader+i*cmdLen:]
		q[0] = byte(c.Kind)
		binary.BigEndian.PutUint64(q[1:], c.Arg1)
		binary.BigEndian.PutUint64(q[9:], c.Arg2)
	}
	return p, sign(p, commandKey), nil
}

// DecodeCommands verifies auth over payload with commandKey (constant time, before reading
// any field) and returns the batch. It checks neither the tower nor the expiry: that is the
// tower's policy.
func DecodeCommands(payload, auth, commandKey []byte) (CommandBatch, error) {
	if err := checkKey(commandKey); err != nil {
		return CommandBatch{}, fmt.Errorf("decode commands: %w", err)
	}
	if len(payload) < cmdHeader || len(payload) > maxCmdSize {
		return CommandBatch{}, fmt.Errorf("decode commands: %w: %d bytes", ErrMalformed, len(payload))
	}
	if err := verify(payload, auth, commandKey); err != nil {
		return CommandBatch{}, fmt.Errorf("decode commands: %w", err)
	}
	if payload[0] != CommandVersion {
		return CommandBatch{}, fmt.Errorf("decode commands: %w: payload version %#02x", ErrVersion, payload[0])
	}
	n := int(binary.BigEndian.Uint16(payload[cmdOffCount:]))
	b := CommandBatch{
		TowerID:   hex.EncodeToString(payload[cmdOffTower:cmdOffNumber]),
		Number:    binary.BigEndian.Uint64(payload[cmdOffNumber:]),
		Snapshot:  payload[cmdOffFlags]&flagSnapshot != 0,
		ExpiresAt: time.Unix(int64(binary.BigEndian.Uint64(payload[cmdOffExpiry:])), 0).UTC(),
	}
	switch {
	case payload[cmdOffFlags]&^flagSnapshot != 0:
		return CommandBatch{}, fmt.Errorf("decode commands: %w: flags %#02x", ErrMalformed, payload[cmdOffFlags])
	case n == 0 || len(payload) != CommandPayloadLen(n):
		return CommandBatch{}, fmt.Errorf("decode commands: %w: %d commands in %d bytes", ErrMalformed, n, len(payload))
	case !b.Snapshot && (b.Number == 0 || b.Number > math.MaxInt64-uint64(n)):
		return CommandBatch{}, fmt.Errorf("decode commands: %w: first number %d", ErrMalformed, b.Number)
	case b.Number > math.MaxInt64:
		return CommandBatch{}, fmt.Errorf("decode commands: %w: position %d", ErrMalformed, b.Number)
	}
	b.Commands = make([]Command, n)
	for i := range b.Commands {
		q := payload[cmdHeader+i*cmdLen:]
		c := Command{Kind: CommandKind(q[0]), Arg1: binary.BigEndian.Uint64(q[1:]), Arg2: binary.BigEndian.Uint64(q[9:])}
		if err := c.check(); err != nil {
			return CommandBatch{}, fmt.Errorf("decode commands: command %d: %w", i, err)
		}
		b.Commands[i] = c
	}
	return b, nil
}

// SplitPacket cuts a configuration packet (payload ‖ authenticator) in two.
func SplitPacket(packet []byte) (payload, auth []byte, err error) {
	if len(packet) < cmdHeader+authLen {
		return nil, nil, fmt.Errorf("split packet: %w: %d bytes", ErrMalformed, len(packet))
	}
	return packet[:len(packet)-authLen], packet[len(packet)-authLen:], nil
}

// DecodeHex decodes even-length hex of either case (at most maxBytes bytes), as every
// decoder of this package does.
func DecodeHex(s string, maxBytes int) ([]byte, error) { return decodeHex(s, maxBytes) }
