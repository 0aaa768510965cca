package jwtauth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// memKeys keeps signing keys in memory for the unit tests.
type memKeys struct {
	mu   sync.Mutex
	keys []store.SigningKey
}

func (m *memKeys) SigningKeys(context.Context, time.Duration) ([]store.SigningKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.keys)
	slices.Reverse(out) // newest first
	return out, nil
}

func (m *memKeys) InsertSigningKey(_ context.Context, k store.SigningKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = append(m.keys, k)
	return nil
}

func (m *memKeys) RetireSigningKeysExcept(_ context.Context, kid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for i := range m.keys {
		if m.keys[i].KID != kid && m.keys[i].RetiredAt == nil {
			m.keys[i].RetiredAt = &now
		}
	}
	return nil
}

func (m *memKeys) RevokeSigningKeysExcept(_ context.Context, kid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// SigningKeys never returns a revoked key: drop it.
	m.keys = slices.DeleteFunc(m.keys, func(k store.SigningKey) bool { return k.KID != kid })
	return nil
}

func newAuthority(t *testing.T, clock *time.Time) *Authority {
	t.Helper()
	return newAuthorityOn(t, clock, &memKeys{})
}

// newAuthorityOn is another instance over the same keys (another apiserver).
func newAuthorityOn(t *testing.T, clock *time.Time, keys *memKeys) *Authority {
	t.Helper()
	ring, err := keyring.New(make([]byte, keyring.KeySize))
	require.NoError(t, err)
	a := New(keys, ring, "https://issuer.test")
	a.now = func() time.Time { return *clock }
	require.NoError(t, a.EnsureKey(context.Background()))
	return a
}

// issueServiceProvider issues a token of a minute to the service provider "client" of
// organization 7.
func issueServiceProvider(t *testing.T, a *Authority) string {
	t.Helper()
	tok, _, err := a.Issue(context.Background(), "client", "client", 7, []string{ScopeServiceProvider}, time.Minute)
	require.NoError(t, err)
	return tok
}

func TestVerifiedTokensStillExpire(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	tok := issueServiceProvider(t, a)

	for range 2 { // the second answer comes from the remembered verification
		p, err := a.Verify(ctx, tok)
		require.NoError(t, err)
		assert.Equal(t, int64(7), p.OrgID)
		assert.Equal(t, []string{ScopeServiceProvider}, p.Scopes)
	}
	clock = clock.Add(time.Minute + 6*time.Second) // past the expiry and its 5 s leeway
	_, err := a.Verify(ctx, tok)
	assert.ErrorIs(t, err, ErrExpiredToken, "a remembered token expires all the same")
}

func TestForgedTokensAreNeverRemembered(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	tok := issueServiceProvider(t, a)
	parts := strings.Split(tok, ".")
	sig := []byte(parts[2])
	sig[5] ^= 1
	forged := parts[0] + "." + parts[1] + "." + string(sig)
	for range 2 {
		_, err := a.Verify(ctx, forged)
		assert.True(t, errors.Is(err, ErrInvalidToken), "got %v", err)
	}
	_, err := a.Verify(ctx, tok)
	assert.NoError(t, err, "the genuine token still verifies")
}

func TestRotatedKeysKeepVerifying(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	old, _, err := a.Issue(ctx, "client", "client", 7, nil, time.Hour)
	require.NoError(t, err)
	kid, err := a.Rotate(ctx)
	require.NoError(t, err)
	fresh, _, err := a.Issue(ctx, "client", "client", 7, nil, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, kid, UnverifiedKID(fresh))
	assert.NotEqual(t, kid, UnverifiedKID(old))
	for _, tok := range []string{old, fresh} {
		_, err := a.Verify(ctx, tok)
		assert.NoError(t, err)
	}
}

// A leaked key: rotating with revocation makes every token it signed fail at once on this
// instance — remembered verifications included — and within refreshEvery on another one.
func TestRevokedKeysStopVerifying(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	keys := &memKeys{}
	a := newAuthorityOn(t, &clock, keys)
	b := newAuthorityOn(t, &clock, keys)
	ctx := context.Background()
	old, _, err := a.Issue(ctx, "client", "client", 7, nil, time.Hour)
	require.NoError(t, err)
	for _, x := range []*Authority{a, b} {
		_, err := x.Verify(ctx, old) // remembered by both
		require.NoError(t, err)
	}
	kid, err := a.RotateRevoking(ctx)
	require.NoError(t, err)
	_, err = a.Verify(ctx, old)
	assert.ErrorIs(t, err, ErrInvalidToken, "refused at once where it was revoked")
	_, err = b.Verify(ctx, old)
	assert.NoError(t, err, "the other instance has not reloaded yet")
	clock = clock.Add(refreshEvery + time.Millisecond)
	_, err = b.Verify(ctx, old)
	assert.ErrorIs(t, err, ErrInvalidToken, "refused everywhere after one refresh interval")
	jwks, err := b.JWKS(ctx)
	require.NoError(t, err)
	assert.NotContains(t, string(jwks), UnverifiedKID(old), "gone from the JWKS")
	assert.Contains(t, string(jwks), kid)
	fresh, _, err := b.Issue(ctx, "client", "client", 7, nil, time.Hour)
	require.NoError(t, err)
	_, err = a.Verify(ctx, fresh)
	assert.NoError(t, err)
}

// No token lives longer than MaxTokenLifetime: Issue refuses, and Verify rejects one signed
// with a longer lifetime (as a stolen key could).
func TestTokenLifetimeIsCapped(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	_, _, err := a.Issue(ctx, "client", "client", 7, nil, MaxTokenLifetime+time.Second)
	require.Error(t, err)

	a.mu.RLock()
	k := *a.active
	a.mu.RUnlock()
	now := clock.Truncate(time.Second)
	long := jwt.NewWithClaims(jwt.SigningMethodEdDSA, Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://issuer.test", Subject: "client",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(30 * 24 * time.Hour))},
		Org: 7, AuthorizedParty: "client"})
	long.Header["kid"] = k.kid
	tok, err := long.SignedString(k.private)
	require.NoError(t, err)
	_, err = a.Verify(ctx, tok)
	assert.ErrorIs(t, err, ErrInvalidToken)
}
