package gateway_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/idemhash"
)

// The gateway never acts on a door without a durable record around it (DESIGN §7): these
// tests look at its SQLite file through a connection of their own, as another process would,
// so what they see is what is committed.

// openGatewayDB opens a gateway's database file beside the gateway.
func openGatewayDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// keyRecord is a key's row in the gateway's database.
type keyRecord struct {
	found        bool
	method, path string
	status       int // 0 while the result is not recorded
	body         string
}

func readKeyRecord(ctx context.Context, db *sql.DB, key string) (keyRecord, error) {
	var rec keyRecord
	var method, path sql.NullString
	var status sql.NullInt64
	var body []byte
	err := db.QueryRowContext(ctx, `SELECT method, path, status, body FROM idempotent_requests WHERE key = ?`, key).
		Scan(&method, &path, &status, &body)
	if err == sql.ErrNoRows {
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("read key %q: %w", key, err)
	}
	return keyRecord{found: true, method: method.String, path: path.String, status: int(status.Int64), body: string(body)}, nil
}

// openLines counts the event-log lines with message whose idempotencyKey is key.
func openLines(ctx context.Context, db *sql.DB, message, key string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM event_log WHERE message = ? AND json_extract(fields, '$.idempotencyKey') = ?`,
		message, key).Scan(&n)
	return n, err
}

// pulseWatcher calls onOpen before its controller is told to open a lock.
type pulseWatcher struct {
	lockctl.Controller
	onOpen func()
}

func (p pulseWatcher) Open(ctx context.Context, channel int) error {
	p.onOpen()
	return p.Controller.Open(ctx, channel)
}

// answerWatcher calls onAnswer before a keyed request's answer is written.
type answerWatcher struct {
	http.ResponseWriter
	onAnswer func(status int)
	written  bool
}

func (a *answerWatcher) WriteHeader(status int) {
	if !a.written {
		a.written = true
		a.onAnswer(status)
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerWatcher) Write(b []byte) (int, error) {
	if !a.written {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

// The order of a keyed open's records: its intent is committed before the lock is pulsed,
// and its event-log line and its result before its answer is written.
func TestKeyedOpenRecordsIntentBeforePulseAndResultBeforeAnswer(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"maintenance", "transaction"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			dbPath := filepath.Join(t.TempDir(), "gateway.db")
			db := openGatewayDB(t, dbPath)
			const key = "order-7-open"

			var mu sync.Mutex
			var atPulse, atAnswer []keyRecord
			var linesAtPulse, linesAtAnswer []int
			var watchErrs []error
			look := func(records *[]keyRecord, lines *[]int) {
				ctx := context.Background()
				rec, err := readKeyRecord(ctx, db, key)
				n, lerr := openLines(ctx, db, "door opened", key)
				mu.Lock()
				defer mu.Unlock()
				*records, *lines = append(*records, rec), append(*lines, n)
				watchErrs = append(watchErrs, err, lerr)
			}
			gw := gatewaytest.Start(t, gatewaytest.Options{
				Preset: gateway.PresetOneBank,
				DBPath: dbPath,
				WrapController: func(c lockctl.Controller) lockctl.Controller {
					return pulseWatcher{Controller: c, onOpen: func() { look(&atPulse, &linesAtPulse) }}
				},
				WrapHandler: func(next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if r.Header.Get("Idempotency-Key") != key {
							next.ServeHTTP(w, r)
							return
						}
						next.ServeHTTP(&answerWatcher{ResponseWriter: w, onAnswer: func(int) { look(&atAnswer, &linesAtAnswer) }}, r)
					})
				},
			})
			path := "/lockers/205/open"
			lockerID := 205
			if via == "transaction" {
				tx := createTransaction(t, gw, map[string]any{"transactionId": "order-7"})
				path, lockerID = "/transactions/order-7/open", tx.LockerID
			}

			r := keyed(t.Context(), t, gw, http.MethodPost, path, key, "")
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			assert.Equal(t, gateway.IdempotencyKeysHonoured, r.header.Get(gateway.IdempotencyKeysHeader))
			assert.Equal(t, 1, gw.Sim.Opens(lockerID))

			mu.Lock()
			defer mu.Unlock()
			for _, err := range watchErrs {
				require.NoError(t, err)
			}
			require.Len(t, atPulse, 1, "one pulse")
			assert.Equal(t, keyRecord{found: true, method: http.MethodPost, path: path}, atPulse[0],
				"when the lock is pulsed, the intent is committed and the result is not")
			assert.Zero(t, linesAtPulse[0], "no event-log line before the pulse")
			require.Len(t, atAnswer, 1, "one answer")
			assert.Equal(t, keyRecord{found: true, method: http.MethodPost, path: path, status: http.StatusOK, body: string(r.body)}, atAnswer[0],
				"when the answer is written, the result is committed: the very answer the caller got")
			assert.Equal(t, 1, linesAtAnswer[0], "the open's event-log line is written before the answer")
		})
	}
}

// lockedBuffer is a log sink for a gateway's process log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sendOpen sends a door open (with key as its Idempotency-Key unless empty) and delivers
// the answer on the channel it returns: a reply with status 0 when none came.
func sendOpen(ctx context.Context, gw *gatewaytest.Gateway, path, key string) <-chan reply {
	out := make(chan reply, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+path, nil)
		if err != nil {
			out <- reply{}
			return
		}
		req.Header.Set("Authorization", "Bearer "+gw.Secret)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- reply{}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			out <- reply{}
			return
		}
		out <- reply{status: resp.StatusCode, header: resp.Header, body: body}
	}()
	return out
}

// A graceful stop with door opens in flight: it lets them finish — a keyed open whose
// caller is waiting, one whose caller left, and an open without a key — and each caller
// still waiting gets its 200; their results and event-log lines are stored before the
// database closes, so after the restart a repeat gets the open's answer and the log has
// every open.
func TestGracefulStopLetsOpensInFlightFinish(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	gw := gatewaytest.Start(t, gatewaytest.Options{
		Preset: gateway.PresetOneBank,
		Open:   &gateway.OpenPolicy{AttemptTimeout: 10 * time.Second, Attempts: 3, RetryDelay: 20 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	// Each open takes longer at the controller than the grace a plain http.Server shutdown
	// gives (gateway.Serve), and well under one attempt.
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerSlow, DelayMs: int((gateway.ShutdownGrace + 500*time.Millisecond).Milliseconds())})

	waiting := sendOpen(context.Background(), gw, "/lockers/205/open", "stop-waits")
	plain := sendOpen(context.Background(), gw, "/lockers/206/open", "")
	leftCtx, leave := context.WithCancel(t.Context())
	left := sendOpen(leftCtx, gw, "/lockers/207/open", "stop-caller-left")
	require.Eventually(t, func() bool { return gw.Sim.OpenAttempts() == 3 }, 10*time.Second, 5*time.Millisecond,
		"the three opens reached the controller")
	leave()
	assert.Zero(t, (<-left).status, "the caller left before the answer")

	gw.Restart(t) // a graceful stop, then a start on the same database

	for name, ch := range map[string]<-chan reply{"keyed": waiting, "without a key": plain} {
		r := <-ch
		require.Equal(t, http.StatusOK, r.status, "%s: the caller got its answer through the stop; body: %s", name, r.body)
		op := decode[gateway.LockerOperationResponse](t, r)
		assert.True(t, op.Success && op.DoorOpen, "%s: %s", name, r.body)
	}
	for _, id := range []int{205, 206, 207} {
		assert.Equal(t, 1, gw.Sim.Opens(id), "locker %d moved once", id)
	}

	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	for _, k := range []struct{ key, path string }{{"stop-waits", "/lockers/205/open"}, {"stop-caller-left", "/lockers/207/open"}} {
		r := keyed(t.Context(), t, gw, http.MethodPost, k.path, k.key, "")
		require.Equal(t, http.StatusOK, r.status, "%s: the result was stored before the database closed; body: %s", k.key, r.body)
		assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		assert.Equal(t, gateway.IdempotencyKeysHonoured, r.header.Get(gateway.IdempotencyKeysHeader))
	}
	for _, id := range []int{205, 206, 207} {
		assert.Equal(t, 1, gw.Sim.Opens(id), "locker %d: a repeat does not pulse it again", id)
	}

	entries := decode[[]gateway.LogEntry](t, call(t, gw, http.MethodGet, "/system/logs?limit=50", nil))
	opened := map[float64]any{}
	for _, e := range entries {
		if e.Message == "door opened" {
			opened[e.Fields["lockerId"].(float64)] = e.Fields["idempotencyKey"]
		}
	}
	assert.Equal(t, map[float64]any{205: "stop-waits", 206: nil, 207: "stop-caller-left"}, opened,
		"every open's event-log line was stored, a keyed one naming its key")

	out := logs.String()
	assert.NotContains(t, out, "database is closed")
	assert.NotContains(t, out, "stop grace ran out")
	closed := strings.Index(out, "gateway database closed")
	require.GreaterOrEqual(t, closed, 0, "the first run closed its database")
	assert.Equal(t, 3, strings.Count(out[:closed], `msg="door opened"`), "every open finished before the database closed")
}

// Once its stop has begun, the gateway begins nothing new: a new request is refused with 503
// GATEWAY_STOPPING, having done nothing, while a repeat of a key is still answered from what
// is recorded — the open in flight's answer once it finished, an earlier open's stored
// answer. Once its database is closed, a keyed request cannot be looked up and answers 500
// REQUEST_OUTCOME_UNKNOWN, never "not carried out".
func TestStoppingGatewayBeginsNothingNew(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{
		Preset: gateway.PresetOneBank,
		Open:   &gateway.OpenPolicy{AttemptTimeout: 10 * time.Second, Attempts: 3, RetryDelay: 20 * time.Millisecond},
	})
	before := keyed(t.Context(), t, gw, http.MethodPost, "/lockers/207/open", "done-before", "")
	require.Equal(t, http.StatusOK, before.status, "body: %s", before.body)
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerSlow, DelayMs: 500})
	inFlight := sendOpen(context.Background(), gw, "/lockers/205/open", "in-flight")
	require.Eventually(t, func() bool { return gw.Sim.OpenAttempts() == 2 }, 10*time.Second, 5*time.Millisecond)

	srv := gw.Server()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	serve := func(method, path, key string) reply {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+gw.Secret)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	require.Eventually(t, func() bool { return serve(http.MethodGet, "/health", "").status == http.StatusServiceUnavailable },
		10*time.Second, time.Millisecond, "the stop began")
	select {
	case <-closed:
		t.Fatal("the stop ended before the open in flight did")
	default:
	}

	for _, key := range []string{"", "new-key"} {
		r := serve(http.MethodPost, "/lockers/206/open", key)
		e := requireError(t, r, http.StatusServiceUnavailable, gateway.CodeGatewayStopping)
		assert.Empty(t, e.Details)
		assert.Equal(t, gateway.IdempotencyKeysHonoured, r.header.Get(gateway.IdempotencyKeysHeader))
	}
	stored := serve(http.MethodPost, "/lockers/207/open", "done-before")
	require.Equal(t, http.StatusOK, stored.status, "a stored answer is still given; body: %s", stored.body)
	assert.Equal(t, string(before.body), string(stored.body))
	assert.Equal(t, "true", stored.header.Get("Idempotent-Replayed"))
	repeat := serve(http.MethodPost, "/lockers/205/open", "in-flight")
	require.Equal(t, http.StatusOK, repeat.status, "a repeat of the call in flight waits for its answer; body: %s", repeat.body)
	assert.Equal(t, "true", repeat.header.Get("Idempotent-Replayed"))

	r := <-inFlight
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	assert.Equal(t, string(r.body), string(repeat.body))
	require.NoError(t, <-closed)
	assert.Equal(t, 1, gw.Sim.Opens(205))
	assert.Zero(t, gw.Sim.Opens(206), "the refused opens did nothing")
	assert.Equal(t, 1, gw.Sim.Opens(207))
	rec, err := readKeyRecord(t.Context(), openGatewayDB(t, gw.DBPath), "new-key")
	require.NoError(t, err)
	assert.False(t, rec.found, "a refused request leaves no record: its repeat runs")

	// The database is closed now.
	requireError(t, serve(http.MethodPost, "/lockers/207/open", "done-before"), http.StatusInternalServerError, gateway.CodeRequestOutcomeUnknown)
	requireError(t, serve(http.MethodPost, "/lockers/206/open", ""), http.StatusServiceUnavailable, gateway.CodeGatewayStopping)
}

// recordIntent writes a keyed request's intent into a gateway's database as a run that
// stopped between its intent and its result would have left it.
func recordIntent(t *testing.T, gw *gatewaytest.Gateway, key, method, path, body string) {
	t.Helper()
	_, err := openGatewayDB(t, gw.DBPath).ExecContext(t.Context(),
		`INSERT INTO idempotent_requests (key, request_hash, method, path, created_at) VALUES (?, ?, ?, ?, ?)`,
		key, idemhash.Sum(method, path, []byte(body)), method, path, time.Now().UTC().Format(time.RFC3339Nano))
	require.NoError(t, err)
}

// A keyed request found interrupted after a restart (its intent recorded, its result not)
// reads the door before it answers: open → the open's own success answer; shut → 500
// REQUEST_OUTCOME_UNKNOWN; both kept for later repeats. A door that cannot be read answers
// REQUEST_OUTCOME_UNKNOWN and is read again by the next repeat. The door is never pulsed.
func TestInterruptedKeyedOpenReadsTheDoor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		via         string
		doorOpen    bool // the interrupted run pulsed the lock
		unreadable  bool // the controller cannot be read at the first repeat
		wantStatus  int
		wantLogLine string
	}{
		{name: "maintenance open, door reads open", via: "maintenance", doorOpen: true,
			wantStatus: http.StatusOK, wantLogLine: "door open confirmed after a restart: the door reads open"},
		{name: "open by transaction, door reads open", via: "transaction", doorOpen: true,
			wantStatus: http.StatusOK, wantLogLine: "door open confirmed after a restart: the door reads open"},
		{name: "maintenance open, door reads shut", via: "maintenance",
			wantStatus: http.StatusInternalServerError, wantLogLine: "door open unconfirmed after a restart: the door reads shut"},
		{name: "open by transaction, door reads shut", via: "transaction",
			wantStatus: http.StatusInternalServerError, wantLogLine: "door open unconfirmed after a restart: the door reads shut"},
		{name: "door cannot be read", via: "maintenance", doorOpen: true, unreadable: true,
			wantStatus: http.StatusInternalServerError, wantLogLine: "door open unconfirmed after a restart: the door cannot be read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
			path, lockerID := "/lockers/205/open", 205
			if tc.via == "transaction" {
				tx := createTransaction(t, gw, map[string]any{"transactionId": "order-9"})
				path, lockerID = "/transactions/order-9/open", tx.LockerID
			}
			// What a completed open answers, from another locker's open.
			other := call(t, gw, http.MethodPost, "/lockers/208/open", nil)
			require.Equal(t, http.StatusOK, other.status)
			wantOpened := strings.Replace(string(other.body), `"lockerId":208`, fmt.Sprintf(`"lockerId":%d`, lockerID), 1)
			if tc.doorOpen {
				// The interrupted run's pulse (its answer and result were never recorded); the
				// one-bank layout has locker 20N on channel N of CTL-1.
				require.NoError(t, gw.Sim.Controller("CTL-1").Open(t.Context(), lockerID-200))
				d, _ := gw.Sim.Door(lockerID)
				require.True(t, d.Open)
			}
			recordIntent(t, gw, "interrupted-1", http.MethodPost, path, "")
			gw.Restart(t)
			opensBefore := gw.Sim.Opens(lockerID)
			if tc.unreadable {
				gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerUnreachable})
			}

			first := keyed(t.Context(), t, gw, http.MethodPost, path, "interrupted-1", "")
			assert.Equal(t, gateway.IdempotencyKeysHonoured, first.header.Get(gateway.IdempotencyKeysHeader))
			assert.Equal(t, "true", first.header.Get("Idempotent-Replayed"), "the answer is the earlier request's")
			if tc.wantStatus == http.StatusOK {
				require.Equal(t, http.StatusOK, first.status, "body: %s", first.body)
				assert.JSONEq(t, wantOpened, string(first.body), "the open's own success answer")
				assert.Equal(t, other.header.Get("Content-Type"), first.header.Get("Content-Type"))
			} else {
				e := requireError(t, first, tc.wantStatus, gateway.CodeRequestOutcomeUnknown)
				assert.EqualValues(t, lockerID, e.Details["lockerId"])
			}
			assert.Equal(t, opensBefore, gw.Sim.Opens(lockerID), "the door is read, never pulsed again")

			entries := decode[[]gateway.LogEntry](t, call(t, gw, http.MethodGet, "/system/logs?limit=5", nil))
			var line *gateway.LogEntry
			for i := range entries {
				if entries[i].Message == tc.wantLogLine {
					line = &entries[i]
					break
				}
			}
			require.NotNil(t, line, "the event log says how the open was settled: %+v", entries)
			assert.Equal(t, "interrupted-1", line.Fields["idempotencyKey"])
			assert.EqualValues(t, lockerID, line.Fields["lockerId"])
			assert.Equal(t, tc.via, line.Fields["via"])

			if tc.unreadable {
				// Not kept: once the controller answers, the next repeat reads the door.
				gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
				again := keyed(t.Context(), t, gw, http.MethodPost, path, "interrupted-1", "")
				require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
				assert.JSONEq(t, wantOpened, string(again.body))
				first = again
			}
			// Kept: every later repeat gets the same answer, byte for byte, after a restart too.
			gw.Restart(t)
			again := keyed(t.Context(), t, gw, http.MethodPost, path, "interrupted-1", "")
			assert.Equal(t, first.status, again.status)
			assert.Equal(t, string(first.body), string(again.body))
			assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			assert.Equal(t, gateway.IdempotencyKeysHonoured, again.header.Get(gateway.IdempotencyKeysHeader))
			assert.Equal(t, opensBefore, gw.Sim.Opens(lockerID))
		})
	}
}

// A mutation other than a door open found interrupted has no read that settles it as
// safely: it answers 500 REQUEST_OUTCOME_UNKNOWN, as every repeat does.
func TestInterruptedKeyedMutationOtherThanAnOpenIsUnknown(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	const body = `{"outOfService":true}`
	recordIntent(t, gw, "patch-1", http.MethodPatch, "/lockers/205", body)
	gw.Restart(t)
	for range 2 {
		r := keyed(t.Context(), t, gw, http.MethodPatch, "/lockers/205", "patch-1", body)
		requireError(t, r, http.StatusInternalServerError, gateway.CodeRequestOutcomeUnknown)
		assert.Equal(t, gateway.IdempotencyKeysHonoured, r.header.Get(gateway.IdempotencyKeysHeader))
	}
	requireError(t, keyed(t.Context(), t, gw, http.MethodPatch, "/lockers/205", "patch-1", `{"outOfService":false}`),
		http.StatusUnprocessableEntity, gateway.CodeIdempotencyKeyReused)
}
