package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Terminal states of a gateway request (DESIGN §6.2).
var terminalStates = map[string]bool{"completed": true, "rejected": true, "dispatch_failed": true, "gateway_unresponsive": true}

var httpClient = &http.Client{
	Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute},
	Timeout:   90 * time.Second,
}

// answer is one HTTP exchange with the system.
type answer struct {
	status    int
	header    http.Header
	body      []byte
	requestID string // X-Request-Id
	state     string // X-Request-State
	replayed  bool   // Idempotent-Replayed: true
	at        time.Time
}

// terminal reports whether the answer is a gateway request's terminal outcome.
func (a answer) terminal() bool { return terminalStates[a.state] }

func send(ctx context.Context, method, u string, headers map[string]string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return answer{}, fmt.Errorf("read answer: %w", err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b, requestID: resp.Header.Get("X-Request-Id"),
		state: resp.Header.Get("X-Request-State"), replayed: resp.Header.Get("Idempotent-Replayed") == "true", at: time.Now()}, nil
}

// cloud is a customer's backend on the gateway cloud API.
type cloud struct {
	base string // http://host:port/api/customer/v1
	key  string
}

func (c *cloud) do(ctx context.Context, method, path string, body []byte, headers map[string]string) (answer, error) {
	h := map[string]string{"X-API-Key": c.key}
	for k, v := range headers {
		h[k] = v
	}
	return send(ctx, method, c.base+path, h, body)
}

// openPath is the cloud path that opens a gateway locker.
func openPath(locationID int64, lockerID int) string {
	return fmt.Sprintf("/locations/%d/lockers/%d/open", locationID, lockerID)
}

