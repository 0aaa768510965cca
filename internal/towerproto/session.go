package towerproto

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// Claims a mobile SDK may ask a session for (DESIGN §4.8), in Harbor's order.
const (
	ClaimSyncPacket     = "sync_packet"
	ClaimLockerPickup   = "locker_pickup"
	ClaimLockerDelivery = "locker_delivery"
	ClaimOwner          = "owner"
	ClaimTechnician     = "technician"
	ClaimDeveloper      = "developer"
)

// AllClaims lists every claim, in Harbor's order.
var AllClaims = []string{ClaimSyncPacket, ClaimLockerPickup, ClaimLockerDelivery, ClaimOwner, ClaimTechnician, ClaimDeveloper}

// Permission is what a session lets the phone do at the tower: a bit set, on the wire in the
// sealed session payload.
type Permission uint32

// Permissions. A locker token is still needed for every customer open; the permission only
// says which kinds of token the session may present.
const (
	// PermSync: exchange events and commands with the cloud through the phone.
	PermSync Permission = 1 << iota
	// PermOpenDropoff: open a locker with a drop-off token.
	PermOpenDropoff
	// PermOpenPickup: open a locker with a pickup or release token.
	PermOpenPickup
	// PermMaintenance: open a locker without a token, for maintenance.
	PermMaintenance
	// PermConfigure: change the tower's own settings, such as resetting its event log.
	PermConfigure
	// PermAdminister: everything a later firmware adds for owners (key changes and the like).
	PermAdminister
)

// PermAll is every permission, the owner's and the developer's.
const PermAll = PermSync | PermOpenDropoff | PermOpenPickup | PermMaintenance | PermConfigure | PermAdminister

// ClaimPermission returns what a claim lets a session do; ok is false for an unknown claim.
//
//	sync_packet      sync only
//	locker_delivery  sync, open with drop-off tokens
//	locker_pickup    sync, open with pickup and release tokens
//	technician       sync, customer opens (with tokens), maintenance opens, configuration
//	owner, developer everything
func ClaimPermission(claim string) (p Permission, ok bool) {
	switch claim {
	case ClaimSyncPacket:
		return PermSync, true
	case ClaimLockerDelivery:
		return PermSync | PermOpenDropoff, true
	case ClaimLockerPickup:
		return PermSync | PermOpenPickup, true
	case ClaimTechnician:
		return PermSync | PermOpenDropoff | PermOpenPickup | PermMaintenance | PermConfigure, true
	case ClaimOwner, ClaimDeveloper:
		return PermAll, true
	}
	return 0, false
}

// Has reports whether p includes every bit of want.
func (p Permission) Has(want Permission) bool { return p&want == want }

// ClaimsPermission is the union of the claims' permissions; an unknown claim is an error
// wrapping ErrMalformed.
func ClaimsPermission(claims []string) (Permission, error) {
	var p Permission
	for _, c := range claims {
		cp, ok := ClaimPermission(c)
		if !ok {
			return 0, fmt.Errorf("%w: unknown claim %q", ErrMalformed, c)
		}
		p |= cp
	}
	return p, nil
}

