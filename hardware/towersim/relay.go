package towersim

import (
	"bytes"
	"context"
	"crypto/rand"
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
// tower (its configuration first when the tower has fallen behind the log).
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
	}
}

// offlineView is the same phone (its session cache) without network, for one open.
func (r *Relay) offlineView() *Relay {
	v := &Relay{baseURL: r.baseURL, tokens: r.tokens, client: r.client, logger: r.logger, now: r.now, cache: nil}
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

// PhoneLink is the phone's end of a BLE link with a tower.
type PhoneLink struct {
	r      *Relay
	t      *Tower
	link   *Link
	keys   towerproto.ChannelKeys
	seq    uint64
	bearer string
}

// Connect opens a BLE link to the tower with a session of the claim: the session (cached or
// from the cloud), then the handshake.
func (r *Relay) Connect(ctx context.Context, t *Tower, claim, bearer string) (*PhoneLink, error) {
	payload, auth, seed, err := r.Session(ctx, t, claim, bearer)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, towerproto.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("request nonce: %w", err)
	}
	link, reply, err := t.Connect(strings.ToUpper(payload), strings.ToUpper(auth), nonce)
	if err != nil {
		if errors.Is(err, ErrInvalidSession) {
			r.mu.Lock()
			delete(r.cache, sessionKey{t.id, claim})
			r.mu.Unlock()
		}
		return nil, err
	}
	_, keys, err := towerproto.OpenGrant(seed, nonce, reply)
	if err != nil {
		return nil, fmt.Errorf("%w: the grant does not open with the session seed: %w", ErrInvalidSession, err)
	}
	return &PhoneLink{r: r, t: t, link: link, keys: keys, bearer: bearer}, nil
}

// Link returns the tower's end (the simulator sets the physical door on it).
func (p *PhoneLink) Link() *Link { return p.link }

// Close ends the session on the link.
func (p *PhoneLink) Close() {
	_, _ = p.send(context.Background(), Message{Type: towerproto.MsgTerminate})
}

// send seals a message, lets the tower answer it and opens the answer. A refusal of the
// tower comes back as an error wrapping its *Refusal.
func (p *PhoneLink) send(ctx context.Context, m Message) (Message, error) {
	p.seq++
	m.Seq = p.seq
	packet, auth, err := towerproto.SealPacket(p.keys, m, rand.Reader)
	if err != nil {
		return Message{}, fmt.Errorf("seal message: %w", err)
	}
	ans, ansAuth, err := p.link.Exchange(ctx, packet, auth)
	if err != nil {
		return Message{}, err
	}
	var out Message
	if err := towerproto.OpenPacket(p.keys, ans, ansAuth, &out); err != nil {
		return Message{}, fmt.Errorf("open the tower's answer: %w", err)
	}
	if out.Seq != m.Seq {
		return Message{}, fmt.Errorf("the tower answered message %d to message %d", out.Seq, m.Seq)
	}
	if out.Type == towerproto.MsgError {
		for _, ref := range refusals {
			if ref.Code == out.Code {
				return out, fmt.Errorf("%w: %s", ref, out.Message)
			}
		}
		return out, fmt.Errorf("tower error %s: %s", out.Code, out.Message)
	}
	return out, nil
}

