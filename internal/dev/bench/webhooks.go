package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
)

// webhookResult is the webhook-delivery scenario's outcome.
type webhookResult struct {
	Rate     float64
	Duration time.Duration
	// Recorded is the events the API accepted; Delivered those the receiver got (first
	// delivery of each id), Repeats the deliveries of an id already received.
	Recorded, Delivered, Repeats, Refused int
	// Skipped events were not sent: 256 record calls were already in flight.
	Skipped int
	// Span is from the first event's record to the last delivery; DrainAfterLoad from the
	// end of the load to the last delivery (a growing backlog shows here).
	Span, DrainAfterLoad time.Duration
	// Latency is from the event's created_at to its arrival at the receiver.
	Latency summary
	// Record is the latency of the API call that records a test event.
	Record summary
}

// runWebhooks points an endpoint of the bench organization at a receiver in this process,
// records webhook.test events at rate a second for d through the app engine API, and
// measures when each is delivered. The endpoint is deleted at the end, so the bench
// organization records no events in the other scenarios.
func runWebhooks(ctx context.Context, b *bench, rate float64, d time.Duration) (webhookResult, error) {
	res := webhookResult{Rate: rate, Duration: d}
	rc, err := startReceiver(ctx, b, []string{"webhook.test"})
	if err != nil {
		return res, err
	}
	defer rc.close()
	hdr, ep := rc.hdr, rc.endpointID

	record := newSample("record a test event (API)")
	var recMu sync.Mutex
	start := time.Now()
	_, res.Skipped = loadclient.OpenLoop(ctx, rate, d, 256, func(ctx context.Context, _ int, scheduled time.Time) {
		r, err := b.api.do(ctx, http.MethodPost, b.creds.APIURL+"/webhooks/endpoints/"+ep+"/test", hdr, nil)
		if err != nil || r.status != http.StatusAccepted {
			record.fail()
			return
		}
		record.add(time.Since(scheduled))
		recMu.Lock()
		res.Recorded++
		recMu.Unlock()
	})
	loadEnd := time.Now()
	// Wait for the deliveries: until every recorded event arrived, or nothing arrived for 2 min.
	last, lastCount := time.Now(), 0
	for {
		n := rc.count()
		if n >= res.Recorded {
			break
		}
		if n != lastCount {
			last, lastCount = time.Now(), n
		}
		if time.Since(last) > 2*time.Minute || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	res.Delivered, res.Repeats, res.Refused = len(rc.arrived), rc.repeats, rc.refused
	var lastArrival time.Time
	for _, at := range rc.arrived {
		if at.After(lastArrival) {
			lastArrival = at
		}
	}
	if !lastArrival.IsZero() {
		res.Span, res.DrainAfterLoad = lastArrival.Sub(start), lastArrival.Sub(loadEnd)
	}
	res.Latency, res.Record = rc.latency.summary(), record.summary()
	return res, nil
}

func (w webhookResult) markdown(p writer) {
	p("### Webhook deliveries")
	p("")
	p("`webhook.test` events recorded through the app engine API (`POST /webhooks/endpoints/{id}/test`) at %.0f/s for %s, "+
		"each delivered by its `WebhookDelivery` workflow to a receiver on this machine that verifies the signature and answers 204 at once. "+
		"Latency is from the event's `created_at` (its commit) to its arrival at the receiver.", w.Rate, w.Duration)
	p("")
	delivered := 0.0
	if w.Span > 0 {
		delivered = float64(w.Delivered) / w.Span.Seconds()
	}
	p("- Events recorded: %d; delivered: %d (%d repeats, %d refused signatures); %.1f events/s delivered over %s from the first record to the last delivery.",
		w.Recorded, w.Delivered, w.Repeats, w.Refused, delivered, w.Span.Round(10*time.Millisecond))
	p("- Last delivery %s after the load ended (a backlog that grew during the load drains here).", w.DrainAfterLoad.Round(10*time.Millisecond))
	p("")
	p(summaryHeader)
	p(w.Latency.row())
	p(w.Record.row())
	p("")
}

// webhookStep is one offered rate of the webhook-rates scenario.
type webhookStep struct {
	webhookResult
	Held, Kept bool
	Why        []string
}

// webhookRatesResult is the webhook-rates scenario's outcome.
type webhookRatesResult struct {
	Step  time.Duration
	Steps []webhookStep
	// Sustained is the highest rate held for a whole step of sustainWindow (0: none).
	Sustained float64
}

// runWebhookRates offers webhook events at each rate the ladder picks in turn, each for d
// from a quiet system (runWebhooks per step). A step is held when every event was recorded
// (no refused or failed call), every recorded event was delivered exactly once, and the last
// delivery came within a second of the load's end: no more than a second of backlog, the
// bare workflow's criterion.
func runWebhookRates(ctx context.Context, b *bench, l *ladder, d time.Duration) (webhookRatesResult, error) {
	res := webhookRatesResult{Step: d}
	for rate, ok := l.rate(); ok && ctx.Err() == nil; rate, ok = l.rate() {
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("%s: webhook-rates: %.0f events/s for %s", b.shape.key, rate, d)
		r, err := runWebhooks(ctx, b, rate, d)
		if err != nil {
			return res, err
		}
		st := webhookStep{webhookResult: r}
		if n := r.Record.Errors; n > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d events not recorded (error or 5xx)", n))
		}
		if r.Skipped > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d events not sent (256 calls in flight)", r.Skipped))
		}
		if r.Delivered < r.Recorded {
			st.Why = append(st.Why, fmt.Sprintf("%d of %d events not delivered", r.Recorded-r.Delivered, r.Recorded))
		}
		if r.DrainAfterLoad > time.Second {
			st.Why = append(st.Why, fmt.Sprintf("the last delivery %s after the load ended (more than a second of backlog)", r.DrainAfterLoad.Round(10*time.Millisecond)))
		}
		if r.Repeats > 0 || r.Refused > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d repeated deliveries, %d refused signatures", r.Repeats, r.Refused))
		}
		st.Held = len(st.Why) == 0
		st.Kept = st.Held && d >= sustainWindow
		if st.Held && !st.Kept {
			st.Why = append(st.Why, fmt.Sprintf("but for %s only, under the %s the criterion needs", d, sustainWindow))
		}
		logf("%s: webhook-rates: %.0f/s: %d of %d delivered, p99 %s, last %s after the load; %s", b.shape.key, rate, r.Delivered, r.Recorded,
			ms(r.Latency.P99), r.DrainAfterLoad.Round(10*time.Millisecond), stepVerdict(st.Held, st.Kept, st.Why))
		res.Steps = append(res.Steps, st)
		if st.Kept {
			res.Sustained = max(res.Sustained, rate)
		}
		l.record(rate, st.Held)
	}
	return res, ctx.Err()
}

