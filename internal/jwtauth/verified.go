package jwtauth

import (
	"sync"
	"time"
)

// verifiedTokens remembers tokens whose signature checked out, until they expire: a client
// uses one token for many requests, and an Ed25519 verification is the costliest step of a
// cheap request. Only a token that verified is remembered, so a forged one is checked every
// time.
type verifiedTokens struct {
	mu sync.RWMutex
	m  map[string]verifiedToken
}

// verifiedToken is a remembered principal and the key that signed its token.
type verifiedToken struct {
	p   Principal
	kid string
}

const maxVerifiedTokens = 50000

func (v *verifiedTokens) get(token string, now time.Time) (verifiedToken, bool) {
	v.mu.RLock()
	t, ok := v.m[token]
	v.mu.RUnlock()
	if ok && now.After(t.p.ExpiresAt) {
		// Expired since: verify again, which reports the expiry (with its leeway).
		v.drop(token)
		return verifiedToken{}, false
	}
	return t, ok
}

func (v *verifiedTokens) drop(token string) {
	v.mu.Lock()
	delete(v.m, token)
	v.mu.Unlock()
}

func (v *verifiedTokens) put(token string, t verifiedToken) {
	v.mu.Lock()
	if v.m == nil || len(v.m) >= maxVerifiedTokens {
		v.m = map[string]verifiedToken{} // bounded: start again rather than grow
	}
	v.m[token] = t
	v.mu.Unlock()
}
