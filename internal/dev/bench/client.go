package bench

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// api talks to a running system over HTTP, as a client would.
type api struct {
	base  string
	http  *loadclient.Client
	token *loadclient.Token

	// serverErrors counts the 5xx answers by status code, for the report: a 5xx is never a
	// figure to average away (DESIGN §8: overload is a 503, nothing is a 500).
	statusMu     sync.Mutex
	serverErrors map[int]int
}

func newAPI(base, clientID, secret string) *api {
	a := &api{base: strings.TrimRight(base, "/"), http: loadclient.New(60 * time.Second), serverErrors: map[int]int{}}
	a.http.OnStatus = a.countStatus
	a.token = loadclient.NewToken(a.http, a.base, clientID, secret)
	return a
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
func (a *api) bearer(ctx context.Context) (string, error) { return a.token.Bearer(ctx) }

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
	ans, err := a.http.DoJSON(ctx, method, fullURL, headers, body)
	r := result{status: ans.Status, body: ans.Body, header: ans.Header, latency: ans.Latency}
	if err != nil {
		return r, err
	}
	r.serverTime = serverTiming(ans.Header.Get("Server-Timing"))
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
