package gateway

import (
	"net"
	"sync"
	"time"
)

// Failed admin logins per client address: after loginFailures within loginWindow the address
// is refused (429) until the oldest failure leaves the window, so the secret cannot be
// guessed at the speed of the network.
const (
	loginFailures = 5
	loginWindow   = time.Minute
	// maxThrottled bounds the addresses remembered; a flood of addresses starts afresh.
	maxThrottled = 10000
)

type loginThrottle struct {
	mu       sync.Mutex
	failures map[string][]time.Time
}

func newLoginThrottle() *loginThrottle { return &loginThrottle{failures: map[string][]time.Time{}} }

func clientHost(remoteAddr string) string {
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return h
	}
	return remoteAddr
}

// wait is how long the address must wait before its next attempt (0: it may try now).
func (l *loginThrottle) wait(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.recent(addr, now)
	if len(recent) < loginFailures {
		return 0
	}
	return recent[0].Add(loginWindow).Sub(now)
}

// failed records a failed attempt of the address.
func (l *loginThrottle) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) >= maxThrottled {
		l.failures = map[string][]time.Time{}
	}
	l.failures[addr] = append(l.recent(addr, now), now)
}

func (l *loginThrottle) recent(addr string, now time.Time) []time.Time {
	list := l.failures[addr]
	i := 0
	for i < len(list) && now.Sub(list[i]) >= loginWindow {
		i++
	}
	list = list[i:]
	if len(list) == 0 {
		delete(l.failures, addr)
	}
	return list
}
