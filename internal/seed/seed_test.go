package seed_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// Each environment seeds its towers under its own id prefix; the default keeps the ids
// every guide and test knows (0100000000000011...).
func TestDemoTowerIDPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	key := make([]byte, keyring.KeySize)
	_, _ = rand.Read(key)
	ring, err := keyring.New(key)
	require.NoError(t, err)
	ids := func(res seed.Result) []string {
		var out []string
		for _, tw := range res.Credentials.Towers {
			out = append(out, tw.ID)
		}
		return out
	}
	open := func(t *testing.T) *store.Store {
		st, err := store.Open(ctx, testenv.NewDatabase(t), store.Options{MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}

	t.Run("default", func(t *testing.T) {
		res, err := seed.Demo(ctx, open(t), ring, nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"0100000000000011", "0100000000000012", "0100000000000021", "0100000000000031"}, ids(res))
	})

	t.Run("sandbox prefix", func(t *testing.T) {
		st := open(t)
		res, err := seed.DemoWith(ctx, st, ring, nil, seed.DemoOptions{TowerIDPrefix: "5A"})
		require.NoError(t, err)
		assert.Equal(t, []string{"5a00000000000011", "5a00000000000012", "5a00000000000021", "5a00000000000031"}, ids(res))
		for _, tw := range res.Towers {
			_, err := st.Tower(ctx, res.Credentials.OrganizationID, tw.ID)
			assert.NoError(t, err, "tower %s stored", tw.ID)
			assert.True(t, strings.HasPrefix(tw.ID, "5a"))
		}
		again, err := seed.DemoWith(ctx, st, ring, &res.Credentials, seed.DemoOptions{TowerIDPrefix: "5a"})
		require.NoError(t, err)
		assert.Equal(t, ids(res), ids(again), "seeding again with the same prefix changes nothing")
	})

	t.Run("bad prefix", func(t *testing.T) {
		_, err := seed.DemoWith(ctx, open(t), ring, nil, seed.DemoOptions{TowerIDPrefix: "x1"})
		require.Error(t, err)
	})
}
