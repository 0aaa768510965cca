package testenv

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// NewAppKey makes an organization-wide app engine key for orgID directly in the database
// (the way lockernet-admin does) and returns it.
func NewAppKey(t testing.TB, e *Env, orgID int64) string {
	t.Helper()
	key := seed.AppKeyPrefix + credential.NewSecret()
	_, err := e.Store.CreateAppKey(context.Background(), store.AppKey{ID: uuid.New(), OrganizationID: orgID, Prefix: key[:12]}, credential.Hash(key))
	require.NoError(t, err)
	return key
}