// OpenWithToken presents a locker token over the link.
func (p *PhoneLink) OpenWithToken(ctx context.Context, payloadHex, authHex string) (Message, error) {
	pl, err1 := towerproto.DecodeHex(payloadHex, 1024)
	au, err2 := towerproto.DecodeHex(authHex, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return p.send(ctx, Message{Type: towerproto.MsgOpenWithToken, Payload: pl, PayloadAuth: au})
}

// MaintenanceOpen opens a locker without a token (a technician's session).
func (p *PhoneLink) MaintenanceOpen(ctx context.Context, lockerID int64) (Message, error) {
	return p.send(ctx, Message{Type: towerproto.MsgMaintenanceOpen, LockerID: lockerID})
}

// UploadEvents pulls the tower's events not yet uploaded and sends them to the cloud, at most
// batchesPerRequest batches a request; with nothing to send it still uploads the empty pull
// once, as the SDK does. It returns how many events the cloud took as new.
func (p *PhoneLink) UploadEvents(ctx context.Context) (int, error) {
	p.t.uploadMu.Lock()
	defer p.t.uploadMu.Unlock()
	status, err := p.send(ctx, Message{Type: towerproto.MsgSyncStatus})
	if err != nil {
		return 0, fmt.Errorf("sync status: %w", err)
	}
	accepted := 0
	var epoch uint32
	var start uint64
	for round := 0; ; round++ {
		var envs []towerproto.BatchEnvelope
		var events []LoggedEvent
		for len(envs) < batchesPerRequest {
			ans, err := p.send(ctx, Message{Type: towerproto.MsgSyncPull, BootEpoch: epoch, SyncEventStart: start})
			if err != nil {
				return accepted, fmt.Errorf("pull events: %w", err)
			}
			if ans.SyncEventCount == 0 {
				if round == 0 && len(envs) == 0 {
					envs = append(envs, envelope(ans))
				}
				break
			}
			envs = append(envs, envelope(ans))
			for i := range ans.SyncEventCount {
				events = append(events, LoggedEvent{BootEpoch: ans.BootEpoch, Event: towerproto.Event{Seq: ans.SyncEventStart + uint64(i)}})
			}
			epoch, start = ans.BootEpoch, ans.SyncEventStart+uint64(ans.SyncEventCount)
		}
		if len(envs) == 0 {
			break
		}
		resp, err := p.r.post(ctx, p.t.id, envs, p.bearer)
		if err != nil {
			return accepted, fmt.Errorf("upload events: %w", err)
		}
		accepted += resp.Accepted
		if len(events) == 0 {
			break
		}
		if err := p.t.markUploaded(events); err != nil {
			// The cloud has the events; at worst they are sent again after a restart and
			// counted as duplicates.
			p.r.logger.Error("record upload", "tower", p.t.id, "error", err)
		}
		p.r.logger.Info("events uploaded", "tower", p.t.id, "events", len(events), "accepted", resp.Accepted,
			"duplicates", resp.Duplicates, "towerEventsUnacknowledged", status.SyncEventCount)
	}
	return accepted, nil
}

func envelope(m Message) towerproto.BatchEnvelope {
	return towerproto.BatchEnvelope{SyncEventStart: m.SyncEventStart, SyncEventCount: m.SyncEventCount,
		Payload: strings.ToUpper(hex.EncodeToString(m.Payload)), PayloadAuth: strings.ToUpper(hex.EncodeToString(m.PayloadAuth))}
}

// SyncCommands pulls the commands the tower has not applied from the cloud and pushes them;
// when the tower has fallen behind the log (new or reset) it pushes the tower's
// configuration first. It returns how many commands the tower applied.
func (p *PhoneLink) SyncCommands(ctx context.Context) (int, error) {
	var batches []struct {
		TowerID          string `json:"towerId"`
		SyncCommandStart int64  `json:"syncCommandStart"`
		SyncCommandCount int    `json:"syncCommandCount"`
		Payload          string `json:"payload"`
		PayloadAuth      string `json:"payloadAuth"`
	}
	status, err := p.send(ctx, Message{Type: towerproto.MsgSyncStatus})
	if err != nil {
		return 0, fmt.Errorf("sync status: %w", err)
	}
	applied := 0
	if status.SyncCommandStart <= 1 {
		// A new or reset tower has applied nothing: its full state first (none yet: 404).
		n, err := p.configure(ctx)
		var se *StatusError
		if err != nil && !(errors.As(err, &se) && se.StatusCode == http.StatusNotFound) {
			return n, err
		}
		applied += n
	}
	if err := p.r.call(ctx, http.MethodGet, "/sdk/v1/towers/"+upperID(p.t.id)+"/commands", p.bearer, nil, &batches); err != nil {
		return applied, fmt.Errorf("get commands: %w", err)
	}
	for i := 0; i < len(batches); i++ {
		b := batches[i]
		pl, err1 := hex.DecodeString(b.Payload)
		au, err2 := hex.DecodeString(b.PayloadAuth)
		if err := errors.Join(err1, err2); err != nil {
			return applied, fmt.Errorf("decode command batch: %w", err)
		}
		ans, err := p.send(ctx, Message{Type: towerproto.MsgSyncPush, Payload: pl, PayloadAuth: au})
		if err != nil && ans.Code == "command_gap" && i == 0 {
			n, err := p.configure(ctx)
			applied += n
			if err != nil {
				return applied, err
			}
			ans, err = p.send(ctx, Message{Type: towerproto.MsgSyncPush, Payload: pl, PayloadAuth: au})
			if err != nil {
				return applied, fmt.Errorf("push commands after the configuration: %w", err)
			}
		} else if err != nil {
			return applied, fmt.Errorf("push commands: %w", err)
		}
		applied += ans.Applied
	}
	return applied, nil
}

// configure pushes the tower's full configuration from the cloud.
func (p *PhoneLink) configure(ctx context.Context) (int, error) {
	var conf struct {
		TowerID  string   `json:"towerId"`
		Commands []string `json:"commands"`
	}
	if err := p.r.call(ctx, http.MethodGet, "/sdk/v1/towers/"+upperID(p.t.id)+"/configuration", p.bearer, nil, &conf); err != nil {
		return 0, fmt.Errorf("get configuration: %w", err)
	}
	applied := 0
	for _, c := range conf.Commands {
		pkt, err := hex.DecodeString(c)
		if err != nil {
			return applied, fmt.Errorf("decode configuration: %w", err)
		}
		ans, err := p.send(ctx, Message{Type: towerproto.MsgConfigure, Packet: pkt})
		if err != nil {
			return applied, fmt.Errorf("push configuration: %w", err)
		}
		applied += ans.Applied
	}
	return applied, nil
}

// ResetEvents resets the tower's event log over the link (a configure permission is needed)
// and reports it to the cloud.
func (p *PhoneLink) ResetEvents(ctx context.Context, reason string) error {
	if _, err := p.send(ctx, Message{Type: towerproto.MsgResetEvents}); err != nil {
		return fmt.Errorf("reset the tower's events: %w", err)
	}
	var tower map[string]any
	if err := p.r.call(ctx, http.MethodPost, "/sdk/v1/towers/"+upperID(p.t.id)+"/reset-events", p.bearer,
		map[string]any{"reason": reason}, &tower); err != nil {
		return fmt.Errorf("report the reset: %w", err)
	}
	return nil
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
