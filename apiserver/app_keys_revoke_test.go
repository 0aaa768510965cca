package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// TestAppKeyRevokedAtOnce: a deleted app engine key is refused by its very next request on
// every apiserver instance, as a revoked gateway key is, even on an instance that used it a
// moment before (DESIGN §2; the attack run saw one keep working for about 2 s, 81 requests).
func TestAppKeyRevokedAtOnce(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	other := e.StartAPIServer(t, apiserver.CloudSettings{})
	sp := e.Creds.ServiceProvider
	r := doKey(t, e, http.MethodPost, "/auth/api-key", e.Creds.AppEngineAPIKey, map[string]any{
		"client_id": sp.ClientID, "client_secret": sp.ClientSecret, "organization_id": e.Creds.OrganizationID})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var created struct {
		APIKey string `json:"api_key"`
		ID     string `json:"id"`
	}
	r.JSON(t, &created)

	list := func(base string) int {
		return testenv.DoWithHeaders(t, http.MethodGet, base+"/auth/api-key", map[string]string{"x-api-key": created.APIKey}, nil).Status
	}
	for range 5 { // both instances have just seen the key work
		require.Equal(t, http.StatusOK, list(e.URL))
		require.Equal(t, http.StatusOK, list(other))
	}
	r = doKey(t, e, http.MethodDelete, "/auth/api-key/"+created.ID, e.Creds.AppEngineAPIKey, nil)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	deleted := time.Now()
	assert.Equal(t, http.StatusUnauthorized, list(other), "the other instance refuses the key's next request")
	assert.Equal(t, http.StatusUnauthorized, list(e.URL), "the deleting instance refuses the key's next request")
	// Every later request is refused too: 401, or 429 once this address has presented five
	// invalid keys (credential_failures.go).
	refused := []int{http.StatusUnauthorized, http.StatusTooManyRequests}
	for time.Since(deleted) < 1500*time.Millisecond {
		require.Contains(t, refused, list(other))
		require.Contains(t, refused, list(e.URL))
		time.Sleep(50 * time.Millisecond)
	}
}
