package testenv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// OtherOrg is a second organization with its own client, tower location, tower and locker,
// for tenant-isolation tests.
type OtherOrg struct {
	OrgID        int64
	ClientID     string
	ClientSecret string
	LocationID   int64
	TowerID      string
	LockerID     int64
}

// NewOtherOrg creates a second organization next to the demo one, in the same area.
func (e *Env) NewOtherOrg(t testing.TB) OtherOrg {
	t.Helper()
	ctx := context.Background()
	org, err := e.Store.EnsureOrganization(ctx, "Rival Parcels")
	require.NoError(t, err)
	o := OtherOrg{OrgID: org.ID, ClientID: "rival-sp", ClientSecret: credential.NewSecret(), TowerID: "0200000000000001"}
	require.NoError(t, e.Store.CreateClient(ctx, store.Client{ClientID: o.ClientID, OrganizationID: org.ID, Name: "Rival app",
		SecretHash: credential.Hash(o.ClientSecret), Scopes: []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}}))
	o.LocationID, err = e.Store.UpsertLocation(ctx, store.NewLocation{OrganizationID: org.ID, Name: "Rival Union Station",
		Lat: 34.0561, Lon: -118.2366, Address1: "801 N Alameda St", City: "Los Angeles", State: "CA", Zip: "90012", Country: "US"})
	require.NoError(t, err)
	_, err = e.Store.EnsureTower(ctx, store.Tower{ID: o.TowerID, OrganizationID: org.ID, LocationID: o.LocationID,
		Name: "Rival tower", SecretSealed: e.Keyring.Seal("tower:"+o.TowerID, []byte("0123456789abcdef0123456789abcdef"))})
	require.NoError(t, err)
	typeID, err := e.Store.UpsertLockerType(ctx, org.ID, store.LockerType{Name: "small", SortOrder: 1})
	require.NoError(t, err)
	o.LockerID, err = e.Store.EnsureLocker(ctx, store.NewLocker{TowerID: o.TowerID, Name: "1", TypeID: typeID})
	require.NoError(t, err)
	return o
}
