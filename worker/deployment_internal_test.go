package worker

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/config"
)

func TestBuildIDFromTheBuild(t *testing.T) {
	t.Parallel()
	const rev = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	hash := func() (string, error) { return "0123456789ab", nil }
	settings := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name    string
		info    *debug.BuildInfo
		hash    func() (string, error)
		want    string
		wantErr string
	}{
		{name: "clean checkout", info: settings("vcs.revision", rev, "vcs.modified", "false"), want: "1a2b3c4d5e6f"},
		{name: "uncommitted changes", info: settings("vcs.revision", rev, "vcs.modified", "true"), want: "1a2b3c4d5e6f-dirty-0123456789ab"},
		{name: "no VCS information", info: settings("-trimpath", "true"), want: "exe-0123456789ab"},
		{name: "no build information", want: "exe-0123456789ab"},
		{name: "the executable unreadable", info: settings("vcs.revision", rev, "vcs.modified", "true"),
			hash: func() (string, error) { return "", errors.New("gone") }, wantErr: "derive build id: gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := hash
			if tt.hash != nil {
				h = tt.hash
			}
			got, err := buildIDFrom(tt.info, h)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.True(t, config.ValidBuildID(got), "LOCKERNET_BUILD_ID would accept %q", got)
		})
	}
}

// This test binary's own id: the hash of its executable (go test records no VCS revision).
func TestBuildIDOfThisExecutable(t *testing.T) {
	t.Parallel()
	id, err := BuildID()
	require.NoError(t, err)
	assert.Regexp(t, `^(exe-|[0-9a-f]{12}(-dirty-)?)[0-9a-f]{12}$|^[0-9a-f]{12}$`, id)
	again, err := BuildID()
	require.NoError(t, err)
	assert.Equal(t, id, again, "the same executable, the same id")
}

func TestHashFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "apiserver"), filepath.Join(dir, "worker")
	require.NoError(t, os.WriteFile(a, []byte("one"), 0o600))
	require.NoError(t, os.WriteFile(b, []byte("two"), 0o600))
	ab, err := HashFiles(a, b)
	require.NoError(t, err)
	assert.Len(t, ab, 12)
	ba, err := HashFiles(b, a)
	require.NoError(t, err)
	assert.NotEqual(t, ab, ba, "the order counts")
	require.NoError(t, os.WriteFile(b, []byte("two, rebuilt"), 0o600))
	changed, err := HashFiles(a, b)
	require.NoError(t, err)
	assert.NotEqual(t, ab, changed, "a rebuilt binary is another build")
	_, err = HashFiles(filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, "missing")
	_, err = HashFiles()
	assert.Error(t, err)
}

func TestDeploymentFromConfig(t *testing.T) {
	t.Parallel()
	d, err := DeploymentFromConfig(config.Config{DeploymentName: "lockernet", BuildID: "v1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, Deployment{}, d, "unversioned unless LOCKERNET_WORKER_VERSIONING")
	assert.False(t, d.Versioned())
	assert.Equal(t, "unversioned", d.String())

	d, err = DeploymentFromConfig(config.Config{WorkerVersioning: true, DeploymentName: "lockernet", BuildID: "v1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, Deployment{Name: "lockernet", BuildID: "v1.4.2"}, d)
	assert.Equal(t, "lockernet.v1.4.2", d.String())
	assert.True(t, d.options().UseVersioning)

	own, err := BuildID()
	require.NoError(t, err)
	d, err = DeploymentFromConfig(config.Config{WorkerVersioning: true, DeploymentName: "lockernet"})
	require.NoError(t, err)
	assert.Equal(t, Deployment{Name: "lockernet", BuildID: own}, d, "the executable's own id when none is set")
}
