package httpserve

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Latch is the handler a process serves from the moment it holds its port, until Ready
// hands it the real handler (DESIGN §8). Probes (/healthz, /readyz) are answered at once by
// starting (a 503 saying the process is not ready yet), so an orchestrator sees "starting"
// rather than a connection held in the listen queue. Any other request waits up to wait for
// the process to become ready and is then served as usual, or answered by starting if it
// is still not ready: a restarted instance behind a proxy that sends it traffic early
// serves that traffic late rather than failing it.
type Latch struct {
	starting http.Handler
	wait     time.Duration
	ready    atomic.Pointer[http.Handler]
	once     sync.Once
	readyc   chan struct{}
}

// NewLatch returns a latch that answers with starting until Ready is called.
func NewLatch(starting http.Handler, wait time.Duration) *Latch {
	return &Latch{starting: starting, wait: wait, readyc: make(chan struct{})}
}

// Ready switches the latch to h for every later request and releases the waiting ones.
// Calling it again replaces h.
func (l *Latch) Ready(h http.Handler) {
	l.ready.Store(&h)
	l.once.Do(func() { close(l.readyc) })
}

// IsReady reports whether Ready was called.
func (l *Latch) IsReady() bool { return l.ready.Load() != nil }

func (l *Latch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.ready.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if !isProbe(r.URL.Path) && l.wait > 0 {
		t := time.NewTimer(l.wait)
		defer t.Stop()
		select {
		case <-l.readyc:
			(*l.ready.Load()).ServeHTTP(w, r)
			return
		case <-t.C:
		case <-r.Context().Done():
		}
	}
	l.starting.ServeHTTP(w, r)
}

func isProbe(path string) bool { return path == "/healthz" || path == "/readyz" }

// StartingProbes answers /healthz and /readyz with 503 {"status":"starting"} and
// Retry-After: 1, and hands any other path to other (nil: the same answer).
func StartingProbes(other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if other != nil && !isProbe(r.URL.Path) {
			other.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"starting","checks":{}}` + "\n"))
	})
}

// ServeWhileStarting serves latch on ln from now on and runs start, which connects what the
// process needs, hands the latch its real handler with Ready, and returns when ctx is done.
// If either the server or start ends, the other is stopped; the first error is returned.
func ServeWhileStarting(ctx context.Context, ln net.Listener, latch *Latch, drain time.Duration, start func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		err := Serve(ctx, ln, latch, drain)
		cancel()
		served <- err
	}()
	err := start(ctx)
	cancel()
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}
