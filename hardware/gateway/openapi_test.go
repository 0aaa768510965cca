package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// The committed docs/openapi-gateway.yaml must be what the gateway serves. Regenerate it with
// `make openapi` (LOCKERNET_UPDATE_OPENAPI=1 go test ./hardware/gateway -run TestOpenAPISpecIsCurrent).
func TestOpenAPISpecIsCurrent(t *testing.T) {
	spec, err := gateway.OpenAPI().YAML()
	require.NoError(t, err)
	path := filepath.Join("..", "..", "docs", "openapi-gateway.yaml")
	if os.Getenv("LOCKERNET_UPDATE_OPENAPI") == "1" {
		require.NoError(t, os.WriteFile(path, spec, 0o644))
		return
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "docs/openapi-gateway.yaml is missing: run make openapi")
	require.Equal(t, string(committed), string(spec), "docs/openapi-gateway.yaml is stale: run make openapi")
}

// GET /openapi.json serves the local API's document behind the bearer secret, with the
// interface document's 17 schema names and every operation of the local API.
func TestOpenAPIServed(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	requireError(t, callWithSecret(t, gw, "", http.MethodGet, "/openapi.json", nil), http.StatusUnauthorized, gateway.CodeAuthFailed)

	r := call(t, gw, http.MethodGet, "/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	for _, name := range []string{"Locker", "LockerTypeSummary", "TransactionResponse", "LockerType", "LockController", "LockerConfig",
		"System", "LogEntry", "OperationResponse", "LockerOperationResponse", "MultiStatusOperationResponse", "BankType",
		"OpenAllLockersResponse", "BankTypeAssociation", "Error", "BankTypeWithAssociations", "DeviceHeartbeatRequest"} {
		assert.Contains(t, doc.Components.Schemas, name, "the interface document's schema %s", name)
	}
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	assert.Equal(t, []string{
		"delete /transactions/{transactionId}", "get /", "get /alerts", "get /bank-types", "get /bank-types/{id}", "get /health",
		"get /locker-types", "get /locker-types/{id}", "get /lockers", "get /lockers/config", "get /lockers/{lockerId}",
		"get /openapi.json", "get /system", "get /system/logs", "get /transactions", "get /transactions/{transactionId}",
		"patch /lockers/{lockerId}", "post /lockers/open-all", "post /lockers/{lockerId}/open", "post /system/heartbeat",
		"post /transactions", "post /transactions/{transactionId}/open",
	}, ops, "the seed's 19 local operations, this document and the watch's alerts")
	assert.Empty(t, gw.Contract.Violations())
}
