package apiserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/store"
)

// clientStateTTL bounds how long a disabled client's tokens keep working on an instance.
const clientStateTTL = 2 * time.Second

// clientStates caches whether each OAuth client is enabled, for clientStateTTL: disabling a
// client (lockernet-admin client disable) cuts off the tokens it already holds within that
// time on every instance.
type clientStates struct {
	mu    sync.Mutex
	cache map[string]cachedClient
}

type cachedClient struct {
	enabled bool
	at      time.Time
}

// clientEnabled reports whether the client is not disabled. Clients are never deleted, only
// disabled, so a token names an existing client unless it was made outside the token
// endpoint (tests, the admin tool); such a token is judged by its signature alone.
func (s *Server) clientEnabled(ctx context.Context, clientID string) (bool, error) {
	s.clients.mu.Lock()
	c, ok := s.clients.cache[clientID]
	s.clients.mu.Unlock()
	if ok && time.Since(c.at) < clientStateTTL {
		return c.enabled, nil
	}
	cl, err := s.deps.Store.ClientByID(ctx, clientID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	enabled := err != nil || !cl.Disabled
	s.clients.mu.Lock()
	if s.clients.cache == nil || len(s.clients.cache) > 10000 {
		s.clients.cache = map[string]cachedClient{}
	}
	s.clients.cache[clientID] = cachedClient{enabled: enabled, at: time.Now()}
	s.clients.mu.Unlock()
	return enabled, nil
}
