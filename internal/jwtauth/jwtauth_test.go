package jwtauth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

func newAuthority(t *testing.T, clock *time.Time) *Authority {
	t.Helper()
	ring, err := keyring.New(make([]byte, keyring.KeySize))
	require.NoError(t, err)
	a := New(&memKeys{}, ring, "https://issuer.test")
	a.now = func() time.Time { return *clock }
	require.NoError(t, a.EnsureKey(context.Background()))
	return a
}

func TestVerifiedTokensStillExpire(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	tok, _, err := a.Issue(ctx, "client", "client", 7, []string{ScopeServiceProvider}, time.Minute)
	require.NoError(t, err)

	for range 2 { // the second answer comes from the remembered verification
		p, err := a.Verify(ctx, tok)
		require.NoError(t, err)
		assert.Equal(t, int64(7), p.OrgID)
		assert.Equal(t, []string{ScopeServiceProvider}, p.Scopes)
	}
	clock = clock.Add(time.Minute + 6*time.Second) // past the expiry and its 5 s leeway
	_, err = a.Verify(ctx, tok)
	assert.ErrorIs(t, err, ErrExpiredToken, "a remembered token expires all the same")
}

func TestForgedTokensAreNeverRemembered(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := newAuthority(t, &clock)
	ctx := context.Background()
	tok, _, err := a.Issue(ctx, "client", "client", 7, []string{ScopeServiceProvider}, time.Minute)
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	sig := []byte(parts[2])
	sig[5] ^= 1
	forged := parts[0] + "." + parts[1] + "." + string(sig)
	for range 2 {
		_, err := a.Verify(ctx, forged)
		assert.True(t, errors.Is(err, ErrInvalidToken), "got %v", err)
	}
	_, err = a.Verify(ctx, tok)
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
