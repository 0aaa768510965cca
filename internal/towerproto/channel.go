package towerproto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The BLE channel between a phone and a tower (DESIGN §4.8), the way Harbor's SDKs derive
// it: the phone sends a 16-byte request nonce with the sealed session; the tower answers a
// grant with a nonce of its own; both derive
//
//	authKey = HKDF-SHA256(salt = empty, ikm = seed ‖ requestNonce ‖ grantNonce, info = "authenticate"), 32 bytes
//	encKey  = HKDF-SHA256(salt = empty, ikm = seed ‖ requestNonce ‖ grantNonce, info = "encrypt"), 16 bytes
//
// where seed is the session_seed for the grant and the grant's sessionKey for every later
// packet. A packet is 00 ‖ IV(16) ‖ AES-128-CTR(encKey, IV, CBOR message) and its
// authenticator 00 ‖ HMAC-SHA256(authKey, packet).

// NonceSize is the length of the request and grant nonces.
const NonceSize = 16

// Message types. The grant's 202 is Harbor's; the others are ours: 1xx phone → tower,
// 2xx tower → phone.
const (
	MsgSyncStatus      = 101 // {} → MsgSyncStatusReply
	MsgSyncPull        = 102 // {bootEpoch, syncEventStart} → MsgSyncPullReply
	MsgSyncPush        = 103 // {payload, payloadAuth} → MsgSyncPushReply
	MsgConfigure       = 104 // {packet} → MsgSyncPushReply
	MsgOpenWithToken   = 105 // {payload, payloadAuth} → MsgOpened
	MsgMaintenanceOpen = 106 // {lockerId} → MsgOpened
	MsgResetEvents     = 107 // {} → MsgSyncStatusReply
	MsgTerminate       = 108 // {} → MsgTerminated

	MsgSyncStatusReply = 201
	MsgGrant           = 202
	MsgSyncPullReply   = 203
	MsgSyncPushReply   = 204
	MsgOpened          = 205
	MsgTerminated      = 206
	MsgError           = 255 // {code, message}
)

// ChannelKeys are the two keys of one direction-less channel.
type ChannelKeys struct {
	Auth []byte // 32 bytes, HMAC-SHA256
	Enc  []byte // 16 bytes, AES-128-CTR
}

// DeriveChannelKeys derives the channel keys from a seed and the two nonces.
func DeriveChannelKeys(seed, requestNonce, grantNonce []byte) (ChannelKeys, error) {
	if len(seed) == 0 || len(requestNonce) != NonceSize || len(grantNonce) != NonceSize {
		return ChannelKeys{}, fmt.Errorf("derive channel keys: %w: seed %d bytes, nonces %d and %d bytes",
			ErrMalformed, len(seed), len(requestNonce), len(grantNonce))
	}
	ikm := slices.Concat(seed, requestNonce, grantNonce)
	auth, err := hkdf.Key(sha256.New, ikm, nil, "authenticate", 32)
	if err != nil {
		return ChannelKeys{}, fmt.Errorf("derive channel keys: %w", err)
	}
	enc, err := hkdf.Key(sha256.New, ikm, nil, "encrypt", 16)
	if err != nil {
		return ChannelKeys{}, fmt.Errorf("derive channel keys: %w", err)
	}
	return ChannelKeys{Auth: auth, Enc: enc}, nil
}

// maxPacket bounds a channel packet (a command batch of a few hundred commands fits).
const maxPacket = 64 << 10

// SealPacket encrypts msg (CBOR-encoded here) under k and returns the packet and its
// authenticator. rnd supplies the IV.
func SealPacket(k ChannelKeys, msg any, rnd io.Reader) (packet, auth []byte, err error) {
	body, err := cbor.Marshal(msg)
	if err != nil {
		return nil, nil, fmt.Errorf("seal packet: encode: %w", err)
	}
	if len(body) > maxPacket {
		return nil, nil, fmt.Errorf("seal packet: %w: %d bytes", ErrMalformed, len(body))
	}
	packet = make([]byte, 1+aes.BlockSize+len(body))
	packet[0] = authKeyVersion
	iv := packet[1 : 1+aes.BlockSize]
	if _, err := io.ReadFull(rnd, iv); err != nil {
		return nil, nil, fmt.Errorf("seal packet: iv: %w", err)
	}
	block, err := aes.NewCipher(k.Enc)
	if err != nil {
		return nil, nil, fmt.Errorf("seal packet: %w", err)
	}
	cipher.NewCTR(block, iv).XORKeyStream(packet[1+aes.BlockSize:], body)
	return packet, sign(packet, k.Auth), nil
}

