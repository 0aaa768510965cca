package testenv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// NewAppKey makes an organization-wide app engine key for orgID directly in the database
// (the way lockernet-admin does) and returns it.
func NewAppKey(t testing.TB, e *Env, orgID int64) string {
	t.Helper()
	key, _, err := e.Store.CreateAppKey(context.Background(), store.AppKey{OrganizationID: orgID})
	require.NoError(t, err)
	return key
}
