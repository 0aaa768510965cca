package drill

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// census counts the failed exchanges clients saw, by failureKind.
type census struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *census) add(kind string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[kind] += n
}

func (c *census) addAll(m map[string]int) {
	for k, n := range m {
		c.add(k, n)
	}
}

func (c *census) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.m {
		out[k] = n
	}
	return out
}

// of500 counts the HTTP 500 answers; others, the failures that were neither a 503 with
// Retry-After nor (when cut is allowed) a refused or cut connection.
func (c *census) tally(cutAllowed bool) (of500, others int) {
	for k, n := range c.counts() {
		switch {
		case strings.HasPrefix(k, "HTTP 500"):
			of500 += n
		case k == "HTTP 503 + Retry-After", cutAllowed && k == "no answer":
		default:
			others += n
		}
	}
	return of500, others
}

// holdUntil asks for a hold as a careful tower client does: a 503 is sent again after its
// Retry-After, a refused call or a proxy error after 200 ms, until it is answered 201 or
// refused for good (another 4xx, a 500), or ctx ends. Failed exchanges go to cs; the call
// returned spans every exchange.
func holdUntil(ctx context.Context, tower *towerAPI, kind, path string, body any, cs *census) towerCall {
	first := time.Now()
	for {
		c := postTower(ctx, tower, kind, path, body)
		c.start = first
		if c.ok() {
			return c
		}
		h := http.Header{}
		if c.retryAfter {
			h.Set("Retry-After", "1")
		}
		cs.add(failureKind(c.status, h), 1)
		wait := 200 * time.Millisecond
		switch {
		case c.status == http.StatusServiceUnavailable && c.retryAfter:
			wait = time.Second
		case c.status == 0, c.status == http.StatusBadGateway, c.status == http.StatusServiceUnavailable, c.status == http.StatusGatewayTimeout:
		default:
			return c
		}
		select {
		case <-ctx.Done():
			return c
		case <-time.After(wait):
		}
	}
}

// towerFlow is one flow of a tower client: a reservation of hold on a locker of its own
// and, with token, a drop-off token on it once the reservation is answered.
func towerFlow(ctx context.Context, tower *towerAPI, l towerLocker, hold int, token bool, cs *census) []towerCall {
	path := l.path()
	res := holdUntil(ctx, tower, "reservation", path+"reservations", map[string]any{"duration": hold}, cs)
	if !res.ok() || !token {
		return []towerCall{res}
	}
	return []towerCall{res, holdUntil(ctx, tower, "dropoff-token", path+"dropoff-locker-tokens",
		map[string]any{"duration": hold, "client_info": "drill"}, cs)}
}

// flowCalls gathers the calls of concurrent flows.
type flowCalls struct {
	mu    sync.Mutex
	calls []towerCall
	flows int
	lost  int // flows with a call never answered 201
}

func (f *flowCalls) add(cs []towerCall, wantToken bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cs...)
	f.flows++
	if !cs[0].ok() || (wantToken && (len(cs) < 2 || !cs[1].ok())) {
		f.lost++
		logf("  a tower flow was never answered 201: %s", cs[len(cs)-1].err)
	}
}

func (f *flowCalls) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for _, c := range f.calls {
		if c.ok() {
			m[c.kind+" 201"]++
		} else {
			m[c.kind+" never 201"]++
		}
	}
	return fmt.Sprintf("%d flows: %s", f.flows, counts(m))
}

// tower returns a tower API client with the demo service provider.
func (s *system) tower(ctx context.Context) (*towerAPI, error) {
	t := newTowerAPI("http://"+s.apiAddr, s.creds.ServiceProvider.ClientID, s.creds.ServiceProvider.ClientSecret)
	_, err := t.token.Bearer(ctx)
	return t, err
}
