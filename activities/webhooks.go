package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
)

// WebhookStore is what delivery attempts need from Postgres.
type WebhookStore interface {
	WebhookAttemptOf(ctx context.Context, deliveryID uuid.UUID) (store.WebhookAttempt, error)
	RecordWebhookAttempt(ctx context.Context, deliveryID uuid.UUID, round int, o store.AttemptOutcome, failFor time.Duration) error
}

// WebhookDeps are the dependencies of the delivery activity.
type WebhookDeps struct {
	Store   WebhookStore
	Keyring SecretOpener
	// Policy says where deliveries may go (strict in production).
	Policy webhook.Policy
	// Schedule is the wait after each failed attempt (webhook.DefaultRetrySchedule when nil).
	Schedule []time.Duration
	// Timeout bounds one attempt's HTTP exchange (15 s when zero).
	Timeout time.Duration
	// PerEndpoint bounds the attempts one worker has in flight to one endpoint (8 when
	// zero): a slow receiver holds at most that many, never every activity slot.
	PerEndpoint int
	// FailFor is how long an endpoint's deliveries may all fail before it is disabled
	// (5 days when zero).
	FailFor time.Duration
	Metrics *WebhookMetrics

	once     sync.Once
	client   *http.Client
	mu       sync.Mutex
	inFlight map[uuid.UUID]int
}

func (d *WebhookDeps) init() {
	d.once.Do(func() {
		if d.Timeout == 0 {
			d.Timeout = 15 * time.Second
		}
		if d.PerEndpoint == 0 {
			d.PerEndpoint = 8
		}
		if d.FailFor == 0 {
			d.FailFor = 5 * 24 * time.Hour
		}
		if d.Schedule == nil {
			d.Schedule = webhook.DefaultRetrySchedule()
		}
		d.client = d.Policy.Client(d.Timeout)
		d.inFlight = map[uuid.UUID]int{}
	})
}

// take claims one of the endpoint's in-flight places; false when all are taken.
func (d *WebhookDeps) take(endpoint uuid.UUID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inFlight[endpoint] >= d.PerEndpoint {
		return false
	}
	d.inFlight[endpoint]++
	return true
}

func (d *WebhookDeps) give(endpoint uuid.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inFlight[endpoint]--; d.inFlight[endpoint] <= 0 {
		delete(d.inFlight, endpoint)
	}
}

// WebhookAttemptInput names the attempt: the delivery, its round, and which attempt of the
// round this is (from 1).
type WebhookAttemptInput struct {
	DeliveryID string
	Round      int
	Attempt    int
	// Deferrals is how many times in a row this attempt was deferred; each deferral waits
	// longer (1 s, 2 s, 4 s … 30 s, with jitter), so a backlog behind a busy endpoint does
	// not wake up all at once every second.
	Deferrals int
}

// The outcomes of a webhook delivery's round (WebhookAttemptResult.Outcome, and the
// webhook-delivery workflow's result).
const (
	WebhookSucceeded  = "succeeded"
	WebhookFailed     = "failed"
	WebhookGone       = "gone"
	WebhookAbandoned  = "abandoned"
	WebhookSuperseded = "superseded"
	// WebhookCanceled: the workflow was cancelled while it waited for its next attempt.
	WebhookCanceled = "canceled"
)

// WebhookAttemptResult tells the workflow what comes next.
type WebhookAttemptResult struct {
	// Done: no attempt follows (delivered, failed for good, or replaced by a redelivery).
	Done bool
	// Outcome, when Done: succeeded, failed (the schedule is spent), gone (410: the endpoint
	// is disabled), abandoned (the endpoint is disabled or deleted) or superseded (a
	// redelivery replaced this round, or the event was pruned).
	Outcome string
	// RetryIn is the wait before the next attempt.
	RetryIn time.Duration
	// Deferred: no attempt was made (the endpoint had its share in flight); it does not count.
	Deferred bool
}