// ParseClaims reads a comma- or space-separated list of claims, checks each and returns them
// without duplicates, in Harbor's order.
func ParseClaims(s string) ([]string, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	var out []string
	for _, f := range fields {
		if _, ok := ClaimPermission(f); !ok {
			return nil, fmt.Errorf("%w: unknown claim %q (want one of %s)", ErrMalformed, f, strings.Join(AllClaims, ", "))
		}
	}
	for _, c := range AllClaims {
		if slices.Contains(fields, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// SeedSize is the length of a session seed (the session_seed the phone receives) and of the
// session key a tower hands out in its grant.
const SeedSize = 32

// Session is what the cloud promises a tower about one phone: who it is and what it may do
// until when. Only the tower can read it.
type Session struct {
	ID         [16]byte   // the cloud's id of the session (for its records and the tower's log)
	TowerID    string     // 16 hex digits; lower-case after decoding
	ClientID   string     // the OAuth client of the app
	UserID     string     // the app's user label from login/authorize; "" when none
	Claims     []string   // as asked for
	Permission Permission // what the claims allow
	Seed       []byte     // SeedSize bytes: the session_seed the phone also holds
	IssuedAt   time.Time  // second precision on the wire
	ExpiresAt  time.Time  // second precision on the wire
}

// sessionBody is the CBOR plaintext of a sealed session: a map with small integer keys, as
// CWT does, so a tower's parser stays small.
type sessionBody struct {
	ID         []byte   `cbor:"1,keyasint"`
	Tower      []byte   `cbor:"2,keyasint"`
	Client     string   `cbor:"3,keyasint"`
	User       string   `cbor:"4,keyasint,omitempty"`
	Permission uint32   `cbor:"5,keyasint"`
	Claims     []string `cbor:"6,keyasint"`
	Seed       []byte   `cbor:"7,keyasint"`
	IssuedAt   int64    `cbor:"8,keyasint"`
	ExpiresAt  int64    `cbor:"9,keyasint"`
}

// SessionVersion is the format version byte of sealed session payloads.
const SessionVersion = 0x01

// Sealed session layout (version 1):
//
//	payload      = version (0x01) ‖ tower id (8) ‖ nonce (12) ‖ AES-256-GCM ciphertext of the CBOR body
//	payload_auth = key version (0x00) ‖ the GCM tag (16)
//
// The additional data is version ‖ tower id ‖ key version, so the clear header cannot be
// changed either. The key is HKDF-SHA256(tower secret, info "tower-session").
const (
	sesOffTower    = 1
	sesOffNonce    = 9
	sesOffCipher   = 21
	sesNonceLen    = 12
	sesTagLen      = 16
	sesAuthLen     = 1 + sesTagLen
	maxSessionSize = 4096
)

// maxSessionText bounds the client and user strings a session can carry.
const maxSessionText = 256

// SealSession encrypts and authenticates s for its tower with sessionKey (from SessionKey).
// rnd supplies the nonce (crypto/rand.Reader in production).
func SealSession(s Session, sessionKey []byte, rnd io.Reader) (payloadHex, payloadAuthHex string, err error) {
	tower, err := keyAndTower(sessionKey, s.TowerID)
	if err != nil {
		return "", "", fmt.Errorf("seal session: %w", err)
	}
	switch {
	case len(s.Seed) != SeedSize:
		return "", "", fmt.Errorf("seal session: %w: seed of %d bytes", ErrMalformed, len(s.Seed))
	case s.ClientID == "" || len(s.ClientID) > maxSessionText || len(s.UserID) > maxSessionText:
		return "", "", fmt.Errorf("seal session: %w: client or user id", ErrMalformed)
	case s.IssuedAt.IsZero() || !s.ExpiresAt.After(s.IssuedAt):
		return "", "", fmt.Errorf("seal session: %w: validity", ErrMalformed)
	}
	body, err := cbor.Marshal(sessionBody{ID: s.ID[:], Tower: tower[:], Client: s.ClientID, User: s.UserID,
		Permission: uint32(s.Permission), Claims: s.Claims, Seed: s.Seed, IssuedAt: s.IssuedAt.Unix(), ExpiresAt: s.ExpiresAt.Unix()})
	if err != nil {
		return "", "", fmt.Errorf("seal session: encode: %w", err)
	}
	aead, err := sessionAEAD(sessionKey)
	if err != nil {
		return "", "", fmt.Errorf("seal session: %w", err)
	}
	p := make([]byte, sesOffCipher, sesOffCipher+len(body)+sesTagLen)
	p[0] = SessionVersion
	copy(p[sesOffTower:], tower[:])
	if _, err := io.ReadFull(rnd, p[sesOffNonce:sesOffCipher]); err != nil {
		return "", "", fmt.Errorf("seal session: nonce: %w", err)
	}
	sealed := aead.Seal(p, p[sesOffNonce:sesOffCipher], body, sessionAD(p))
	ct, tag := sealed[:len(sealed)-sesTagLen], sealed[len(sealed)-sesTagLen:]
	return hex.EncodeToString(ct), hex.EncodeToString(append([]byte{authKeyVersion}, tag...)), nil
}

// OpenSession verifies and decrypts a sealed session with sessionKey. It does not check the
// tower id against anything or the expiry against a clock: that is the tower's policy.
func OpenSession(payloadHex, payloadAuthHex string, sessionKey []byte) (Session, error) {
	if err := checkKey(sessionKey); err != nil {
		return Session{}, fmt.Errorf("open session: %w", err)
	}
	p, err := decodeHex(payloadHex, maxSessionSize)
	if err != nil {
		return Session{}, fmt.Errorf("open session: %w", err)
	}
	auth, err := decodeHex(payloadAuthHex, sesAuthLen)
	if err != nil {
		return Session{}, fmt.Errorf("open session auth: %w", err)
	}
	switch {
	case p[0] != SessionVersion:
		return Session{}, fmt.Errorf("open session: %w: payload version %#02x", ErrVersion, p[0])
	case len(p) <= sesOffCipher:
		return Session{}, fmt.Errorf("open session: %w: %d bytes", ErrMalformed, len(p))
	case len(auth) != sesAuthLen:
		return Session{}, fmt.Errorf("open session: %w: authenticator is %d bytes, want %d", ErrMalformed, len(auth), sesAuthLen)
	case auth[0] != authKeyVersion:
		return Session{}, fmt.Errorf("open session: %w: %w: key version %#02x", ErrBadMAC, ErrVersion, auth[0])
	}
	aead, err := sessionAEAD(sessionKey)
	if err != nil {
		return Session{}, fmt.Errorf("open session: %w", err)
	}
	ct := append(slices.Clone(p[sesOffCipher:]), auth[1:]...)
	body, err := aead.Open(nil, p[sesOffNonce:sesOffCipher], ct, sessionAD(p))
	if err != nil {
		return Session{}, fmt.Errorf("open session: %w", ErrBadMAC)
	}
	var b sessionBody
	if err := strictCBOR.Unmarshal(body, &b); err != nil {
		return Session{}, fmt.Errorf("open session: %w: body: %w", ErrMalformed, err)
	}
	// The tag holds, so what follows can only come from a broken issuer; refuse it anyway.
	switch {
	case len(b.ID) != 16 || len(b.Tower) != 8 || len(b.Seed) != SeedSize:
		return Session{}, fmt.Errorf("open session: %w: field lengths", ErrMalformed)
	case string(b.Tower) != string(p[sesOffTower:sesOffNonce]):
		return Session{}, fmt.Errorf("open session: %w: header and body name different towers", ErrMalformed)
	case b.ExpiresAt <= b.IssuedAt:
		return Session{}, fmt.Errorf("open session: %w: validity", ErrMalformed)
	}
	s := Session{TowerID: hex.EncodeToString(b.Tower), ClientID: b.Client, UserID: b.User, Claims: b.Claims,
		Permission: Permission(b.Permission), Seed: b.Seed,
		IssuedAt: time.Unix(b.IssuedAt, 0).UTC(), ExpiresAt: time.Unix(b.ExpiresAt, 0).UTC()}
	copy(s.ID[:], b.ID)
	return s, nil
}

// PeekSessionTower returns the (lower-case) tower id a sealed session names, unverified.
func PeekSessionTower(payloadHex string) (string, error) {
	p, err := decodeHex(payloadHex, maxSessionSize)
	if err != nil {
		return "", fmt.Errorf("peek session tower: %w", err)
	}
	if p[0] != SessionVersion || len(p) <= sesOffCipher {
		return "", fmt.Errorf("peek session tower: %w", ErrMalformed)
	}
	return hex.EncodeToString(p[sesOffTower:sesOffNonce]), nil
}

func sessionAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("session cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("session cipher: %w", err)
	}
	return aead, nil
}

// sessionAD is the additional data: the clear header (version and tower id) and the key
// version that payload_auth starts with.
func sessionAD(p []byte) []byte {
	return append(slices.Clone(p[:sesOffNonce]), authKeyVersion)
}

// strictCBOR refuses what a careful tower would: duplicate map keys, indefinite lengths and
// oversized containers.
var strictCBOR = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		MaxArrayElements: 64,
		MaxMapPairs:      64,
		MaxNestedLevels:  4,
	}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("towerproto: cbor decode mode: %v", err))
	}
	return m
}()
