package gateway

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/idemhash"
)

// Idempotency keys on the local API's mutating operations (DESIGN §6.2, §7): a caller that
// sends `Idempotency-Key` gets its request carried out once. The first arrival executes — to
// its end, even when the caller's connection drops, so a door open is never left half done —
// and its answer is kept; a repeat with the same key and the same method, path and body gets
// that answer (waiting for it while the first still runs), with `Idempotent-Replayed: true`.
// A key whose intent an earlier run of the gateway recorded without a result (it stopped or
// died mid-request) is settled by reading its door (interrupted.go).
// The cloud sends its gateway request's id as the key with every send, so a send whose fate
// it does not know (its process died mid-call) may go out again and learns what the first
// one did. Every answer says the gateway honours keys (IdempotencyKeysHeader), so the cloud
// knows it may re-send.

// IdempotencyKeysHeader is set on every answer of the authenticated API: this gateway
// honours Idempotency-Key (value IdempotencyKeysHonoured).
const (
	IdempotencyKeysHeader   = "X-Idempotency-Keys"
	IdempotencyKeysHonoured = "honoured"
)

// keepIdempotentAnswers is how long an answer is kept for its key: far beyond the cloud's
// whole retry budget for one request (a hardware call's 65 s deadline, re-sent a few times,
// and a crashed worker's activity retried after its heartbeat timeout).
const keepIdempotentAnswers = 24 * time.Hour

// idempotentCalls are the keyed calls this process is carrying out now.
type idempotentCalls struct {
	mu      sync.Mutex
	running map[string]*idempotentCall
	// prunedAt is when the records past their keeping were last dropped (at most once a
	// minute, not with every keyed request).
	prunedAt time.Time
}

// idempotentCall is one keyed call in flight: done closes once answer is set.
type idempotentCall struct {
	hash   []byte
	done   chan struct{}
	answer recordedAnswer
}

// recordedAnswer is an answer as kept for its key.
type recordedAnswer struct {
	status      int
	contentType string
	body        []byte
}

// idempotent carries out a keyed mutating call once (see above); a call without the header
// is served as ever.
//
// The order of a keyed call's records is what makes it safe across a stop or a crash: its
// intent (the key, the request's hash, method and path) is committed before the handler
// runs, so before any lock is pulsed; the handler writes the open's event-log line once the
// controller answered; the result (the answer) is committed next, and only then is the
// answer written to the caller. A graceful stop waits for all of it (Server.Serve). A call
// whose intent an earlier run recorded without a result is settled by reading its door
// (settleInterrupted).
func (s *Server) idempotent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(IdempotencyKeysHeader, IdempotencyKeysHonoured)
		key := r.Header.Get("Idempotency-Key")
		if key == "" || r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if !validIdempotencyKey(key) {
			writeError(w, CodeValidation, "Idempotency-Key must be 1 to 255 printable ASCII characters", nil)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// limitBody's cap, or a connection that broke mid-body.
			writeError(w, CodePayloadTooLarge, "request body too large or unreadable", nil)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		hash := idemhash.Sum(r.Method, r.URL.RequestURI(), body)

		cl, err := s.claimKey(r.Context(), key, intent{hash: hash, method: r.Method, path: r.URL.Path})
		if err != nil {
			s.writeKeyError(w, r, err)
			return
		}
		// The call goes on to its end even when the caller leaves, and a stop waits for it.
		ctx := context.WithValue(context.WithoutCancel(r.Context()), idempotencyKeyContext{}, key)
		switch {
		case cl.first:
			s.work.join()
			go s.carryOut(ctx, key, cl.call, func(ctx context.Context) (recordedAnswer, keyFate) {
				return runKeyed(ctx, next, r)
			})
		case cl.interrupted != nil:
			s.work.join()
			go s.carryOut(ctx, key, cl.call, func(ctx context.Context) (recordedAnswer, keyFate) {
				return s.settleInterrupted(ctx, key, *cl.interrupted)
			})
		}
		select {
		case <-cl.call.done:
			if !cl.first {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			cl.call.answer.write(w)
		case <-r.Context().Done():
			// The caller left; the call goes on to its end (carryOut) and its answer is kept.
		}
	})
}

// idempotencyKeyContext carries a keyed call's key to the event-log lines of its door
// opens (openAndRecord).
type idempotencyKeyContext struct{}

// Errors of a keyed call that has no answer to give.
var (
	errKeyReused        = errors.New("idempotency key reused for another request")
	errKeyStoreUnusable = errors.New("idempotency keys cannot be read or written")
	errStopping         = errors.New("the gateway is stopping")
)