func (wr *webhookRatesResult) markdown(w writer, floor *bareResult) {
	w("### Webhook deliveries: the rate sustained")
	w("")
	w("`webhook.test` events recorded through the app engine API at each offered rate for %s, each step from a quiet system, delivered to one "+
		"endpoint whose receiver (in the bench) verifies the signature and answers 204 at once. A step is held when every event was recorded, "+
		"every one delivered once, and the last delivery came within a second of the load's end (no more than a second of backlog).", wr.Step)
	w("")
	w("| offered | recorded | delivered | record p99 | committed → delivered p50 | p99 | max | last delivery after the load | verdict |")
	w("|---|---|---|---|---|---|---|---|---|")
	for _, s := range wr.Steps {
		w("| %.0f/s | %d | %d | %s | %s | %s | %s | %s | %s |", s.Rate, s.Recorded, s.Delivered, ms(s.Record.P99), ms(s.Latency.P50), ms(s.Latency.P99),
			ms(s.Latency.Max), s.DrainAfterLoad.Round(10*time.Millisecond), stepVerdict(s.Held, s.Kept, s.Why))
	}
	w("")
	if wr.Sustained > 0 {
		w("Sustained: **%.0f deliveries/s**.", wr.Sustained)
	} else {
		w("Sustained for a whole step of at least %s: **none**.", sustainWindow)
	}
	if floor != nil && floor.Sustained > 0 && wr.Sustained > 0 {
		w("")
		w("Against Temporal alone with the delivery's start on the same server (%.0f/s): %.2f ×.", floor.Sustained, wr.Sustained/floor.Sustained)
	}
	w("")
}