// AttemptWebhook makes one delivery attempt and records it. It reads the delivery, its
// endpoint and event fresh, so a deleted or disabled endpoint, a rotated secret or a
// redelivery that replaced this round is seen at once. Recording is guarded by the round and
// the pending status, so a retried activity never records one attempt twice.
func (a *Activities) AttemptWebhook(ctx context.Context, in WebhookAttemptInput) (WebhookAttemptResult, error) {
	d := a.Webhooks
	if d == nil {
		return WebhookAttemptResult{}, temporal.NewApplicationError("this worker does not deliver webhooks", "NotConfigured")
	}
	d.init()
	// Heartbeats for the whole attempt (Postgres may be slow to answer under load, the
	// receiver up to its timeout): a worker that dies mid-attempt is noticed within the
	// heartbeat timeout, and a live one is never mistaken for dead.
	defer heartbeatEvery(ctx, 2*time.Second)()
	id, err := uuid.Parse(in.DeliveryID)
	if err != nil {
		return WebhookAttemptResult{}, temporal.NewNonRetryableApplicationError("bad delivery id", "InvalidInput", err)
	}
	at, err := d.Store.WebhookAttemptOf(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return WebhookAttemptResult{Done: true, Outcome: WebhookSuperseded}, nil // the event was pruned
	}
	if err != nil {
		return WebhookAttemptResult{}, err
	}
	if at.Delivery.Round != in.Round || at.Delivery.Status != "pending" {
		return WebhookAttemptResult{Done: true, Outcome: WebhookSuperseded}, nil
	}
	record := func(o store.AttemptOutcome, outcome string) (WebhookAttemptResult, error) {
		err := d.Store.RecordWebhookAttempt(ctx, id, in.Round, o, d.FailFor)
		if errors.Is(err, store.ErrStaleRound) {
			return WebhookAttemptResult{Done: true, Outcome: WebhookSuperseded}, nil
		}
		if err != nil {
			return WebhookAttemptResult{}, err
		}
		d.Metrics.delivered(outcome)
		if o.Final {
			return WebhookAttemptResult{Done: true, Outcome: outcome}, nil
		}
		return WebhookAttemptResult{RetryIn: time.Until(*o.NextAttemptAt)}, nil
	}
	if at.Deleted || !at.Endpoint.Enabled {
		return record(store.AttemptOutcome{Error: "endpoint disabled or deleted", Final: true}, WebhookAbandoned)
	}
	if !d.take(at.Endpoint.ID) {
		wait := min(time.Second<<min(in.Deferrals, 5), 30*time.Second)
		return WebhookAttemptResult{Deferred: true, RetryIn: wait + rand.N(time.Second)}, nil
	}
	defer d.give(at.Endpoint.ID)

	keys, err := a.webhookKeys(at.Endpoint)
	if err != nil {
		return WebhookAttemptResult{}, err
	}
	body, err := json.Marshal(webhook.NewPayload(at.Event.ID, at.Event.Type, at.Event.CreatedAt, at.Event.OrgID, at.Event.SubOrgID, at.Event.Data))
	if err != nil {
		return WebhookAttemptResult{}, temporal.NewNonRetryableApplicationError("encode event", "InvalidInput", err)
	}
	start := time.Now()
	code, cause := d.post(ctx, at.Endpoint.URL, webhook.EventIDPrefix+at.Event.ID.String(), keys, body)
	d.Metrics.attempted(time.Since(start))

	o := store.AttemptOutcome{StatusCode: code, Error: cause}
	switch {
	case code >= 200 && code < 300:
		o.Succeeded, o.Final, o.Error = true, true, ""
		return record(o, WebhookSucceeded)
	case code == http.StatusGone:
		o.Final, o.Disable = true, "the receiver answered 410 Gone"
		return record(o, WebhookGone)
	case in.Attempt > len(d.Schedule):
		o.Final = true
		return record(o, WebhookFailed)
	}
	next := time.Now().Add(d.Schedule[in.Attempt-1])
	o.NextAttemptAt = &next
	return record(o, "retrying")
}

