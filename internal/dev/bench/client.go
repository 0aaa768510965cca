package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// api talks to a running system over HTTP, as a client would.
type api struct {
	base   string
	client *http.Client

	mu       sync.Mutex
	clientID string
	secret   string
	token    string
	tokenAt  time.Time

	// serverErrors counts the 5xx answers by status code, for the report: a 5xx is never a
	// figure to average away (DESIGN §8: overload is a 503, nothing is a 500).
	statusMu     sync.Mutex
	serverErrors map[int]int
}

func newAPI(base, clientID, secret string) *api {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	return &api{base: strings.TrimRight(base, "/"), client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		clientID: clientID, secret: secret, serverErrors: map[int]int{}}
}

// statusCounts is the 5xx answers counted so far, by status code.
func (a *api) statusCounts() map[int]int {
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	return maps.Clone(a.serverErrors)
}

// countStatus notes a 5xx answer.
func (a *api) countStatus(code int) {
	if code < 500 {
		return
	}
	a.statusMu.Lock()
	a.serverErrors[code]++
	a.statusMu.Unlock()
}

// serverErrorsSince is the 5xx answers counted after the snapshot before was taken.
func (a *api) serverErrorsSince(before map[int]int) map[int]int {
	out := map[int]int{}
	for code, n := range a.statusCounts() {
		if d := n - before[code]; d > 0 {
			out[code] = d
		}
	}
	return out
}

// bearer returns a service_provider token, renewed before its 300 s run out.
func (a *api) bearer(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && time.Since(a.tokenAt) < 4*time.Minute {
		return a.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {a.clientID}, "client_secret": {a.secret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := a.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("get token: %w", err)
	}
	defer resp.Body.Close()
	a.countStatus(resp.StatusCode)
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("get token: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return "", fmt.Errorf("decode token: %w", err)
	}
	a.token, a.tokenAt = t.AccessToken, time.Now()
	return a.token, nil
}

// result is one HTTP exchange.
type result struct {
	status     int
	body       []byte
	header     http.Header
	latency    time.Duration
	serverTime time.Duration // from Server-Timing, when the server sent it
}

// serverPhases reads every metric of a Server-Timing header (app first, then the phases the
// handler marked).
func serverPhases(h string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, m := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(m), ";")
		_, v, ok := strings.Cut(params, "dur=")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[name] += time.Duration(f * float64(time.Millisecond))
		}
	}
	return out
}

// do sends a request with the given headers and JSON body and reads the whole answer.
func (a *api) do(ctx context.Context, method, fullURL string, headers map[string]string, body any) (result, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return result{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, fullURL, rd)
	if err != nil {
		return result{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := a.client.Do(req)
	if err != nil {
		return result{}, err
	}
	a.countStatus(resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := result{status: resp.StatusCode, body: b, header: resp.Header, latency: time.Since(start)}
	if err != nil {
		return r, err
	}
	r.serverTime = serverTiming(resp.Header.Get("Server-Timing"))
	return r, nil
}

// authed calls the API with the bench client's bearer token.
func (a *api) authed(ctx context.Context, method, path string, body any) (result, error) {
	tok, err := a.bearer(ctx)
	if err != nil {
		return result{}, err
	}
	return a.do(ctx, method, a.base+path, map[string]string{"Authorization": "Bearer " + tok}, body)
}

func serverTiming(h string) time.Duration {
	_, v, ok := strings.Cut(h, "dur=")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.Split(v, ",")[0]), 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Millisecond))
}

// openLoop calls fn rate times a second for d, each call in its own goroutine (at most
// maxInFlight at once), and measures each from its scheduled start, so a slow server
// cannot hide its queueing (no coordinated omission).
func openLoop(ctx context.Context, rate float64, d time.Duration, maxInFlight int, fn func(ctx context.Context, i int, scheduled time.Time)) (sent, skipped int) {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return sent, skipped
			case <-time.After(wait):
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			skipped++ // the client itself is saturated: count it rather than wait
			continue
		}
		sent++
		wg.Add(1)
		go func(i int, at time.Time) {
			defer func() { <-sem; wg.Done() }()
			fn(ctx, i, at)
		}(i, at)
	}
	wg.Wait()
	return sent, skipped
}
