package towersim

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Upload sizing. The cloud refuses bodies over 64 KiB (DESIGN §8); a 128-event batch
// (maxPullEvents) is about 9.8 KB of hex, so five of them, the SDK's most, stay below that.
const (
	batchesPerRequest = 5
	maxResponseBytes  = 64 << 10
)

// TokenSource hands out the bearer token (scope tower_access) the SDK uploads events with.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// invalidator is implemented by token sources that cache: after a 401 the relay drops the
// cached token and asks again once.
type invalidator interface {
	Invalidate()
}

// ErrNoCredentials means an upload had neither an explicit bearer nor a token source.
var ErrNoCredentials = errors.New("no access token for uploading events")

// StatusError is a non-2xx answer of the cloud's events endpoint.
type StatusError struct {
	StatusCode int
	Body       string // the start of the body, for diagnostics
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("cloud answered %d: %s", e.StatusCode, e.Body)
}

// UploadResponse is the cloud's answer to an events upload.
type UploadResponse struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// Relay is the mobile SDK of the simulator: it talks to the cloud's /sdk/v1 API over HTTP and
// to towers over the simulated BLE link. It opens sessions (cached per tower and claim until
// shortly before they expire, as the SDK does), does the handshake, pulls the tower's events
// and uploads them (hex upper-case, at most 5 batches per request, one empty batch when
// there is nothing, as the SDK does), and pulls the cloud's commands and pushes them to the
// tower (its configuration first when the tower has fallen behind the log, or when the log
// has fallen behind the tower: see PhoneLink.SyncCommands).
//
// An event is marked uploaded only after a 2xx answer; anything else leaves it queued for the
// next upload, so no event is ever lost (the cloud recognises the duplicates a lost answer
// can cause). Unlike Harbor's SDK, the simulated phones remember on the tower what they have
// uploaded and do not send it again before the cloud's acknowledgement arrives.
type Relay struct {
	baseURL string
	tokens  TokenSource
	client  *http.Client
	logger  *slog.Logger
	now     func() time.Time

	offline atomic.Bool
	mu      sync.Mutex
	cache   map[sessionKey]cachedSession
	// logChecked holds the ids of the towers whose position this phone has compared with
	// the cloud's command log (PhoneLink.checkLog); shared with offline views.
	logChecked *sync.Map
}

type sessionKey struct{ tower, claim string }

type cachedSession struct {
	payload, auth string
	seed          []byte
	expires       time.Time
}

// SessionDuration is how long the sessions the simulated SDK asks for last (Harbor's SDK
// asks for an hour).
const SessionDuration = time.Hour

// ErrOffline means the simulated phone has no network.
var ErrOffline = errors.New("the phone is offline")

// NewRelay returns a relay for the cloud at apiBaseURL. tokens may be nil, in which case
// every cloud call needs an explicit bearer.
func NewRelay(apiBaseURL string, tokens TokenSource, opts ...Option) *Relay {
	o := buildOptions(opts)
	return &Relay{
		baseURL: strings.TrimRight(apiBaseURL, "/"),
		tokens:  tokens,
		client:  o.httpClient,
		logger:  o.logger,
		now:     o.now,
		cache:   map[sessionKey]cachedSession{},

		logChecked: &sync.Map{},
	}
}

// offlineView is the same phone (its session cache) without network, for one open.
func (r *Relay) offlineView() *Relay {
	v := &Relay{baseURL: r.baseURL, tokens: r.tokens, client: r.client, logger: r.logger, now: r.now, cache: nil, logChecked: r.logChecked}
	v.offline.Store(true)
	r.mu.Lock()
	v.cache = maps.Clone(r.cache)
	r.mu.Unlock()
	return v
}

// SetOffline takes the phone off the network (true) or back on it. Offline it still talks to
// towers with the sessions it has cached; every cloud call fails with ErrOffline.
func (r *Relay) SetOffline(off bool) { r.offline.Store(off) }