// settle polls a gateway request until it is terminal or ctx ends, riding out errors (the
// apiserver or Postgres may be down for a while). It returns the terminal answer.
func (c *cloud) settle(ctx context.Context, id string, wait int) (answer, error) {
	var last error
	for {
		a, err := c.do(ctx, http.MethodGet, "/requests/"+id, nil, map[string]string{"Prefer": "wait=" + strconv.Itoa(wait)})
		switch {
		case err == nil && a.terminal():
			return a, nil
		case err == nil && a.status == http.StatusOK:
			// Still pending: the long poll ran out; ask again at once.
			continue
		case err == nil:
			last = fmt.Errorf("poll %s: HTTP %d: %s", id, a.status, truncate(a.body))
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			return answer{}, fmt.Errorf("request %s not terminal: %w (last: %v)", id, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// untilAnswered sends a mutating call with its Idempotency-Key until it gets the request's
// terminal outcome, as a careful client does: errors and 5xx without a request state are
// retried with the same key, a 202 is sent again (a replay waits like the first call).
// It records every exchange in the outcome.
func (c *cloud) untilAnswered(ctx context.Context, method, path string, body []byte, key string, wait int) clientOutcome {
	o := clientOutcome{key: key, method: method, path: path, body: body, started: time.Now(), ids: map[string]bool{}, failures: map[string]int{}}
	h := map[string]string{"Idempotency-Key": key, "Prefer": "wait=" + strconv.Itoa(wait)}
	for {
		a, err := c.do(ctx, method, path, body, h)
		o.sends++
		switch {
		case err != nil:
			o.errors++
			o.lastErr = err.Error()
			o.failures[failureKind(0, nil)]++
		case a.requestID == "":
			o.errors++
			o.lastErr = fmt.Sprintf("HTTP %d: %s", a.status, truncate(a.body))
			o.failures[failureKind(a.status, a.header)]++
		default:
			if !a.terminal() && a.status >= 500 {
				o.failures[failureKind(a.status, a.header)]++
			}
			o.ids[a.requestID] = true
			if a.replayed {
				o.replays++
			}
			if a.terminal() {
				o.final, o.done, o.settled = a, true, a.at
				return o
			}
		}
		// Pending (a replay waits for the outcome again) or an outage: ask again shortly.
		select {
		case <-ctx.Done():
			o.lastErr = fmt.Sprintf("gave up: %v (last: %s)", ctx.Err(), o.lastErr)
			return o
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clientOutcome is what one client saw of one idempotent call.
type clientOutcome struct {
	key          string
	method, path string
	body         []byte
	started      time.Time
	settled      time.Time
	sends        int // HTTP exchanges, first one included
	errors       int // exchanges that failed or had no request (outage)
	replays      int // answers marked Idempotent-Replayed
	ids          map[string]bool
	failures     map[string]int // failed exchanges by kind (failureKind)
	final        answer
	done         bool
	lastErr      string
}

// failureKind names a failed exchange for the census of what clients saw during a fault:
// "no answer" (refused or cut), "HTTP 503 + Retry-After", "HTTP 500", ...
func failureKind(status int, h http.Header) string {
	switch {
	case status == 0:
		return "no answer"
	case h.Get("Retry-After") != "":
		return fmt.Sprintf("HTTP %d + Retry-After", status)
	default:
		return fmt.Sprintf("HTTP %d", status)
	}
}

// sim is a gateway's simulator control and its local API, for the checks.
type sim struct {
	g *gatewayProc
}

type simStats struct {
	Opens    map[string]int `json:"opens"`
	Requests int64          `json:"requests"`
}

func (s sim) setFaults(ctx context.Context, mode string, delayMs int) error {
	b, _ := json.Marshal(map[string]any{"mode": mode, "delayMs": delayMs})
	a, err := send(ctx, http.MethodPost, s.g.simURL+"/sim/faults", nil, b)
	if err != nil {
		return fmt.Errorf("set %s faults: %w", s.g.serial, err)
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("set %s faults: HTTP %d: %s", s.g.serial, a.status, truncate(a.body))
	}
	return nil
}

func (s sim) stats(ctx context.Context) (simStats, error) {
	a, err := send(ctx, http.MethodGet, s.g.simURL+"/sim/stats", nil, nil)
	if err != nil {
		return simStats{}, fmt.Errorf("read %s stats: %w", s.g.serial, err)
	}
	var st simStats
	if err := json.Unmarshal(a.body, &st); err != nil {
		return simStats{}, fmt.Errorf("decode %s stats: %w", s.g.serial, err)
	}
	return st, nil
}

func (s sim) resetStats(ctx context.Context) error {
	a, err := send(ctx, http.MethodDelete, s.g.simURL+"/sim/stats", nil, nil)
	if err != nil {
		return fmt.Errorf("reset %s stats: %w", s.g.serial, err)
	}
	if a.status != http.StatusNoContent {
		return fmt.Errorf("reset %s stats: HTTP %d", s.g.serial, a.status)
	}
	return nil
}

// transactions lists the gateway's active transactions through its local API.
func (s sim) transactions(ctx context.Context) ([]string, error) {
	a, err := send(ctx, http.MethodGet, s.g.url+"/transactions", map[string]string{"Authorization": "Bearer " + s.g.secret}, nil)
	if err != nil {
		return nil, fmt.Errorf("list %s transactions: %w", s.g.serial, err)
	}
	var txs []struct {
		TransactionID string `json:"transactionId"`
	}
	if err := json.Unmarshal(a.body, &txs); err != nil {
		return nil, fmt.Errorf("decode %s transactions: %w: %s", s.g.serial, err, truncate(a.body))
	}
	out := make([]string, len(txs))
	for i, t := range txs {
		out[i] = t.TransactionID
	}
	return out, nil
}

// towerAPI is a service provider on the tower API.
type towerAPI struct {
	base, clientID, secret string

	mu      sync.Mutex
	token   string
	tokenAt time.Time
}

func (t *towerAPI) bearer(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Since(t.tokenAt) < 4*time.Minute {
		return t.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.clientID}, "client_secret": {t.secret}}
	a, err := send(ctx, http.MethodPost, t.base+"/oauth/token", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		[]byte(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("get token: %w", err)
	}
	if a.status != http.StatusOK {
		return "", fmt.Errorf("get token: HTTP %d: %s", a.status, truncate(a.body))
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(a.body, &tok); err != nil {
		return "", fmt.Errorf("decode token: %w", err)
	}
	t.token, t.tokenAt = tok.AccessToken, time.Now()
	return t.token, nil
}

func (t *towerAPI) post(ctx context.Context, path string, body any) (answer, error) {
	tok, err := t.bearer(ctx)
	if err != nil {
		return answer{}, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	return send(ctx, http.MethodPost, t.base+path, map[string]string{"Authorization": "Bearer " + tok}, b)
}

// gatewayOnline reads the gateway cloud API's view of a gateway (GET /locations).
func (c *cloud) gatewayOnline(ctx context.Context, serial string) (bool, error) {
	a, err := c.do(ctx, http.MethodGet, "/locations", nil, nil)
	if err != nil {
		return false, err
	}
	if a.status != http.StatusOK {
		return false, fmt.Errorf("list locations: HTTP %d: %s", a.status, truncate(a.body))
	}
	var l struct {
		Data []struct {
			GatewayID     string `json:"gatewayId"`
			GatewayOnline bool   `json:"gatewayOnline"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil {
		return false, fmt.Errorf("decode locations: %w", err)
	}
	for _, d := range l.Data {
		if d.GatewayID == serial {
			return d.GatewayOnline, nil
		}
	}
	return false, errors.New("no location with gateway " + serial)
}

// waitFor polls cond every interval until it is true or limit passes; it returns when it
// became true.
func waitFor(ctx context.Context, limit, interval time.Duration, cond func() bool) (time.Time, bool) {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return time.Now(), true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

func newKey() string { return uuid.NewString() }

func truncate(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
