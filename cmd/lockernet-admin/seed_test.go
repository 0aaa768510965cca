package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
)

// seed-demo is what a deployment without the dev stack (docker/compose.yaml) runs to get
// the demo data: the credentials name the demo gateways' locations, so they can be
// registered, and -towersim-config provisions the tower simulator with the towers' secrets.
// (t.Setenv rules out t.Parallel.)
func TestSeedDemoForADeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := t.TempDir()
	t.Setenv("DATABASE_URL", testenv.NewDatabase(t))
	t.Setenv("LOCKERNET_MASTER_KEY", hex.EncodeToString(key))
	t.Setenv("LOCKERNET_DATA_DIR", dir)
	t.Setenv("LOCKERNET_TOWER_ID_PREFIX", "5a")
	admin := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), args, &out), "lockernet-admin %v", args)
		return out.String()
	}

	simFile := filepath.Join(dir, "sim", "towersim.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(simFile), 0o700))
	admin("seed-demo", "-api-url", "http://proxy:8080", "-towersim-config", simFile)
	creds, err := seed.ReadCredentials(filepath.Join(dir, seed.CredentialsFile))
	require.NoError(t, err)
	require.NotNil(t, creds)
	assert.Equal(t, "http://proxy:8080", creds.APIURL)
	require.Len(t, creds.Gateways, 2)
	assert.Equal(t, "GW-0001", creds.Gateways[0].Serial, "gateways[0] is GW-0001 (DESIGN §9)")
	assert.Equal(t, "GW-0002", creds.Gateways[1].Serial)

	sim, err := towersim.LoadConfig(simFile)
	require.NoError(t, err)
	assert.Equal(t, "http://proxy:8080", sim.APIBaseURL)
	assert.Equal(t, creds.ServiceProvider.ClientID, sim.ClientID)
	require.Len(t, sim.Towers, len(creds.Towers))
	for i, tw := range sim.Towers {
		assert.Equal(t, creds.Towers[i].ID, tw.ID)
		assert.Regexp(t, `^5a[0-9a-f]{14}$`, tw.ID, "the environment's tower id prefix")
		assert.Len(t, tw.LockerIDs, 12)
	}

	// The location ids in the credentials are the ones register-gateway needs.
	secret := filepath.Join(dir, "gw1.secret")
	require.NoError(t, os.WriteFile(secret, []byte("a-gateway-secret-of-enough-length-000000\n"), 0o600))
	admin("register-gateway", "-serial", "GW-0001", "-location-id", strconv.FormatInt(creds.Gateways[0].LocationID, 10),
		"-url", "http://gateway-1:8101", "-secret-file", secret)

	// Seeding again changes nothing: same client secret, same towers, same gateways.
	admin("seed-demo")
	again, err := seed.ReadCredentials(filepath.Join(dir, seed.CredentialsFile))
	require.NoError(t, err)
	assert.Equal(t, creds.ServiceProvider, again.ServiceProvider)
	assert.Equal(t, creds.Towers, again.Towers)
	assert.Equal(t, creds.Gateways, again.Gateways)
	assert.Equal(t, "http://proxy:8080", again.APIURL, "kept from the credentials file")
}
