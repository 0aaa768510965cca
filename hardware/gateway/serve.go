package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ShutdownGrace is how long Serve lets in-flight requests finish after ctx ends
// before it closes their connections; Server.Serve gives them this long after the
// gateway's own work is done (its stop grace, Config.StopGrace).
const ShutdownGrace = 2 * time.Second

// Serve serves h on ln until ctx ends, then shuts down gracefully: in-flight
// requests get ShutdownGrace to finish, the rest are cut. It closes ln. There is
// no write timeout on purpose: a door open may take a whole open policy.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	return serve(ctx, ln, h, logger, nil)
}

// Serve serves h — the gateway's Handler, or a handler wrapping it — on ln until ctx ends,
// then stops in this order, so no door is acted on without its record: it stops taking
// requests (ln closes; a request that still reaches the gateway begins nothing new: track),
// lets the requests in flight finish and record their results and event-log lines — a keyed
// call whose caller left included — for at most the stop grace (Config.StopGrace), gives
// their answers up to ShutdownGrace more to reach their callers, and only then closes the
// database. Close after Serve does nothing more.
func (s *Server) Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	err := serve(ctx, ln, h, s.logger, s.awaitWork)
	if cerr := s.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// serve is Serve; after ctx ends it calls await (if not nil) while the HTTP server's
// Shutdown closes ln and waits for the connections, and gives those still open
// ShutdownGrace after await returned.
func serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, await func()) error {
	if logger == nil {
		logger = slog.Default()
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests outlive a cancelled ctx: the stop decides when they are cut.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// Shutdown closes ln at once and then waits for every connection to go idle; it is
	// cut short below.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	if await != nil {
		await()
	}
	t := time.NewTimer(ShutdownGrace)
	defer t.Stop()
	select {
	case err := <-shut:
		if err != nil {
			_ = srv.Close()
		}
	case <-t.C:
		cancel()
		<-shut
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// work counts what the gateway is doing for its callers — requests being handled and keyed
// calls carried on after their caller left — so that a stop closes the database only once
// none is left (or its grace ran out).
type work struct {
	mu    sync.Mutex
	n     int
	state workState
	zero  chan struct{} // closed when n drops to 0; a new one each time n leaves 0
	until time.Time     // the latest the stop waits (set by its start)
	// stopc is closed when the stop begins: long polls (GET /alerts) answer at once.
	stopc chan struct{}
}

// stopped is closed once the stop has begun.
func (w *work) stopped() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopc == nil {
		w.stopc = make(chan struct{})
		if w.state != acceptingWork {
			close(w.stopc)
		}
	}
	return w.stopc
}

type workState int

const (
	// acceptingWork: serving as usual.
	acceptingWork workState = iota
	// stoppingWork: the stop has begun; requests are still counted in, so a repeat of a keyed
	// call can be answered from the database, but nothing new is begun (track, claimKey).
	stoppingWork
	// closedWork: the database is closing or closed; nothing is counted in any more.
	closedWork
)

// begin counts a request in; ok is false once the database is closing, and stopping says
// the stop has begun.
func (w *work) begin() (ok, stopping bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == closedWork {
		return false, true
	}
	w.add()
	return true, w.state == stoppingWork
}

// join counts in work that counted work starts (a keyed call's carrying out): it is never
// refused, since the work starting it keeps the database open until it has joined.
func (w *work) join() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add()
}

func (w *work) add() {
	if w.n == 0 {
		w.zero = make(chan struct{})
	}
	w.n++
}

func (w *work) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.n == 0 {
		close(w.zero)
	}
}

// stopping reports whether the stop has begun.
func (w *work) stopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state != acceptingWork
}

// stop begins the stop (the first call sets its deadline, now + grace) and reports the
// deadline, how much work is running, and whether the database may already be closing (an
// earlier stop is done waiting).
func (w *work) stop(grace time.Duration) (until time.Time, running int, closing bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == acceptingWork {
		w.state = stoppingWork
		w.until = time.Now().Add(grace)
		if w.stopc != nil {
			close(w.stopc)
		}
	}
	return w.until, w.n, w.state == closedWork
}

// close waits until no work is left, or until, and then lets no more in; it returns the
// work still running.
func (w *work) close(until time.Time) int {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for {
		w.mu.Lock()
		if w.n == 0 || w.state == closedWork {
			w.state = closedWork
			n := w.n
			w.mu.Unlock()
			return n
		}
		zero := w.zero
		w.mu.Unlock()
		select {
		case <-zero:
		case <-t.C:
			w.mu.Lock()
			w.state = closedWork
			n := w.n
			w.mu.Unlock()
			return n
		}
	}
}

// awaitWork stops the gateway taking new work and waits until the requests in flight have
// finished and recorded their results, for at most the stop grace (counted from the first
// call); the database may close once it returns.
func (s *Server) awaitWork() {
	until, running, closing := s.work.stop(s.cfg.StopGrace)
	if closing {
		return
	}
	if running > 0 {
		s.logger.Info("gateway stopping: waiting for the requests in flight", "inFlight", running,
			"atMostMs", time.Until(until).Milliseconds())
	}
	if left := s.work.close(until); left > 0 {
		// What they began is recorded (a keyed request's intent): a repeat after the restart
		// reads the door.
		s.logger.Error("gateway stopping: the stop grace ran out; closing the database under the requests still in flight",
			"inFlight", left, "stopGraceMs", s.cfg.StopGrace.Milliseconds())
	}
}

// track counts every request in (work). Once the stop has begun it refuses new work with
// 503 GATEWAY_STOPPING, having done nothing — except a keyed mutating request, which goes on
// to idempotent: a repeat of a key is still answered from what is recorded, and only a new
// key is refused there (claimKey). Once the database is closing, a keyed mutating request
// cannot be looked up any more and answers 500 REQUEST_OUTCOME_UNKNOWN (an earlier request
// with its key may have opened a door).
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As idempotent sees them; the admin page's forms are not keyed calls.
		keyed := r.Header.Get("Idempotency-Key") != "" && r.Method != http.MethodGet && r.Method != http.MethodHead &&
			r.URL.Path != "/login" && r.URL.Path != "/logout" && !strings.HasPrefix(r.URL.Path, "/admin/")
		ok, stopping := s.work.begin()
		if ok {
			defer s.work.end()
		}
		switch {
		case !ok && keyed:
			w.Header().Set("Connection", "close")
			w.Header().Set(IdempotencyKeysHeader, IdempotencyKeysHonoured)
			writeError(w, CodeRequestOutcomeUnknown, "the gateway is stopping and can no longer look up this Idempotency-Key; "+
				"whether a request with it was carried out is unknown (send it again once the gateway is back)", nil)
		case stopping && !keyed, !ok:
			w.Header().Set("Connection", "close")
			w.Header().Set(IdempotencyKeysHeader, IdempotencyKeysHonoured)
			writeError(w, CodeGatewayStopping, "the gateway is stopping; the request was not carried out (send it again)", nil)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