func (s *Server) writeKeyError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errKeyReused):
		writeError(w, CodeIdempotencyKeyReused, "this Idempotency-Key was used for a different request", nil)
	case errors.Is(err, errStopping):
		w.Header().Set("Connection", "close")
		writeError(w, CodeGatewayStopping, "the gateway is stopping; the request was not carried out (send it again)", nil)
	default:
		s.logger.ErrorContext(r.Context(), "idempotency key", "err", err)
		writeError(w, CodeInternal, "internal error", nil)
	}
}

// intent is what a keyed request's record holds before it runs.
type intent struct {
	hash   []byte
	method string
	path   string
}

// claim is what claimKey found for a key.
type claim struct {
	call *idempotentCall
	// first: this request is the key's first and runs (its intent is now recorded).
	first bool
	// interrupted, when set: an earlier run of the gateway recorded the key's intent and no
	// result; this request settles it (settleInterrupted).
	interrupted *keptKey
}

// claimKey finds the call for key: one in flight here (to wait for), one answered before
// (done already closed), one an earlier run of the gateway began and did not finish
// (interrupted), or a new one, whose intent is committed before it runs (first). A key used
// with another request hash is errKeyReused.
func (s *Server) claimKey(ctx context.Context, key string, in intent) (claim, error) {
	calls := &s.keyed
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if c, ok := calls.running[key]; ok {
		if !bytes.Equal(c.hash, in.hash) {
			return claim{}, errKeyReused
		}
		return claim{call: c}, nil
	}
	kept, err := s.store.idempotentAnswer(ctx, key)
	switch {
	case err == nil:
		if !bytes.Equal(kept.hash, in.hash) {
			return claim{}, errKeyReused
		}
		if kept.answer == nil {
			c := calls.add(key, in.hash)
			return claim{call: c, interrupted: &kept}, nil
		}
		c := &idempotentCall{hash: in.hash, done: make(chan struct{}), answer: *kept.answer}
		close(c.done)
		return claim{call: c}, nil
	case !errors.Is(err, errNotFound):
		return claim{}, fmt.Errorf("%w: %w", errKeyStoreUnusable, err)
	}
	if s.work.stopping() {
		// Nothing was done with this key; nothing new begins during a stop.
		return claim{}, errStopping
	}
	prune := time.Since(calls.prunedAt) > time.Minute
	if err := s.store.beginIdempotent(ctx, key, in, prune); err != nil {
		return claim{}, fmt.Errorf("%w: %w", errKeyStoreUnusable, err)
	}
	if prune {
		calls.prunedAt = time.Now()
	}
	return claim{call: calls.add(key, in.hash), first: true}, nil
}

// add registers a call being carried out here; calls.mu is held.
func (calls *idempotentCalls) add(key string, hash []byte) *idempotentCall {
	c := &idempotentCall{hash: hash, done: make(chan struct{})}
	if calls.running == nil {
		calls.running = map[string]*idempotentCall{}
	}
	calls.running[key] = c
	return c
}

// keyFate is what becomes of a key's record once its call has an answer.
type keyFate int

const (
	// keepAnswer: the answer is the key's result; repeats get it.
	keepAnswer keyFate = iota
	// forgetKey: nothing was done and the caller is told to retry; the retry runs again.
	forgetKey
	// leaveUnknown: the outcome is still unknown; the record stays without a result, so a
	// repeat tries again to learn it.
	leaveUnknown
)

// carryOut runs a keyed call to its end on ctx (not cancelled when the caller leaves),
// records its result and only then hands its answer to everyone waiting. The caller has
// counted it in s.work (join); it counts itself out at the end.
func (s *Server) carryOut(ctx context.Context, key string, c *idempotentCall, run func(context.Context) (recordedAnswer, keyFate)) {
	defer s.work.end()
	func() {
		defer func() {
			if p := recover(); p != nil {
				// Whatever it did is not known: the record stays without a result, and a
				// repeat settles it as an interrupted one.
				s.logger.ErrorContext(ctx, "keyed request panicked", "key", key, "panic", p)
				rec := &answerRecorder{header: http.Header{}}
				writeError(rec, CodeInternal, "internal error", nil)
				c.answer = rec.answer()
			}
		}()
		var fate keyFate
		c.answer, fate = run(ctx)
		switch fate {
		case forgetKey:
			if err := s.store.forgetIdempotent(ctx, key); err != nil {
				s.logger.ErrorContext(ctx, "forget a keyed request that did nothing", "key", key, "err", err)
			}
		case keepAnswer:
			if err := s.store.finishIdempotent(ctx, key, c.answer); err != nil {
				// The answer is still given to this call's waiters (the door did what it says);
				// a repeat after a restart settles the key by reading the door.
				s.logger.ErrorContext(ctx, "keep a keyed request's answer", "key", key, "err", err)
			}
		case leaveUnknown:
		}
	}()
	s.keyed.mu.Lock()
	delete(s.keyed.running, key)
	s.keyed.mu.Unlock()
	close(c.done)
}