// OpenPacket checks the authenticator (constant time) before decrypting and decodes the
// CBOR message into out.
func OpenPacket(k ChannelKeys, packet, auth []byte, out any) error {
	if len(packet) < 1+aes.BlockSize+1 || len(packet) > 1+aes.BlockSize+maxPacket {
		return fmt.Errorf("open packet: %w: %d bytes", ErrMalformed, len(packet))
	}
	if err := verify(packet, auth, k.Auth); err != nil {
		return fmt.Errorf("open packet: %w", err)
	}
	if packet[0] != authKeyVersion {
		return fmt.Errorf("open packet: %w: version %#02x", ErrVersion, packet[0])
	}
	block, err := aes.NewCipher(k.Enc)
	if err != nil {
		return fmt.Errorf("open packet: %w", err)
	}
	body := make([]byte, len(packet)-1-aes.BlockSize)
	cipher.NewCTR(block, packet[1:1+aes.BlockSize]).XORKeyStream(body, packet[1+aes.BlockSize:])
	if err := strictCBOR.Unmarshal(body, out); err != nil {
		return fmt.Errorf("open packet: %w: %w", ErrMalformed, err)
	}
	return nil
}

// Grant is the tower's answer to a session request, field names as Harbor's SDK reads them.
type Grant struct {
	Type              int    `cbor:"type"`
	Timestamp         int64  `cbor:"timestamp"` // tower clock, unix seconds
	SessionGrantNonce []byte `cbor:"sessionGrantNonce"`
	SessionID         uint32 `cbor:"sessionId"`
	SessionKey        []byte `cbor:"sessionKey"` // SeedSize bytes; seeds the keys of every later packet
}

// GrantReply is what travels back to the phone: the grant nonce in clear (the phone needs it
// to derive the keys) and the sealed grant.
type GrantReply struct {
	GrantNonce []byte
	Packet     []byte
	Auth       []byte
}

// SealGrant builds the grant for a session seed and the phone's request nonce.
func SealGrant(seed, requestNonce []byte, sessionID uint32, now time.Time, rnd io.Reader) (GrantReply, ChannelKeys, error) {
	grantNonce := make([]byte, NonceSize)
	sessionKey := make([]byte, SeedSize)
	if _, err := io.ReadFull(rnd, grantNonce); err != nil {
		return GrantReply{}, ChannelKeys{}, fmt.Errorf("seal grant: nonce: %w", err)
	}
	if _, err := io.ReadFull(rnd, sessionKey); err != nil {
		return GrantReply{}, ChannelKeys{}, fmt.Errorf("seal grant: session key: %w", err)
	}
	k, err := DeriveChannelKeys(seed, requestNonce, grantNonce)
	if err != nil {
		return GrantReply{}, ChannelKeys{}, fmt.Errorf("seal grant: %w", err)
	}
	g := Grant{Type: MsgGrant, Timestamp: now.Unix(), SessionGrantNonce: grantNonce, SessionID: sessionID, SessionKey: sessionKey}
	packet, auth, err := SealPacket(k, g, rnd)
	if err != nil {
		return GrantReply{}, ChannelKeys{}, fmt.Errorf("seal grant: %w", err)
	}
	later, err := DeriveChannelKeys(sessionKey, requestNonce, grantNonce)
	if err != nil {
		return GrantReply{}, ChannelKeys{}, fmt.Errorf("seal grant: %w", err)
	}
	return GrantReply{GrantNonce: grantNonce, Packet: packet, Auth: auth}, later, nil
}

// OpenGrant is the phone's side: it verifies and decrypts the grant with the session seed and
// returns it with the keys of every later packet.
func OpenGrant(seed, requestNonce []byte, r GrantReply) (Grant, ChannelKeys, error) {
	k, err := DeriveChannelKeys(seed, requestNonce, r.GrantNonce)
	if err != nil {
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w", err)
	}
	var g Grant
	if err := OpenPacket(k, r.Packet, r.Auth, &g); err != nil {
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w", err)
	}
	switch {
	case g.Type != MsgGrant:
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w: message type %d", ErrMalformed, g.Type)
	case !hmac.Equal(g.SessionGrantNonce, r.GrantNonce):
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w: the grant names another nonce", ErrMalformed)
	case len(g.SessionKey) != SeedSize:
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w: session key of %d bytes", ErrMalformed, len(g.SessionKey))
	}
	later, err := DeriveChannelKeys(g.SessionKey, requestNonce, r.GrantNonce)
	if err != nil {
		return Grant{}, ChannelKeys{}, fmt.Errorf("open grant: %w", err)
	}
	return g, later, nil
}
