package simctl

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// probePaths are the gateway's liveness and readiness probes: request-level
// faults spare them (an orchestrator must still see the process), and they are
// not counted as local-API requests.
var probePaths = map[string]bool{"/healthz": true, "/readyz": true}

// Middleware applies the request-level fault modes (hang, http_500, slow) to the
// gateway's local API and counts the requests it receives.
func (s *Sim) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probePaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		counted := false
		for {
			f, changed := s.state()
			if f.Mode == ModeUnreachable {
				// Accepted just before the listener closed: drop it like the
				// rest rather than answer.
				resetRequest(w)
				return
			}
			if !counted {
				s.requests.Add(1)
				counted = true
			}
			switch f.Mode {
			case ModeHang:
				select {
				case <-r.Context().Done():
					return
				case <-s.closed:
					return
				case <-changed:
					continue // behave as the new mode says
				}
			}
			switch f.Mode {
			case ModeHTTP500:
				writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR",
					"simulated internal error", map[string]any{"simulated": true})
				return
			case ModeSlow:
				t := time.NewTimer(time.Duration(f.DelayMs) * time.Millisecond)
				select {
				case <-r.Context().Done():
					t.Stop()
					return
				case <-s.closed:
					t.Stop()
					return
				case <-t.C:
				}
			}
			next.ServeHTTP(w, r)
			return
		}
	})
}

// resetRequest drops the connection without an answer.
func resetRequest(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	resetConn(conn)
}

func resetConn(c net.Conn) {
	if t, ok := c.(*trackedConn); ok {
		c = t.Conn
		defer func() { _ = t.Close() }()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	_ = c.Close()
}

// WriteError answers a /sim/* request with the simulator's error body.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, code, msg, nil)
}

func writeError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error":     code,
		"message":   msg,
		"timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"details":   details,
	})
}

// Listener wraps the local API's listener so that mode "unreachable" closes the
// port (new connections are refused) and resets the open connections; when the
// mode changes back it listens again on the same address. Close the returned
// listener (or let http.Server do it) when done.
func (s *Sim) Listener(ln net.Listener) net.Listener {
	l := &faultListener{
		inner:     ln,
		network:   ln.Addr().Network(),
		addr:      ln.Addr(),
		reachable: true,
		wake:      make(chan struct{}),
		conns:     make(map[*trackedConn]struct{}),
	}
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	reachable := s.faults.Mode != ModeUnreachable
	s.mu.Unlock()
	if !reachable {
		l.setReachable(false)
	}
	return l
}

type faultListener struct {
	network string
	addr    net.Addr

	mu    sync.Mutex
	inner net.Listener // nil while unreachable
	// held keeps the port bound (not listening) while unreachable, so a connection is refused
	// and no other process's ephemeral listener takes the port meanwhile (holdPort).
	held      io.Closer
	reachable bool
	closed    bool
	wake      chan struct{} // closed and replaced when reachable/closed changes
	conns     map[*trackedConn]struct{}
}

func (l *faultListener) setReachable(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.reachable == ok {
		return
	}
	l.reachable = ok
	if !ok {
		if l.inner != nil {
			_ = l.inner.Close()
			l.inner = nil
		}
		for c := range l.conns {
			resetConn(c.Conn)
		}
		// After the resets: a connection still open holds the port's bind bucket.
		l.held = holdPort(l.addr)
	} else {
		l.release()
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// Accept blocks while the listener is unreachable, so http.Server keeps serving
// once it is reachable again.
func (l *faultListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		if !l.reachable {
			wake := l.wake
			l.mu.Unlock()
			<-wake
			continue
		}
		if l.inner == nil {
			l.release()
			inner, err := net.Listen(l.network, l.addr.String())
			if err != nil {
				// The port may still be held for an instant; try again.
				wake := l.wake
				l.mu.Unlock()
				select {
				case <-wake:
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			l.inner = inner
		}
		inner := l.inner
		l.mu.Unlock()

		c, err := inner.Accept()
		l.mu.Lock()
		if err != nil {
			swapped := l.inner != inner || l.closed
			l.mu.Unlock()
			if swapped {
				continue
			}
			return nil, err
		}
		if !l.reachable || l.closed {
			l.mu.Unlock()
			resetConn(c)
			continue
		}
		tc := &trackedConn{Conn: c, l: l}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

func (l *faultListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.wake)
	l.wake = make(chan struct{})
	l.release()
	if l.inner != nil {
		err := l.inner.Close()
		l.inner = nil
		return err
	}
	return nil
}

func (l *faultListener) Addr() net.Addr { return l.addr }

// release lets go of the port held while unreachable; l.mu is held.
func (l *faultListener) release() {
	if l.held != nil {
		_ = l.held.Close()
		l.held = nil
	}
}

type trackedConn struct {
	net.Conn
	l    *faultListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
