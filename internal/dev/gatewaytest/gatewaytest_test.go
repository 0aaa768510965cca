package gatewaytest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

func TestStart(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank, Secret: "fixed"})
	assert.Equal(t, "GW-0002", gw.ID)
	assert.Equal(t, "fixed", gw.Secret)
	assert.FileExists(t, gw.DBPath)

	resp, body, err := gw.Do(t.Context(), http.MethodPost, "/transactions", map[string]any{"transactionId": "t-1"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)

	resp, err = http.Get(gw.SimURL + "/sim/stats")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeHTTP500})
	resp, _, err = gw.Do(t.Context(), http.MethodGet, "/transactions/t-1", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})

	url := gw.URL
	gw.Restart(t)
	assert.Equal(t, url, gw.URL, "same address after a restart")
	resp, body, err = gw.Do(t.Context(), http.MethodGet, "/transactions/t-1", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

func TestLaunchWithoutDatabasePath(t *testing.T) {
	t.Parallel()
	gw, err := gatewaytest.Launch(t.Context(), gatewaytest.Options{})
	require.NoError(t, err)
	dir := filepath.Dir(gw.DBPath)
	assert.DirExists(t, dir)
	resp, _, err := gw.Do(t.Context(), http.MethodGet, "/health", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	gw.Close()
	gw.Close() // idempotent
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the temporary database is removed")
	_, _, err = gw.Do(t.Context(), http.MethodGet, "/health", nil)
	assert.Error(t, err, "nothing listens after Close")
}

func TestLaunchOnBusyAddress(t *testing.T) {
	t.Parallel()
	first := gatewaytest.Start(t, gatewaytest.Options{})
	_, err := gatewaytest.Launch(t.Context(), gatewaytest.Options{Addr: first.URL[len("http://"):]})
	assert.ErrorContains(t, err, "address already in use")
}

func TestDatabasePathWithURICharacters(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "odd dir #1 ?x %20")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "gw.db")
	gw := gatewaytest.Start(t, gatewaytest.Options{DBPath: path})
	resp, _, err := gw.Do(t.Context(), http.MethodPost, "/transactions", nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.FileExists(t, path, "the database is where it was asked to be")
}
