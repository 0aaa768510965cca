package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
)

// adminJSON runs lockernet-admin and decodes its JSON answer into v.
func adminJSON(t *testing.T, v any, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, &out); err != nil {
		return err
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), v), "output: %s", out.String())
	return nil
}

func me(t *testing.T, e *testenv.Env, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.URL+"/api/customer/v1/me", nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The gateway cloud API's operator commands, end to end against a running apiserver.
// (t.Setenv rules out t.Parallel.)
func TestGatewayCommands(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.SetAdminEnv(t)
	master := make([]byte, keyring.KeySize)
	_, _ = rand.Read(master)
	t.Setenv("LOCKERNET_MASTER_KEY", hex.EncodeToString(master))

	var created struct {
		ID             string `json:"id"`
		Key            string `json:"key"`
		Prefix         string `json:"prefix"`
		OrganizationID int64  `json:"organization_id"`
		RateLimit      *int   `json:"rate_limit"`
	}
	require.NoError(t, adminJSON(t, &created, "create-gateway-key", "-org", "Demo Logistics", "-rate-limit", "30", "-label", "backend"))
	assert.True(t, strings.HasPrefix(created.Key, "lnk_") && len(created.Key) == 68, "key %q", created.Key)
	assert.Equal(t, created.Key[:12], created.Prefix)
	assert.Equal(t, e.Creds.OrganizationID, created.OrganizationID)
	require.NotNil(t, created.RateLimit)
	assert.Equal(t, 30, *created.RateLimit)
	assert.Equal(t, http.StatusOK, me(t, e, created.Key))

	var byID struct {
		OrganizationID int64 `json:"organization_id"`
	}
	require.NoError(t, adminJSON(t, &byID, "create-gateway-key", "--org", "1"))
	assert.Equal(t, int64(1), byID.OrganizationID, "an id works too, with either dash style")

	assert.ErrorContains(t, adminJSON(t, &created, "create-gateway-key", "-org", "No Such Org"), "not found", "keys are never made for a typo")
	assert.Error(t, adminJSON(t, &created, "create-gateway-key"))

	var list []map[string]any
	require.NoError(t, adminJSON(t, &list, "list-gateway-keys", "-org", "Demo Logistics"))
	require.Len(t, list, 3, "the seeded key and the two above")
	for _, k := range list {
		assert.NotContains(t, k, "key", "never the key itself")
	}

	var revoked struct {
		ID        string  `json:"id"`
		RevokedAt *string `json:"revoked_at"`
	}
	require.NoError(t, adminJSON(t, &revoked, "revoke-gateway-key", "-prefix", created.Prefix))
	assert.Equal(t, created.ID, revoked.ID)
	assert.NotNil(t, revoked.RevokedAt)
	assert.Equal(t, http.StatusUnauthorized, me(t, e, created.Key), "refused from the next request on")
	assert.Equal(t, http.StatusOK, me(t, e, e.GatewayKey()), "other keys keep working")
	require.NoError(t, adminJSON(t, &revoked, "revoke-gateway-key", "-id", created.ID), "revoking twice is harmless")
	assert.Error(t, adminJSON(t, &revoked, "revoke-gateway-key", "-prefix", "lnk_ffffffff"))
	assert.Error(t, adminJSON(t, &revoked, "revoke-gateway-key", "-id", created.ID, "-prefix", created.Prefix))

	t.Run("register-gateway", func(t *testing.T) {
		gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank, GatewayID: "GW-0002"})
		secretFile := filepath.Join(t.TempDir(), "gw.secret")
		require.NoError(t, os.WriteFile(secretFile, []byte(gw.Secret+"\n"), 0o600))
		loc := e.Seed.GatewayLocationID["GW-0002"]
		var reg struct {
			ID             int64  `json:"id"`
			Serial         string `json:"serial"`
			LocationID     int64  `json:"location_id"`
			OrganizationID int64  `json:"organization_id"`
			URL            string `json:"url"`
		}
		require.NoError(t, adminJSON(t, &reg, "register-gateway", "-serial", "GW-0002", "-location-id", itoa(loc), "-url", gw.URL+"/",
			"-secret-file", secretFile, "-check"))
		assert.Equal(t, "GW-0002", reg.Serial)
		assert.Equal(t, loc, reg.LocationID)
		assert.Equal(t, e.Creds.OrganizationID, reg.OrganizationID)
		assert.Equal(t, gw.URL, reg.URL)

		// The secret is stored sealed under the master key, for that gateway only.
		g, err := e.Store.GatewayBySerial(context.Background(), "GW-0002")
		require.NoError(t, err)
		assert.NotContains(t, string(g.SecretSealed), gw.Secret)
		ring, err := keyring.New(master)
		require.NoError(t, err)
		plain, err := ring.Open(keyring.GatewaySecretPurpose("GW-0002"), g.SecretSealed)
		require.NoError(t, err)
		assert.Equal(t, gw.Secret, string(plain))

		wrong := filepath.Join(t.TempDir(), "wrong.secret")
		require.NoError(t, os.WriteFile(wrong, []byte("not-the-secret"), 0o600))
		assert.ErrorContains(t, adminJSON(t, &reg, "register-gateway", "-serial", "GW-0002", "-location-id", itoa(loc), "-url", gw.URL,
			"-secret-file", wrong, "-check"), "401")
		assert.Error(t, adminJSON(t, &reg, "register-gateway", "-serial", "GW-0009", "-location-id", "999999", "-url", gw.URL, "-secret-file", secretFile))
		assert.Error(t, adminJSON(t, &reg, "register-gateway", "-serial", "GW-0009", "-location-id", itoa(loc), "-url", gw.URL, "-secret-file", secretFile),
			"one gateway per location")
		assert.Error(t, adminJSON(t, &reg, "register-gateway", "-serial", "GW-0002", "-location-id", itoa(loc), "-url", "ftp://x", "-secret-file", secretFile))
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
