package store_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// openStore opens a fresh, migrated, empty database.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), testenv.NewDatabase(t), store.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// seeded opens a fresh database with the demo data (for a test or a benchmark).
func seeded(t testing.TB) (*store.Store, seed.Result) {
	t.Helper()
	st := openStore(t)
	key := make([]byte, keyring.KeySize)
	_, _ = rand.Read(key)
	ring, err := keyring.New(key)
	require.NoError(t, err)
	res, err := seed.Demo(context.Background(), st, ring, nil)
	require.NoError(t, err)
	return st, res
}

// seededTower is seeded's database and demo data with the demo organization's id and its
// tower i.
func seededTower(t *testing.T, i int) (*store.Store, seed.Result, int64, seed.Tower) {
	t.Helper()
	st, demo := seeded(t)
	return st, demo, demo.Credentials.OrganizationID, demo.Towers[i]
}

// ensureOrg creates the organization (or finds the one of that name).
func ensureOrg(t *testing.T, st *store.Store, name string) store.Organization {
	t.Helper()
	o, err := st.EnsureOrganization(context.Background(), name)
	require.NoError(t, err)
	return o
}

// addTowerLocation creates a location with one tower (the tower API only sees those).
func addTowerLocation(t *testing.T, st *store.Store, orgID int64, name, towerID string, lat, lon float64) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := st.UpsertLocation(ctx, store.NewLocation{OrganizationID: orgID, Name: name, Lat: lat, Lon: lon,
		Address1: "1 Main St", City: "Somewhere", State: "-", Zip: "0", Country: "FJ"})
	require.NoError(t, err)
	_, err = st.EnsureTower(ctx, store.Tower{ID: towerID, OrganizationID: orgID, LocationID: id, Name: name + " tower", SecretSealed: []byte("sealed")})
	require.NoError(t, err)
	return id
}
