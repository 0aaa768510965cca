package httpserve

import (
	"net/http"
	"sync/atomic"
)

// Latch is the handler a process serves from the moment it holds its port: until Ready
// hands it the real handler it answers every request with starting (a 503 that says the
// process is not ready yet), and from then on with the real handler. Probes so see 503
// while migrations run or Temporal is unreachable, instead of a connection that hangs in
// the listen queue, and 200 only once the process can serve (DESIGN §8).
type Latch struct {
	starting http.Handler
	ready    atomic.Pointer[http.Handler]
}

// NewLatch returns a latch that answers with starting until Ready is called.
func NewLatch(starting http.Handler) *Latch { return &Latch{starting: starting} }

// Ready switches the latch to h for every later request. Calling it again replaces h.
func (l *Latch) Ready(h http.Handler) { l.ready.Store(&h) }

// IsReady reports whether Ready was called.
func (l *Latch) IsReady() bool { return l.ready.Load() != nil }

func (l *Latch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.ready.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	l.starting.ServeHTTP(w, r)
}

// StartingProbes answers /healthz and /readyz with 503 {"status":"starting"} and
// Retry-After: 1, and hands any other path to other (nil: the same answer).
func StartingProbes(other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if other != nil && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			other.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"starting","checks":{}}` + "\n"))
	})
}
