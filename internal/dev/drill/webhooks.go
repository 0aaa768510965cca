package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/webhook"
)

// drillWebhooks: a receiver down for a while, then slow, and the worker killed with
// deliveries in flight; every event must reach the receiver, signed, with duplicates only
// as repeats of the same webhook-id.
func drillWebhooks(ctx context.Context, o options) (r *result) {
	r = newResult("webhooks", "a webhook receiver down, then the worker killed mid-delivery")
	const schedule = "1s,2s,4s,4s,4s,8s,8s"
	r.what = fmt.Sprintf("A webhook endpoint points at a receiver in the drill process. While the receiver answers 503, "+
		"%d test events are recorded (`POST /webhooks/endpoints/{id}/test`); after %s it answers 204, each answer taking %s, "+
		"and %d more events are recorded. Once deliveries are in flight at the receiver, the worker gets SIGKILL; %s later a "+
		"new worker starts. Then every event must have reached the receiver with a valid signature, every delivery must "+
		"be `succeeded` in the delivery log, and any event received twice must carry the same `webhook-id` (at-least-once).",
		o.whDown, human(o.whDownFor), human(o.whSlow), o.whUp, human(o.kwRestartAfter))
	r.settings = append(r.settings, "`LOCKERNET_WEBHOOK_RETRY_SCHEDULE="+schedule+"` (default 5s,5m,30m,2h,5h,10h,10h): the receiver's outage "+
		"is covered by the retries within the drill's minutes.")
	sys := start(ctx, r, o, map[string]string{"LOCKERNET_WEBHOOK_RETRY_SCHEDULE": schedule})
	if sys == nil {
		return r
	}
	defer sys.done(r)

	rc := &drillReceiver{slow: o.whSlow, got: map[string]int{}}
	rc.down.Store(true)
	srv := httptest.NewServer(rc)
	defer srv.Close()
	app := &appClient{base: "http://" + sys.apiAddr, key: sys.creds.AppEngineAPIKey}
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := app.do(ctx, http.MethodPost, "/webhooks/endpoints", map[string]any{"url": srv.URL + "/hooks", "event_types": []string{"webhook.test"}}, http.StatusCreated, &ep); err != nil {
		r.err = err
		return r
	}
	key, err := webhook.ParseSecret(ep.Secret)
	if err != nil {
		r.err = err
		return r
	}
	rc.key = key

	var events []string
	send := func(n int) error {
		for range n {
			var out struct {
				EventID string `json:"event_id"`
			}
			if err := app.do(ctx, http.MethodPost, "/webhooks/endpoints/"+ep.ID+"/test", nil, http.StatusAccepted, &out); err != nil {
				return err
			}
			events = append(events, out.EventID)
		}
		return nil
	}
	t0 := time.Now()
	if err := send(o.whDown); err != nil {
		r.err = err
		return r
	}
	if !waitPast(ctx, t0.Add(o.whDownFor)) {
		r.err = ctx.Err()
		return r
	}
	refusedWhileDown := rc.attempts.Load()
	rc.down.Store(false)
	r.figure("While the receiver was down", "%d events recorded, %d delivery attempts refused with 503", o.whDown, refusedWhileDown)
	if err := send(o.whUp); err != nil {
		r.err = err
		return r
	}
	_, inFlight := waitFor(ctx, 30*time.Second, 20*time.Millisecond, func() bool { return rc.inFlight.Load() >= 4 })
	r.figure("In flight at the receiver when the worker was killed", "%d deliveries (%d received so far)", rc.inFlight.Load(), rc.received())
	if !inFlight {
		r.note("Fewer than 4 deliveries were in flight at the receiver 30 s after the events; the worker was killed anyway.")
	}
	tKill := time.Now()
	sys.worker.kill()
	logf("  worker killed")
	select {
	case <-ctx.Done():
		r.err = ctx.Err()
		return r
	case <-time.After(o.kwRestartAfter):
	}
	if err := sys.worker.start(ctx, 90*time.Second); err != nil {
		r.verify(false, "a new worker starts", "%v", err)
		return r
	}
	total := len(events)
	var succeeded int
	doneAt, all := waitFor(ctx, o.settleLimit, 200*time.Millisecond, func() bool {
		err := sys.st.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'succeeded'`,
			ep.ID).Scan(&succeeded)
		return err == nil && succeeded >= total && rc.distinct() >= total
	})
	if all {
		r.figure("Time to recover (kill → every event delivered)", "%s", secs(doneAt.Sub(tKill)))
	}
	missing := 0
	for _, id := range events {
		if rc.count(id) == 0 {
			missing++
		}
	}
	r.lost = missing
	r.verify(missing == 0, "every event reached the receiver (lost events)", "%d of %d never arrived", missing, total)
	r.verify(succeeded == total, "every delivery is succeeded in the delivery log", "%d of %d", succeeded, total)
	r.verify(rc.badSignatures.Load() == 0, "every delivery carried a valid signature", "%d did not", rc.badSignatures.Load())
	dups := rc.received() - rc.distinct()
	r.figure("Deliveries received", "%d for %d events (%d repeats of an event already received, each with its webhook-id)",
		rc.received(), rc.distinct(), dups)
	recorded := map[string]bool{}
	for _, id := range events {
		recorded[id] = true
	}
	unknown := 0
	for _, id := range rc.ids() {
		if !recorded[id] {
			unknown++
		}
	}
	r.verify(unknown == 0, "no delivery of an event that was not recorded", "%d", unknown)
	return r
}

// drillReceiver counts deliveries by webhook-id, checking each signature.
type drillReceiver struct {
	key           []byte
	slow          time.Duration
	down          atomic.Bool
	attempts      atomic.Int64
	inFlight      atomic.Int64
	badSignatures atomic.Int64
	mu            sync.Mutex
	got           map[string]int
	total         int
}

func (rc *drillReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.attempts.Add(1)
	body, _ := io.ReadAll(r.Body)
	if rc.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	rc.inFlight.Add(1)
	defer rc.inFlight.Add(-1)
	time.Sleep(rc.slow)
	if err := webhook.Verify(rc.key, r.Header, body, time.Now(), 5*time.Minute); err != nil {
		rc.badSignatures.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p webhook.Payload
	if json.Unmarshal(body, &p) != nil || p.ID != r.Header.Get(webhook.HeaderID) {
		rc.badSignatures.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.got[p.ID]++
	rc.total++
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rc *drillReceiver) count(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[id]
}

func (rc *drillReceiver) received() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.total
}

func (rc *drillReceiver) distinct() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *drillReceiver) ids() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]string, 0, len(rc.got))
	for id := range rc.got {
		out = append(out, id)
	}
	return out
}

// appClient calls the app engine API with a key.
type appClient struct {
	base, key string
}

// do sends body as JSON and decodes the answer into out, which must have status want.
func (a *appClient) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	ans, err := send(ctx, method, a.base+path, map[string]string{"x-api-key": a.key}, b)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if ans.status != want {
		return fmt.Errorf("%s %s: %d %s", method, path, ans.status, loadclient.Excerpt(ans.body))
	}
	if out != nil {
		return json.Unmarshal(ans.body, out)
	}
	return nil
}
