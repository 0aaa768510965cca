package apiserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// towerCacheTTL bounds how long a tower's row is served from memory. A tower's secret never
// changes; its organization and location only by an operator's re-provisioning.
const towerCacheTTL = time.Minute

// towerKeys caches each tower with its secret opened, so issuing a token or checking an
// event batch costs no query and no decryption.
type towerKeys struct {
	ring *keyring.Keyring
	mu   sync.RWMutex
	keys map[string]cachedTower
}

type cachedTower struct {
	tower  store.Tower
	secret []byte
	at     time.Time
}

func newTowerKeys(ring *keyring.Keyring) *towerKeys {
	return &towerKeys{ring: ring, keys: map[string]cachedTower{}}
}

// tower loads a tower of the organization with its secret; another organization's tower is
// store.ErrNotFound, as an unknown one.
func (s *Server) tower(ctx context.Context, orgID int64, towerID string) (store.Tower, []byte, error) {
	id := strings.ToLower(towerID)
	k := s.towerKeys
	k.mu.RLock()
	c, ok := k.keys[id]
	k.mu.RUnlock()
	if !ok || time.Since(c.at) > towerCacheTTL {
		t, err := s.deps.Store.TowerByID(ctx, id)
		if err != nil {
			return store.Tower{}, nil, err
		}
		secret, err := k.ring.Open(keyring.TowerSecretPurpose(t.ID), t.SecretSealed)
		if err != nil {
			return store.Tower{}, nil, fmt.Errorf("open tower secret: %w", err)
		}
		c = cachedTower{tower: t, secret: secret, at: time.Now()}
		k.mu.Lock()
		k.keys[id] = c
		k.mu.Unlock()
	}
	if c.tower.OrganizationID != orgID {
		return store.Tower{}, nil, fmt.Errorf("get tower: %w", store.ErrNotFound)
	}
	return c.tower, c.secret, nil
}
