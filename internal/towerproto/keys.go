package towerproto

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// KeySize is the length of a derived token or event key.
const KeySize = 32

// HKDF labels (the info parameter). Changing any invalidates every tower in the field.
const (
	tokenKeyLabel   = "locker-token"
	eventKeyLabel   = "tower-event"
	sessionKeyLabel = "tower-session"
	commandKeyLabel = "tower-command"
)

// authKeyVersion is the first byte of every authenticator: HMAC-SHA256 with a key derived by
// HKDF-SHA256 from the tower secret. A future key or algorithm gets a new value.
const authKeyVersion = 0x00

// authLen is the authenticator length in bytes: version byte + HMAC-SHA256.
const authLen = 1 + sha256.Size

// TokenKey derives the key that signs locker tokens for a tower:
// HKDF-SHA256(ikm = towerSecret, salt = none, info = "locker-token"), 32 bytes.
func TokenKey(towerSecret []byte) []byte {
	return deriveKey(towerSecret, tokenKeyLabel)
}

// EventKey derives the key that signs a tower's event batches:
// HKDF-SHA256(ikm = towerSecret, salt = none, info = "tower-event"), 32 bytes.
func EventKey(towerSecret []byte) []byte {
	return deriveKey(towerSecret, eventKeyLabel)
}

// SessionKey derives the AES-256-GCM key that seals session payloads for a tower:
// HKDF-SHA256(ikm = towerSecret, salt = none, info = "tower-session"), 32 bytes.
func SessionKey(towerSecret []byte) []byte {
	return deriveKey(towerSecret, sessionKeyLabel)
}

// CommandKey derives the key that signs the cloud's command packets for a tower:
// HKDF-SHA256(ikm = towerSecret, salt = none, info = "tower-command"), 32 bytes.
func CommandKey(towerSecret []byte) []byte {
	return deriveKey(towerSecret, commandKeyLabel)
}

func deriveKey(secret []byte, label string) []byte {
	key, err := hkdf.Key(sha256.New, secret, nil, label, KeySize)
	if err != nil {
		// hkdf.Key fails only for a length beyond 255*32 bytes (or a FIPS-mode key policy);
		// KeySize is a constant far below that.
		panic(fmt.Sprintf("towerproto: derive %s key: %v", label, err))
	}
	return key
}

// keyAndTower checks an encoder's key and returns the bytes of the tower id it
// encodes.
func keyAndTower(key []byte, towerID string) ([8]byte, error) {
	if err := checkKey(key); err != nil {
		return [8]byte{}, err
	}
	return towerIDBytes(towerID)
}

func checkKey(key []byte) error {
	if len(key) != KeySize {
		return fmt.Errorf("%w: want %d bytes, got %d", ErrKey, KeySize, len(key))
	}
	return nil
}

// sign returns the authenticator for payload: key-version byte + HMAC-SHA256(key, payload).
func sign(payload, key []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return mac.Sum([]byte{authKeyVersion})
}

// verify checks auth against payload in constant time.
func verify(payload, auth, key []byte) error {
	if len(auth) != authLen {
		return fmt.Errorf("%w: authenticator is %d bytes, want %d", ErrMalformed, len(auth), authLen)
	}
	if auth[0] != authKeyVersion {
		return fmt.Errorf("%w: %w: key version %#02x", ErrBadMAC, ErrVersion, auth[0])
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	if !hmac.Equal(mac.Sum(nil), auth[1:]) {
		return ErrBadMAC
	}
	return nil
}
