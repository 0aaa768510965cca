package towerproto

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// TokenType says what a locker token is for.
type TokenType uint8

// Token types; the values are on the wire.
const (
	TokenDropoff TokenType = 1
	TokenPickup  TokenType = 2
	TokenRelease TokenType = 3
)

var tokenTypes = wireNames[TokenType]{typ: "TokenType", what: "token type", names: []string{"dropoff", "pickup", "release"}}

// String returns the name the tower API uses for the type ("dropoff", "pickup", "release").
func (t TokenType) String() string { return tokenTypes.name(t) }

// Valid reports whether t is one of the defined token types.
func (t TokenType) Valid() bool { return tokenTypes.valid(t) }

// ParseTokenType is the inverse of TokenType.String.
func ParseTokenType(s string) (TokenType, error) { return tokenTypes.parse(s) }

// Token is the content of a locker token: what the cloud promises the tower.
type Token struct {
	ID         [16]byte // the token's uuid
	TowerID    string   // 16 hex digits; lower-case after decoding
	LockerID   int64    // > 0
	Type       TokenType
	Generation uint32    // possession generation of the locker when the token was issued
	ExpiresAt  time.Time // second precision on the wire (sub-second part is dropped)
	Nonce      [8]byte
}

// TokenVersion is the format version byte of token payloads written by EncodeToken.
const TokenVersion = 0x01

// Token payload layout (version 1), all integers big-endian:
//
//	offset size field
//	     0    1 version (0x01)
//	     1   16 token id
//	    17    8 tower id
//	    25    8 locker id (int64, > 0)
//	    33    1 type (1 dropoff, 2 pickup, 3 release)
//	    34    4 generation (uint32)
//	    38    8 expiry (int64 unix seconds)
//	    46    8 nonce
//	    54      end
const (
	tokOffID      = 1
	tokOffTower   = 17
	tokOffLocker  = 25
	tokOffType    = 33
	tokOffGen     = 34
	tokOffExpiry  = 38
	tokOffNonce   = 46
	tokenV1Length = 54
)

// maxTokenBytes bounds how much hex a decoder will look at; any version of the format is
// expected to stay far below it.
const maxTokenBytes = 1024

// TokenPayloadLen is the length in bytes of a version-1 token payload (twice that in hex).
const TokenPayloadLen = tokenV1Length

// EncodeToken returns the hex payload and payload_auth of t signed with tokenKey (from
// TokenKey). The tower id may be given in either case; it is encoded as bytes.
func EncodeToken(t Token, tokenKey []byte) (payloadHex, payloadAuthHex string, err error) {
	tower, err := keyAndTower(tokenKey, t.TowerID)
	if err != nil {
		return "", "", fmt.Errorf("encode token: %w", err)
	}
	switch {
	case t.LockerID <= 0:
		return "", "", fmt.Errorf("encode token: %w: locker id %d", ErrMalformed, t.LockerID)
	case !t.Type.Valid():
		return "", "", fmt.Errorf("encode token: %w: type %d", ErrMalformed, t.Type)
	case t.ExpiresAt.IsZero():
		return "", "", fmt.Errorf("encode token: %w: no expiry", ErrMalformed)
	}

	p := make([]byte, tokenV1Length)
	p[0] = TokenVersion
	copy(p[tokOffID:], t.ID[:])
	copy(p[tokOffTower:], tower[:])
	binary.BigEndian.PutUint64(p[tokOffLocker:], uint64(t.LockerID))
	p[tokOffType] = byte(t.Type)
	binary.BigEndian.PutUint32(p[tokOffGen:], t.Generation)
	binary.BigEndian.PutUint64(p[tokOffExpiry:], uint64(t.ExpiresAt.Unix()))
	copy(p[tokOffNonce:], t.Nonce[:])
	return hex.EncodeToString(p), hex.EncodeToString(sign(p, tokenKey)), nil
}

// DecodeToken verifies payloadAuthHex over payloadHex with tokenKey and returns the token.
// It checks the MAC (constant time) before reading any field; only the length of the
// payload, which is public anyway, is checked earlier so a truncated payload reads as
// ErrMalformed. It never checks expiry, tower or generation: that is the caller's policy.
func DecodeToken(payloadHex, payloadAuthHex string, tokenKey []byte) (Token, error) {
	if err := checkKey(tokenKey); err != nil {
		return Token{}, fmt.Errorf("decode token: %w", err)
	}
	p, err := tokenPayload(payloadHex)
	if err := verifyPayload("decode token", p, err, payloadAuthHex, tokenKey, TokenVersion); err != nil {
		return Token{}, err
	}

	var t Token
	copy(t.ID[:], p[tokOffID:])
	t.TowerID = hex.EncodeToString(p[tokOffTower:tokOffLocker])
	t.LockerID = int64(binary.BigEndian.Uint64(p[tokOffLocker:]))
	t.Type = TokenType(p[tokOffType])
	t.Generation = binary.BigEndian.Uint32(p[tokOffGen:])
	t.ExpiresAt = time.Unix(int64(binary.BigEndian.Uint64(p[tokOffExpiry:])), 0).UTC()
	copy(t.Nonce[:], p[tokOffNonce:])
	// The MAC holds, so these can only come from a broken issuer; refuse them all the same.
	switch {
	case t.LockerID <= 0:
		return Token{}, fmt.Errorf("decode token: %w: locker id %d", ErrMalformed, t.LockerID)
	case !t.Type.Valid():
		return Token{}, fmt.Errorf("decode token: %w: type %d", ErrMalformed, t.Type)
	}
	return t, nil
}

// PeekTokenTower returns the (lower-case) tower id a payload names, without verifying it,
// so a verifier can pick which tower's key to use. Never act on anything else unverified.
func PeekTokenTower(payloadHex string) (towerID string, err error) {
	p, err := tokenPayload(payloadHex)
	return peekTower("peek token tower", p, err, TokenVersion, tokOffTower, tokOffLocker)
}

// verifyPayload checks the payload p, which a payload decoder returned with err,
// against its hex payload_auth with key, and then that it is of the given version
// (the version is only trusted once the MAC holds); what names the decode in errors.
func verifyPayload(what string, p []byte, err error, authHex string, key []byte, version byte) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	auth, err := decodeHex(authHex, authLen)
	if err != nil {
		return fmt.Errorf("%s auth: %w", what, err)
	}
	if err := verify(p, auth, key); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p[0] != version {
		return fmt.Errorf("%s: %w: payload version %#02x", what, ErrVersion, p[0])
	}
	return nil
}

// peekTower is the tower id, bytes from to to, of the payload p of the given version,
// which a payload decoder returned with err; what names the peek in errors.
func peekTower(what string, p []byte, err error, version byte, from, to int) (string, error) {
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if p[0] != version {
		return "", fmt.Errorf("%s: %w: payload version %#02x", what, ErrVersion, p[0])
	}
	return hex.EncodeToString(p[from:to]), nil
}

// tokenPayload decodes the hex and checks the length a version-1 payload must have. Other
// versions are left for the caller to reject after the MAC check.
func tokenPayload(payloadHex string) ([]byte, error) {
	p, err := decodeHex(payloadHex, maxTokenBytes)
	if err != nil {
		return nil, err
	}
	if p[0] == TokenVersion && len(p) != tokenV1Length {
		return nil, fmt.Errorf("%w: version-1 token payload is %d bytes, want %d", ErrMalformed, len(p), tokenV1Length)
	}
	return p, nil
}
