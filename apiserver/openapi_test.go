package apiserver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
)

// The committed docs/openapi.yaml must be what the code serves. Regenerate it with
// `make openapi` (LOCKERNET_UPDATE_OPENAPI=1 go test ./apiserver -run TestOpenAPISpecIsCurrent).
func TestOpenAPISpecIsCurrent(t *testing.T) {
	spec, err := apiserver.New(apiserver.Deps{}).API().OpenAPI().YAML()
	require.NoError(t, err)
	path := filepath.Join("..", "docs", "openapi.yaml")
	if os.Getenv("LOCKERNET_UPDATE_OPENAPI") == "1" {
		require.NoError(t, os.WriteFile(path, spec, 0o644))
		return
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "docs/openapi.yaml is missing: run make openapi")
	require.Equal(t, string(committed), string(spec), "docs/openapi.yaml is stale: run make openapi")
}