// runKeyed runs a keyed request's handler and keeps what it answers.
func runKeyed(ctx context.Context, next http.Handler, r *http.Request) (recordedAnswer, keyFate) {
	rec := &answerRecorder{header: http.Header{}}
	next.ServeHTTP(rec, r.WithContext(ctx))
	a := rec.answer()
	if a.nothingDone() {
		// A create that found no locker free of a race: nothing was assigned, and the caller
		// retries with the same key; the retry must run, not replay this answer.
		return a, forgetKey
	}
	return a, keepAnswer
}

// nothingDone says the answer is one that certainly changed nothing and that the caller is
// told to retry: 503 LOCKER_ASSIGNMENT_CONFLICT.
func (a recordedAnswer) nothingDone() bool {
	if a.status != http.StatusServiceUnavailable {
		return false
	}
	var e ErrorBody
	return json.Unmarshal(a.body, &e) == nil && e.Error == CodeLockerAssignmentConflict
}

func (a recordedAnswer) write(w http.ResponseWriter) {
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// answerRecorder keeps what a handler writes.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.header }

func (r *answerRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *answerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *answerRecorder) answer() recordedAnswer {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return recordedAnswer{status: status, contentType: r.header.Get("Content-Type"), body: bytes.Clone(r.body.Bytes())}
}

// validIdempotencyKey: 1..255 printable ASCII (as the cloud's, DESIGN §6.3).
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// keptKey is a key as stored: its intent and its answer (nil while unfinished).
type keptKey struct {
	intent
	answer *recordedAnswer
}

func (s *store) idempotentAnswer(ctx context.Context, key string) (keptKey, error) {
	var k keptKey
	var status sql.NullInt64
	var contentType, method, path sql.NullString
	var body []byte
	err := s.db.QueryRowContext(ctx, `SELECT request_hash, method, path, status, content_type, body FROM idempotent_requests
		WHERE key = ? AND created_at > ?`, key, time.Now().Add(-keepIdempotentAnswers).UTC().Format(time.RFC3339Nano)).
		Scan(&k.hash, &method, &path, &status, &contentType, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return k, errNotFound
	}
	if err != nil {
		return k, fmt.Errorf("read idempotency key: %w", interpretError(err))
	}
	k.method, k.path = method.String, path.String
	if status.Valid {
		k.answer = &recordedAnswer{status: int(status.Int64), contentType: contentType.String, body: body}
	}
	return k, nil
}

// beginIdempotent records a keyed request's intent, replacing a record of the key past its
// keeping; with prune it also drops every record past its keeping. It returns once the
// intent is committed.
func (s *store) beginIdempotent(ctx context.Context, key string, in intent, prune bool) error {
	now := time.Now().UTC()
	return s.withTx(ctx, func(tx *sql.Tx) error {
		cutoff := now.Add(-keepIdempotentAnswers).Format(time.RFC3339Nano)
		stale := `DELETE FROM idempotent_requests WHERE key = ? AND created_at <= ?`
		args := []any{key, cutoff}
		if prune {
			stale, args = `DELETE FROM idempotent_requests WHERE created_at <= ?`, []any{cutoff}
		}
		if _, err := tx.ExecContext(ctx, stale, args...); err != nil {
			return fmt.Errorf("prune idempotency keys: %w", interpretError(err))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotent_requests (key, request_hash, method, path, created_at) VALUES (?, ?, ?, ?, ?)`,
			key, in.hash, in.method, in.path, now.Format(time.RFC3339Nano)); err != nil {
			return fmt.Errorf("record idempotency key: %w", interpretError(err))
		}
		return nil
	})
}

func (s *store) forgetIdempotent(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotent_requests WHERE key = ?`, key); err != nil {
		return fmt.Errorf("forget idempotency key: %w", interpretError(err))
	}
	return nil
}

func (s *store) finishIdempotent(ctx context.Context, key string, a recordedAnswer) error {
	_, err := s.db.ExecContext(ctx, `UPDATE idempotent_requests SET status = ?, content_type = ?, body = ?, completed_at = ?
		WHERE key = ?`, a.status, a.contentType, a.body, time.Now().UTC().Format(time.RFC3339Nano), key)
	if err != nil {
		return fmt.Errorf("keep idempotent answer: %w", interpretError(err))
	}
	return nil
}
