package towersim_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "towersim.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
		"apiBaseUrl": "http://127.0.0.1:8080",
		"clientId": "c", "clientSecret": "s",
		"stateDir": "state",
		"extraFieldFromANewerWriter": true,
		"towers": [
			{"id": "01000000000000AB", "secretHex": "00112233445566778899aabbccddeeff", "lockerIds": [3, 1, 2]}
		]
	}`), 0o600))

	cfg, err := towersim.LoadConfig(path)
	require.NoError(t, err)
	assert.Equal(t, towersim.Config{
		APIBaseURL:   "http://127.0.0.1:8080",
		ClientID:     "c",
		ClientSecret: "s",
		StateDir:     filepath.Join(dir, "state"),
		Towers: []towersim.TowerConfig{
			{ID: "01000000000000ab", SecretHex: "00112233445566778899aabbccddeeff", LockerIDs: []int64{3, 1, 2}},
		},
	}, cfg)
}

func TestLoadConfigRefusesBadFiles(t *testing.T) {
	t.Parallel()
	const secret = `"secretHex": "00112233445566778899aabbccddeeff"`
	tests := []struct {
		name, content string
	}{
		{"not JSON", `{"towers": [`},
		{"no towers", `{"towers": []}`},
		{"bad tower id", `{"towers": [{"id": "tower-1", ` + secret + `, "lockerIds": [1]}]}`},
		{"secret not hex", `{"towers": [{"id": "0100000000000014", "secretHex": "xyz", "lockerIds": [1]}]}`},
		{"secret too short", `{"towers": [{"id": "0100000000000014", "secretHex": "0011", "lockerIds": [1]}]}`},
		{"no lockers", `{"towers": [{"id": "0100000000000014", ` + secret + `, "lockerIds": []}]}`},
		{"locker id zero", `{"towers": [{"id": "0100000000000014", ` + secret + `, "lockerIds": [0]}]}`},
		{"locker listed twice", `{"towers": [{"id": "0100000000000014", ` + secret + `, "lockerIds": [1, 1]}]}`},
		{"tower listed twice", `{"towers": [{"id": "0100000000000014", ` + secret + `, "lockerIds": [1]}, {"id": "0100000000000014", ` + secret + `, "lockerIds": [2]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "towersim.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			_, err := towersim.LoadConfig(path)
			assert.Error(t, err)
		})
	}

	_, err := towersim.LoadConfig(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
