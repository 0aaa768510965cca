package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// Terminal states of a gateway request (DESIGN §6.2).
var terminalStates = map[string]bool{"completed": true, "rejected": true, "dispatch_failed": true, "gateway_unresponsive": true}

// httpClient is every drill client's: its long polls wait up to 30 s, and an outage may
// hold a call until its timeout.
var httpClient = loadclient.New(90 * time.Second)

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

// send is one exchange with the system.
func send(ctx context.Context, method, u string, headers map[string]string, body []byte) (answer, error) {
	a, err := httpClient.Do(ctx, method, u, headers, body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: a.Status, header: a.Header, body: a.Body, requestID: a.Header.Get("X-Request-Id"),
		state: a.Header.Get("X-Request-State"), replayed: a.Header.Get("Idempotent-Replayed") == "true", at: a.At}, nil
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
			last = fmt.Errorf("poll %s: HTTP %d: %s", id, a.status, loadclient.Excerpt(a.body))
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
			o.lastErr = fmt.Sprintf("HTTP %d: %s", a.status, loadclient.Excerpt(a.body))
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
		return fmt.Errorf("set %s faults: HTTP %d: %s", s.g.serial, a.status, loadclient.Excerpt(a.body))
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
		return nil, fmt.Errorf("decode %s transactions: %w: %s", s.g.serial, err, loadclient.Excerpt(a.body))
	}
	out := make([]string, len(txs))
	for i, t := range txs {
		out[i] = t.TransactionID
	}
	return out, nil
}

// slowGateways puts both gateways in a slow mode for the drill (GW-0001: each local-API
// request waits d; GW-0002: each door open waits d at the lock controller), so opens are
// genuinely in flight at the gateways, and returns what puts them back, so the next drill
// on the same system finds them quick.
func slowGateways(ctx context.Context, sys *system, d time.Duration) (func(), error) {
	gw1, gw2 := sim{sys.gws[0]}, sim{sys.gws[1]}
	ms := int(d / time.Millisecond)
	back := func() {
		_ = gw1.setFaults(context.WithoutCancel(ctx), "none", 0)
		_ = gw2.setFaults(context.WithoutCancel(ctx), "none", 0)
	}
	if err := gw1.setFaults(ctx, "slow", ms); err != nil {
		return back, err
	}
	return back, gw2.setFaults(ctx, "controller_slow", ms)
}

// towerAPI is a service provider on the tower API.
type towerAPI struct {
	base  string
	token *loadclient.Token
}

func newTowerAPI(base, clientID, secret string) *towerAPI {
	return &towerAPI{base: base, token: loadclient.NewToken(httpClient, base, clientID, secret)}
}

func (t *towerAPI) post(ctx context.Context, path string, body any) (answer, error) {
	h, err := t.token.Authorization(ctx)
	if err != nil {
		return answer{}, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	return send(ctx, http.MethodPost, t.base+path, h, b)
}

// gatewayOnline reads the gateway cloud API's view of a gateway (GET /locations).
func (c *cloud) gatewayOnline(ctx context.Context, serial string) (bool, error) {
	a, err := c.do(ctx, http.MethodGet, "/locations", nil, nil)
	if err != nil {
		return false, err
	}
	if a.status != http.StatusOK {
		return false, fmt.Errorf("list locations: HTTP %d: %s", a.status, loadclient.Excerpt(a.body))
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
