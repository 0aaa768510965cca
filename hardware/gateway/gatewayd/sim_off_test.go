//go:build !simcontrol

package gatewayd

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A production build has no simulated controllers: -simulated is refused, whatever
// the layout.
func TestProductionRefusesSimulated(t *testing.T) {
	t.Parallel()
	for _, layout := range []string{"one-bank", kerongLayout(t, "kerong+tcp://127.0.0.1:1?board=1")} {
		err := run(t.Context(), []string{"-simulated", "-secret", goodSecret, "-layout", layout, "-db", filepath.Join(t.TempDir(), "gw.db")},
			env(nil), io.Discard, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "this build has no simulated controllers")
	}
}