// heartbeatEvery records the activity's heartbeat every interval until the returned stop is
// called, so Temporal sees a worker that died mid-attempt within its heartbeat timeout.
func heartbeatEvery(ctx context.Context, interval time.Duration) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// webhookKeys are the endpoint's signing keys: its secret, and during a rotation the
// previous one.
func (a *Activities) webhookKeys(e store.WebhookEndpoint) ([][]byte, error) {
	purpose := keyring.WebhookSecretPurpose(e.ID)
	cur, err := a.Webhooks.Keyring.Open(purpose, e.SecretSealed)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("open endpoint secret", "InvalidInput", err)
	}
	keys := [][]byte{cur}
	if e.PreviousSecretSealed != nil && e.PreviousSecretUntil != nil && time.Now().Before(*e.PreviousSecretUntil) {
		if prev, err := a.Webhooks.Keyring.Open(purpose, e.PreviousSecretSealed); err == nil {
			keys = append(keys, prev)
		}
	}
	return keys, nil
}

// post sends one delivery and returns the status (0: no answer) and, on failure, why.
func (d *WebhookDeps) post(ctx context.Context, url, id string, keys [][]byte, body []byte) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "bad url: " + err.Error()
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "lockernet-webhooks/1")
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderSignature, webhook.SignatureHeader(keys, id, ts, body))
	resp, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, webhook.ErrURL) {
			return 0, "refused: " + err.Error()
		}
		if ctx.Err() != nil {
			return 0, fmt.Sprintf("no answer within %s", d.Timeout)
		}
		return 0, err.Error()
	}
	defer resp.Body.Close()
	// The log keeps up to 4 KiB of what the receiver said.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.ToValidUTF8(bytes.ReplaceAll(head, []byte{0}, nil), []byte("?")))
}

// WebhookMetrics counts delivery attempts.
type WebhookMetrics struct {
	outcomes *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewWebhookMetrics registers the delivery metrics on reg.
func NewWebhookMetrics(reg prometheus.Registerer) *WebhookMetrics {
	m := &WebhookMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome (succeeded, retrying, failed, gone, abandoned).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockernet_webhook_attempt_duration_seconds",
			Help:    "How long a webhook delivery attempt's HTTP exchange took.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}),
	}
	reg.MustRegister(m.outcomes, m.latency)
	return m
}

func (m *WebhookMetrics) delivered(outcome string) {
	if m != nil {
		m.outcomes.WithLabelValues(outcome).Inc()
	}
}

func (m *WebhookMetrics) attempted(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}

// WebhookBacklogStore reads the pending deliveries per endpoint.
type WebhookBacklogStore interface {
	WebhookBacklog(ctx context.Context, limit int) ([]store.EndpointBacklog, error)
}

var (
	webhookBacklogDesc = prometheus.NewDesc("lockernet_webhook_pending_deliveries",
		"Webhook deliveries not yet succeeded or failed, per endpoint (the 20 endpoints with the most).", []string{"endpoint_id"}, nil)
	webhookBacklogAgeDesc = prometheus.NewDesc("lockernet_webhook_oldest_pending_seconds",
		"Age of the endpoint's oldest pending delivery (a receiver that has been down that long).", []string{"endpoint_id"}, nil)
)

// NewWebhookBacklogCollector exports the webhook backlog per endpoint, read from Postgres at
// scrape time (bounded to 2 s); a failed read is logged and leaves the series out.
func NewWebhookBacklogCollector(st WebhookBacklogStore, logger *slog.Logger) prometheus.Collector {
	return webhookBacklogCollector{st: st, logger: logger}
}

type webhookBacklogCollector struct {
	st     WebhookBacklogStore
	logger *slog.Logger
}

func (c webhookBacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- webhookBacklogDesc
	ch <- webhookBacklogAgeDesc
}

func (c webhookBacklogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list, err := c.st.WebhookBacklog(ctx, 20)
	if err != nil {
		c.logger.Warn("read webhook backlog for metrics", "err", err)
		return
	}
	for _, b := range list {
		id := b.EndpointID.String()
		ch <- prometheus.MustNewConstMetric(webhookBacklogDesc, prometheus.GaugeValue, float64(b.Pending), id)
		ch <- prometheus.MustNewConstMetric(webhookBacklogAgeDesc, prometheus.GaugeValue, b.Oldest.Seconds(), id)
	}
}
