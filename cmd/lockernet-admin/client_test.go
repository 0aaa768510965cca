package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// The client commands an operator uses: a per-client rate-limit override, and cutting a
// client off. (t.Setenv rules out t.Parallel.)
func TestClientCommands(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.SetAdminEnv(t)
	id := e.Creds.ServiceProvider.ClientID

	var rl struct {
		ClientID       string `json:"clientId"`
		TowerRateLimit *int   `json:"towerRateLimit"`
		TokenRateLimit *int   `json:"tokenRateLimit"`
	}
	require.NoError(t, adminJSON(t, &rl, "client", "rate-limit", "-client", id, "-tower", "3000", "-token", "120"))
	require.NotNil(t, rl.TowerRateLimit)
	assert.Equal(t, 3000, *rl.TowerRateLimit)
	var tower, token *int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT rate_limit, token_rate_limit FROM api_clients WHERE client_id = $1`, id).Scan(&tower, &token))
	require.NotNil(t, tower)
	require.NotNil(t, token)
	assert.Equal(t, 3000, *tower)
	assert.Equal(t, 120, *token)
	require.NoError(t, adminJSON(t, &rl, "client", "rate-limit", "-client", id, "-default"))
	assert.Nil(t, rl.TowerRateLimit)
	assert.Error(t, adminJSON(t, &rl, "client", "rate-limit", "-client", id), "a limit or -default is required")
	assert.Error(t, adminJSON(t, &rl, "client", "rate-limit", "-client", "no-such-client", "-tower", "5"))

	tok := e.Token("service_provider")
	closest := "/api/v1/locations/closest?lat=34.0562&lon=-118.2365"
	require.Equal(t, http.StatusOK, e.Do(http.MethodGet, closest, tok, nil).Status)
	var st struct {
		Disabled bool `json:"disabled"`
	}
	require.NoError(t, adminJSON(t, &st, "client", "disable", "-client", id))
	assert.True(t, st.Disabled)
	require.Eventually(t, func() bool { return e.Do(http.MethodGet, closest, tok, nil).Status == http.StatusUnauthorized },
		10*time.Second, 100*time.Millisecond, "the disabled client's token stops working")
	require.NoError(t, adminJSON(t, &st, "client", "enable", "-client", id))
	require.Eventually(t, func() bool { return e.Do(http.MethodGet, closest, tok, nil).Status == http.StatusOK },
		10*time.Second, 100*time.Millisecond)
}
