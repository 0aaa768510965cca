package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// The proxy-rates scenario finds the rate of gateway cloud API calls the shape sustains: a
// locker read through the cloud, open-loop at rising rates, each step from a quiet system.
// Every call is a gateway-request workflow (decision 0012) that its first send settles inside
// its first task (decision 0018), so its ceiling is Temporal's: the report sets the figure
// beside the bare workflows the temporal scenario sustained on the same server in the same
// run (target ≥ proxyRatesTarget(shape) × bare).

// proxyRatesTarget is the share of the bare workflows' rate the cloud reads are to sustain on
// a shape: 0.7 on make run's, 0.5 on the cluster shape's (where every start and task is a
// round trip to a Temporal server of its own).
func proxyRatesTarget(shapeKey string) float64 {
	if shapeKey == "cluster" {
		return 0.5
	}
	return 0.7
}

// proxyRateStep is one offered rate of cloud reads.
type proxyRateStep struct {
	Rate     float64
	Duration time.Duration
	Achieved float64
	Calls    summary
	// Pending answered 202 (the wait ran out: the request is behind); Skipped were not sent
	// because 512 calls were already in flight; ServerErrors answered 5xx.
	Pending, Skipped, ServerErrors int
	// TasksEnd is the tasks queued in Temporal's task queues at the end of the step.
	TasksEnd   int64
	Held, Kept bool
	Why        []string
}

// proxyRatesResult is the scenario's outcome.
type proxyRatesResult struct {
	Step      time.Duration
	Steps     []proxyRateStep
	Sustained float64
}

// runProxyRates offers cloud locker reads at each rate in turn for d, and stops after the
// first rate the shape did not hold.
func runProxyRates(ctx context.Context, b *bench, rates []float64, d time.Duration) (proxyRatesResult, error) {
	res := proxyRatesResult{Step: d}
	gw := b.creds.Gateways[0]
	key, k, err := b.store.IssueGatewayKey(ctx, b.creds.OrganizationID, "load tool", ptr(1_000_000))
	if err != nil {
		return res, fmt.Errorf("issue a bench gateway key: %w", err)
	}
	defer func() { _, _ = b.store.RevokeGatewayKey(context.WithoutCancel(ctx), k.ID) }()
	locker, err := firstLocker(ctx, b, gw)
	if err != nil {
		return res, err
	}
	url := fmt.Sprintf("%s/api/customer/v1/locations/%d/lockers/%d", b.creds.APIURL, gw.LocationID, locker)
	headers := map[string]string{"X-API-Key": key}
	for i, rate := range rates {
		if i > 0 {
			waitForQuiet(ctx, b, 10*time.Minute)
		}
		logf("%s: proxy-rates: %.0f cloud reads/s for %s", b.shape.key, rate, d)
		st := proxyRateStep{Rate: rate, Duration: d}
		calls := newSample(fmt.Sprintf("cloud locker read at %.0f/s", rate))
		var pending atomic.Int64
		before := b.api.statusCounts()
		start := time.Now()
		_, st.Skipped = loadclient.OpenLoop(ctx, rate, d, 512, func(ctx context.Context, _ int, scheduled time.Time) {
			r, err := b.api.do(ctx, http.MethodGet, url, headers, nil)
			switch {
			case err != nil:
				calls.fail()
			case r.status == http.StatusAccepted:
				pending.Add(1)
				calls.fail()
			case r.status != http.StatusOK:
				calls.fail()
			default:
				calls.add(time.Since(scheduled))
			}
		})
		elapsed := time.Since(start)
		st.Calls, st.Pending = calls.summary(), int(pending.Load())
		st.Achieved = float64(st.Calls.Count) / elapsed.Seconds()
		for _, n := range b.api.serverErrorsSince(before) {
			st.ServerErrors += n
		}
		st.TasksEnd = b.taskBacklog(ctx)
		if st.Pending > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d calls answered 202 (their wait ran out)", st.Pending))
		}
		if n := st.Calls.Errors - st.Pending; n > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d calls failed", n))
		}
		if st.ServerErrors > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d 5xx answers", st.ServerErrors))
		}
		if st.Skipped > 0 {
			st.Why = append(st.Why, fmt.Sprintf("%d calls not sent (512 in flight)", st.Skipped))
		}
		if st.TasksEnd > int64(rate) {
			st.Why = append(st.Why, fmt.Sprintf("%d tasks queued in Temporal at the end, more than a second of calls (%.0f)", st.TasksEnd, rate))
		}
		st.Held = len(st.Why) == 0
		st.Kept = st.Held && d >= sustainWindow
		if st.Held && !st.Kept {
			st.Why = append(st.Why, fmt.Sprintf("but for %s only, under the %s the criterion needs", d, sustainWindow))
		}
		res.Steps = append(res.Steps, st)
		logf("%s: proxy-rates: %.0f/s: p50 %s p99 %s, %.1f answered/s; %s", b.shape.key, rate, ms(st.Calls.P50), ms(st.Calls.P99),
			st.Achieved, stepVerdict(st.Held, st.Kept, st.Why))
		if st.Kept {
			res.Sustained = rate
		}
		if !st.Held || ctx.Err() != nil {
			break
		}
	}
	return res, ctx.Err()
}

func (p *proxyRatesResult) markdown(w writer, bare *bareResult, target float64) {
	w("### Gateway cloud API: the rate sustained")
	w("")
	w("Open-loop cloud locker reads (each one a gateway-request workflow: store, eager start, the first send inside the first workflow task, the outcome), %s per offered rate, "+
		"each step from a quiet system. A step holds when every call was answered 200 within its wait (a 202 means the request fell behind), "+
		"none failed or answered 5xx, none waited unsent, and no more than a second of calls was queued in Temporal at the end.", p.Step)
	w("")
	w("| offered | answered/s | calls | 202 | failed | 5xx | not sent | p50 | p99 | Temporal tasks at the end | verdict |")
	w("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range p.Steps {
		w("| %.0f/s | %.1f/s | %d | %d | %d | %d | %d | %s | %s | %d | %s |", s.Rate, s.Achieved, s.Calls.Count, s.Pending,
			s.Calls.Errors-s.Pending, s.ServerErrors, s.Skipped, ms(s.Calls.P50), ms(s.Calls.P99), s.TasksEnd, stepVerdict(s.Held, s.Kept, s.Why))
	}
	w("")
	sustained := fmt.Sprintf("**%.0f calls/s**", p.Sustained)
	if p.Sustained == 0 {
		sustained = fmt.Sprintf("**none** of the steps for a whole %s", sustainWindow)
	}
	switch {
	case bare == nil || bare.Sustained == 0:
		w("Sustained: %s. The bare workflows sustained on the same server were not measured in this run, so the target (≥ %.1f × bare) is not judged.",
			sustained, target)
	default:
		ratio := p.Sustained / bare.Sustained
		w("Sustained: %s, against %.0f bare workflows/s sustained on the same server in this run (the temporal scenario): %.2f × bare. "+
			"Target ≥ %.1f × bare: %s.", sustained, bare.Sustained, ratio, target, verdict(ratio >= target))
	}
	w("")
}
