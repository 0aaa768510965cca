package towersim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Upload sizing. The cloud refuses bodies over 64 KiB (DESIGN §8); a 128-event batch is
// about 9.8 KB of hex, so four of them stay well below that.
const (
	eventsPerBatch    = 128
	batchesPerRequest = 4
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

// Relay is the SDK part that uploads a tower's events:
// POST {apiBaseURL}/api/v1/towers/{tower_id}/events with a JSON array of signed batches.
// An event is marked uploaded only after a 2xx answer; anything else leaves it queued for the
// next upload, so no event is ever lost (the cloud recognises the duplicates a lost answer
// can cause).
type Relay struct {
	baseURL string
	tokens  TokenSource
	client  *http.Client
	logger  *slog.Logger
}

// NewRelay returns a relay for the cloud at apiBaseURL. tokens may be nil, in which case
// every upload needs an explicit bearer.
func NewRelay(apiBaseURL string, tokens TokenSource, opts ...Option) *Relay {
	o := buildOptions(opts)
	return &Relay{
		baseURL: strings.TrimRight(apiBaseURL, "/"),
		tokens:  tokens,
		client:  o.httpClient,
		logger:  o.logger,
	}
}

// Upload sends every event of t not yet uploaded and returns how many the cloud took. A
// non-empty bearer is used instead of the token source. On error the events already taken
// stay marked and the rest stay queued.
func (r *Relay) Upload(ctx context.Context, t *Tower, bearer string) (int, error) {
	t.uploadMu.Lock()
	defer t.uploadMu.Unlock()

	pending := t.PendingEvents()
	if len(pending) == 0 {
		return 0, nil
	}
	if r.baseURL == "" {
		return 0, fmt.Errorf("upload events: no API base URL configured (%d events queued)", len(pending))
	}
	batches := splitBatches(pending)
	uploaded := 0
	for start := 0; start < len(batches); start += batchesPerRequest {
		chunk := batches[start:min(start+batchesPerRequest, len(batches))]
		envs := make([]towerproto.BatchEnvelope, 0, len(chunk))
		var events []LoggedEvent
		for _, b := range chunk {
			env, err := towerproto.EncodeBatch(batchOf(t.id, b), t.eventKey)
			if err != nil {
				return uploaded, fmt.Errorf("upload events: %w", err)
			}
			envs = append(envs, env)
			events = append(events, b...)
		}
		resp, err := r.post(ctx, t.id, envs, bearer)
		if err != nil {
			return uploaded, fmt.Errorf("upload events: %w", err)
		}
		if err := t.markUploaded(events); err != nil {
			// The cloud has the events; at worst they are sent again after a restart and
			// counted as duplicates.
			r.logger.Error("record upload", "tower", t.id, "error", err)
		}
		uploaded += len(events)
		r.logger.Info("events uploaded", "tower", t.id, "events", len(events),
			"accepted", resp.Accepted, "duplicates", resp.Duplicates)
	}
	return uploaded, nil
}

// post sends one request, asking the token source again once after a 401.
func (r *Relay) post(ctx context.Context, towerID string, envs []towerproto.BatchEnvelope, bearer string) (UploadResponse, error) {
	body, err := json.Marshal(envs)
	if err != nil {
		return UploadResponse{}, fmt.Errorf("encode batches: %w", err)
	}
	fromSource := bearer == ""
	for attempt := 0; ; attempt++ {
		token := bearer
		if fromSource {
			if r.tokens == nil {
				return UploadResponse{}, ErrNoCredentials
			}
			if token, err = r.tokens.Token(ctx); err != nil {
				return UploadResponse{}, fmt.Errorf("get access token: %w", err)
			}
		}
		resp, err := r.send(ctx, towerID, body, token)
		var se *StatusError
		if attempt == 0 && fromSource && errors.As(err, &se) && se.StatusCode == http.StatusUnauthorized {
			if inv, ok := r.tokens.(invalidator); ok {
				inv.Invalidate()
				continue
			}
		}
		return resp, err
	}
}

func (r *Relay) send(ctx context.Context, towerID string, body []byte, token string) (UploadResponse, error) {
	u := r.baseURL + "/api/v1/towers/" + url.PathEscape(towerID) + "/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return UploadResponse{}, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := r.client.Do(req)
	if err != nil {
		return UploadResponse{}, fmt.Errorf("post events: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return UploadResponse{}, fmt.Errorf("read events answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return UploadResponse{}, &StatusError{StatusCode: resp.StatusCode, Body: snippet(raw)}
	}
	var out UploadResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		// A 2xx means the cloud has the events; an odd body does not change that.
		r.logger.Warn("unexpected events answer", "tower", towerID, "status", resp.StatusCode, "body", snippet(raw))
	}
	return out, nil
}

// splitBatches cuts events (sorted by epoch and seq) into runs of consecutive sequence
// numbers of one boot epoch, at most eventsPerBatch long.
func splitBatches(events []LoggedEvent) [][]LoggedEvent {
	var out [][]LoggedEvent
	for i, e := range events {
		if i == 0 {
			out = append(out, []LoggedEvent{e})
			continue
		}
		last := out[len(out)-1]
		prev := last[len(last)-1]
		if e.BootEpoch != prev.BootEpoch || e.Seq != prev.Seq+1 || len(last) == eventsPerBatch {
			out = append(out, []LoggedEvent{e})
			continue
		}
		out[len(out)-1] = append(last, e)
	}
	return out
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
