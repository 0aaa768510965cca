package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
)

// The version probe tells a client which deployment it reached, so a sandbox key sent to
// production (or the reverse) is easy to diagnose.
func TestVersionProbeNamesTheEnvironment(t *testing.T) {
	for _, tt := range []struct{ setting, want string }{{"", "development"}, {"sandbox", "sandbox"}, {"production", "production"}} {
		srv := httptest.NewServer(apiserver.New(apiserver.Deps{Cloud: apiserver.CloudSettings{Environment: tt.setting}}).Handler())
		resp, err := http.Get(srv.URL + "/api/customer/v1/")
		require.NoError(t, err)
		var meta struct {
			Version     string `json:"version"`
			Environment string `json:"environment"`
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&meta))
		resp.Body.Close()
		srv.Close()
		assert.Equal(t, "v1", meta.Version)
		assert.Equal(t, tt.want, meta.Environment, "LOCKERNET_ENVIRONMENT=%q", tt.setting)
	}
}
