// Package credential generates the secrets callers present (OAuth client secrets, API keys)
// and hashes them for storage. They are 256-bit random values, so a plain SHA-256 is a safe
// hash (no password stretching needed) and lookups by hash stay one index probe.
package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// GatewayKeyPrefix starts every gateway cloud API key: "lnk_" + 64 lower-case hex.
const GatewayKeyPrefix = "lnk_"

// NewSecret returns 32 random bytes as 64 lower-case hex characters.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("credential: read random: %v", err)) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// AppKeyPrefix starts every app engine key: "lna_" + 64 lower-case hex.
const AppKeyPrefix = "lna_"

// NewAppKey returns a fresh app engine key.
func NewAppKey() string { return AppKeyPrefix + NewSecret() }

// DisplayPrefix is the part of a key that lists show and operators search by: the type
// prefix and the first eight hex digits.
func DisplayPrefix(key string) string { return key[:min(12, len(key))] }

// NewGatewayKey returns a fresh gateway cloud API key.
func NewGatewayKey() string { return GatewayKeyPrefix + NewSecret() }

// Hash returns the SHA-256 of a presented secret, the form stored in Postgres.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// Equal compares a presented secret with a stored hash in constant time.
func Equal(secret string, storedHash []byte) bool {
	return subtle.ConstantTimeCompare(Hash(secret), storedHash) == 1
}

// IsGatewayKey reports whether s has the shape of a gateway cloud API key.
func IsGatewayKey(s string) bool {
	rest, ok := strings.CutPrefix(s, GatewayKeyPrefix)
	if !ok || len(rest) != 64 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
