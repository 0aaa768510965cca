package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnvironmentSettings(t *testing.T) {
	tests := []struct {
		name, environment, prefix string
		wantEnvironment           string
		wantPrefix                string
		wantErr                   string
	}{
		{name: "defaults", wantEnvironment: "development", wantPrefix: "01"},
		{name: "sandbox", environment: "sandbox", prefix: "5A", wantEnvironment: "sandbox", wantPrefix: "5a"},
		{name: "production", environment: "production", prefix: "01", wantEnvironment: "production", wantPrefix: "01"},
		{name: "environment with spaces", environment: "my sandbox", wantErr: "LOCKERNET_ENVIRONMENT"},
		{name: "environment upper case", environment: "Production", wantErr: "LOCKERNET_ENVIRONMENT"},
		{name: "prefix too long", prefix: "012", wantErr: "LOCKERNET_TOWER_ID_PREFIX"},
		{name: "prefix not hex", prefix: "0g", wantErr: "LOCKERNET_TOWER_ID_PREFIX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LOCKERNET_ENVIRONMENT", tt.environment)
			t.Setenv("LOCKERNET_TOWER_ID_PREFIX", tt.prefix)
			c, err := Load()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantEnvironment, c.Environment)
			assert.Equal(t, tt.wantPrefix, c.TowerIDPrefix)
		})
	}
}
