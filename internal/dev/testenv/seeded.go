package testenv

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// Seeded is a fresh database holding the demo data (internal/seed) and the keyring that
// sealed its secrets.
type Seeded struct {
	URL   string // the database's URL
	Store *store.Store
	Key   []byte // the master key
	Ring  *keyring.Keyring
	Demo  seed.Result
}

// NewSeeded makes a fresh database, opens it with opts (the store is closed when the test
// ends), draws a random master key and writes the demo data with it.
func NewSeeded(ctx context.Context, t testing.TB, opts store.Options) Seeded {
	t.Helper()
	s := Seeded{URL: NewDatabase(t)}
	var err error
	s.Store, err = store.Open(ctx, s.URL, opts)
	require.NoError(t, err)
	t.Cleanup(s.Store.Close)
	s.Key = make([]byte, keyring.KeySize)
	_, _ = rand.Read(s.Key)
	s.Ring, err = keyring.New(s.Key)
	require.NoError(t, err)
	s.Demo, err = seed.Demo(ctx, s.Store, s.Ring, nil)
	require.NoError(t, err)
	return s
}