// receiver is a webhook endpoint of the bench organization pointed at a server in this process
// that verifies each delivery's signature, answers 204 at once, and notes when each event id
// first arrived (a repeat of an id is counted, not noted again).
type receiver struct {
	mu               sync.Mutex
	arrived          map[string]time.Time
	created          map[string]time.Time // each event's created_at, from its payload
	latency          *sample
	repeats, refused int
	signKey          []byte
	hdr              map[string]string
	endpointID       string
	stop             []func()
}

// startReceiver makes an app key of the bench organization (its rate limit raised so it does
// not shape a figure), a server on a free port and an endpoint for eventTypes pointed at it.
// close deletes the endpoint and the key and stops the server.
func startReceiver(ctx context.Context, b *bench, eventTypes []string) (*receiver, error) {
	rc := &receiver{arrived: map[string]time.Time{}, created: map[string]time.Time{}, latency: newSample("event created → delivered")}
	key, k, err := b.store.CreateAppKey(ctx, store.AppKey{OrganizationID: b.data.orgID})
	if err != nil {
		return nil, fmt.Errorf("bench app key: %w", err)
	}
	rc.stop = append(rc.stop, func() { _ = b.store.DeleteAppKey(context.WithoutCancel(ctx), b.data.orgID, k.ID) })
	// The app engine limit is 300 a minute per key by default; this key's is raised so the
	// limit does not shape the figure.
	if _, err := b.pool.Exec(ctx, `UPDATE app_api_keys SET rate_limit = 1000000 WHERE id = $1`, k.ID); err != nil {
		rc.close()
		return nil, err
	}
	rc.hdr = map[string]string{"x-api-key": key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rc.close()
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(rc.serve)}
	go func() { _ = srv.Serve(ln) }()
	rc.stop = append(rc.stop, func() { _ = srv.Close() })
	r, err := b.api.do(ctx, http.MethodPost, b.creds.APIURL+"/webhooks/endpoints", rc.hdr,
		map[string]any{"url": "http://" + ln.Addr().String() + "/bench", "event_types": eventTypes})
	if err != nil || r.status != http.StatusCreated {
		rc.close()
		return nil, fmt.Errorf("create the bench endpoint: %d %s %v", r.status, r.body, err)
	}
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(r.body, &ep); err != nil {
		rc.close()
		return nil, err
	}
	rc.endpointID = ep.ID
	rc.stop = append(rc.stop, func() {
		_, _ = b.api.do(context.WithoutCancel(ctx), http.MethodDelete, b.creds.APIURL+"/webhooks/endpoints/"+ep.ID, rc.hdr, nil)
	})
	rc.mu.Lock()
	rc.signKey, err = webhook.ParseSecret(ep.Secret)
	rc.mu.Unlock()
	if err != nil {
		rc.close()
		return nil, err
	}
	return rc, nil
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if webhook.Verify(rc.signKey, r.Header, body, now, 5*time.Minute) != nil {
		rc.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p webhook.Payload
	_ = json.Unmarshal(body, &p)
	if _, seen := rc.arrived[p.ID]; seen {
		rc.repeats++
	} else {
		rc.arrived[p.ID] = now
		if at, err := time.Parse(time.RFC3339Nano, p.CreatedAt); err == nil {
			rc.created[p.ID] = at
			rc.latency.add(now.Sub(at))
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// count is how many distinct events arrived.
func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.arrived)
}

// close deletes the endpoint and the key and stops the server, in the reverse order of their making.
func (rc *receiver) close() {
	for i := len(rc.stop) - 1; i >= 0; i-- {
		rc.stop[i]()
	}
	rc.stop = nil
}