// Upload sends every event of t not yet uploaded and returns how many the cloud took as new.
// A non-empty bearer is used instead of the token source. On error the events already taken
// stay marked and the rest stay queued.
func (r *Relay) Upload(ctx context.Context, t *Tower, bearer string) (int, error) {
	if len(t.PendingEvents()) == 0 {
		return 0, nil
	}
	if r.baseURL == "" {
		return 0, fmt.Errorf("upload events: no API base URL configured (%d events queued)", len(t.PendingEvents()))
	}
	l, err := r.Connect(ctx, t, towerproto.ClaimSyncPacket, bearer)
	if err != nil {
		return 0, fmt.Errorf("upload events: %w", err)
	}
	defer l.Close()
	return l.UploadEvents(ctx)
}

// Session returns the cached session of the tower and claim, or asks the cloud for one.
func (r *Relay) Session(ctx context.Context, t *Tower, claim, bearer string) (payload, auth string, seed []byte, err error) {
	k := sessionKey{t.id, claim}
	r.mu.Lock()
	c, ok := r.cache[k]
	r.mu.Unlock()
	if ok && r.now().Add(time.Minute).Before(c.expires) {
		return c.payload, c.auth, c.seed, nil
	}
	var resp struct {
		Payload     string `json:"payload"`
		PayloadAuth string `json:"payload_auth"`
		SessionSeed string `json:"session_seed"`
		TowerID     string `json:"tower_id"`
	}
	body := map[string]any{"duration": int(SessionDuration.Seconds()), "claims": []string{claim}, "version": Firmware}
	if err := r.call(ctx, http.MethodPost, "/sdk/v1/towers/"+upperID(t.id)+"/session-token", bearer, body, &resp); err != nil {
		return "", "", nil, fmt.Errorf("%w: %w", ErrNoSession, err)
	}
	seed, err = hex.DecodeString(resp.SessionSeed)
	if err != nil || resp.Payload == "" || resp.PayloadAuth == "" || !strings.EqualFold(resp.TowerID, t.id) {
		return "", "", nil, fmt.Errorf("%w: unexpected session answer", ErrNoSession)
	}
	c = cachedSession{payload: resp.Payload, auth: resp.PayloadAuth, seed: seed, expires: r.now().Add(SessionDuration)}
	r.mu.Lock()
	r.cache[k] = c
	r.mu.Unlock()
	return c.payload, c.auth, c.seed, nil
}

func upperID(id string) string { return strings.ToUpper(id) }

// post uploads batches, asking the token source again once after a 401.
func (r *Relay) post(ctx context.Context, towerID string, envs []towerproto.BatchEnvelope, bearer string) (UploadResponse, error) {
	var out UploadResponse
	err := r.call(ctx, http.MethodPost, "/sdk/v1/towers/"+upperID(towerID)+"/events", bearer, envs, &out)
	return out, err
}

// call is one cloud call with a JSON body (nil: none), asking the token source again once
// after a 401.
func (r *Relay) call(ctx context.Context, method, path, bearer string, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	fromSource := bearer == ""
	for attempt := 0; ; attempt++ {
		token := bearer
		if fromSource {
			if r.tokens == nil {
				return ErrNoCredentials
			}
			var err error
			if token, err = r.tokens.Token(ctx); err != nil {
				return fmt.Errorf("get access token: %w", err)
			}
		}
		err := r.do(ctx, method, path, token, raw, out)
		var se *StatusError
		if attempt == 0 && fromSource && errors.As(err, &se) && se.StatusCode == http.StatusUnauthorized {
			if inv, ok := r.tokens.(invalidator); ok {
				inv.Invalidate()
				continue
			}
		}
		return err
	}
}

func (r *Relay) do(ctx context.Context, method, path, token string, body []byte, out any) error {
	if r.offline.Load() {
		return ErrOffline
	}
	if r.baseURL == "" {
		return errors.New("no API base URL configured")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.baseURL+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{StatusCode: resp.StatusCode, Body: snippet(raw)}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		// A 2xx means the cloud did it; an odd body does not change that for uploads.
		r.logger.Warn("unexpected answer", "path", path, "status", resp.StatusCode, "body", snippet(raw))
	}
	return nil
}

func batchOf(towerID string, events []LoggedEvent) towerproto.Batch {
	b := towerproto.Batch{TowerID: towerID, BootEpoch: events[0].BootEpoch, Events: make([]towerproto.Event, len(events))}
	for i, e := range events {
		b.Events[i] = e.Event
	}
	return b
}

func snippet(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
