package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/workflows/contract"
)

// sustainWindow is how long a rate must hold before the report calls it sustained.
const sustainWindow = time.Minute

// maxOutboxLag is the outbox lag (the age of the oldest workflow start not yet handed to
// Temporal) whose p99 over a step may not be exceeded for the step to be sustained.
const maxOutboxLag = time.Second

// flowStep is one offered rate of the tower flow.
type flowStep struct {
	Rate, Achieved float64
	Duration       time.Duration
	Flow, Reserve  summary
	Token          summary
	Skipped        int
	ServerErrors   int
	// Lag is the outbox lag sampled every half second during the step.
	Lag summary
	// OutboxEnd and TasksEnd are the workflow starts still in the outbox and the tasks
	// queued in Temporal at the end of the step.
	OutboxEnd int
	TasksEnd  int64
	// LastSecond is the reservations of the flows answered in the load's last second;
	// NotEnded those of them whose workflow had not ended a second after the load (the
	// drop-off token's signal ends it: a backlog of signal tasks, which TasksEnd does not
	// see — they wait on the worker's sticky queue or in the history service's queues).
	LastSecond, NotEnded int
	// Held: every criterion met during the step; Sustained: held for sustainWindow at least.
	Held, Sustained bool
	Why             []string
}

// flowResult is the tower-flow scenario's outcome: one step per offered rate, up to the
// first that was not held.
type flowResult struct {
	Step  time.Duration
	Steps []flowStep
	// Sustained is the highest rate sustained (0: none).
	Sustained float64
}

// runFlowSteps offers the tower flow at each rate the ladder picks in turn for d, from a
// quiet system each time: the listed rates up to the first the system did not hold, then
// (with -refine) rates between the highest held and the lowest not held.
func runFlowSteps(ctx context.Context, b *bench, l *ladder, d time.Duration) (flowResult, error) {
	res := flowResult{Step: d}
	for rate, ok := l.rate(); ok && ctx.Err() == nil; rate, ok = l.rate() {
		if len(res.Steps) > 0 {
			waitForQuiet(ctx, b, 10*time.Minute)
		}
		if err := resetBench(ctx, b.pool, b.data.orgID); err != nil {
			return res, err
		}
		logf("%s: flow: %.0f flows/s for %s", b.shape.key, rate, d)
		st, err := runFlow(ctx, b, rate, d)
		if err != nil {
			return res, err
		}
		res.Steps = append(res.Steps, st)
		logf("%s: flow: %.0f flows/s: achieved %.1f/s, p99 %s, outbox lag p99 %s; %s", b.shape.key, rate, st.Achieved,
			ms(st.Flow.P99), ms(st.Lag.P99), stepVerdict(st.Held, st.Sustained, st.Why))
		if st.Sustained {
			res.Sustained = max(res.Sustained, rate)
		}
		l.record(rate, st.Held)
	}
	return res, ctx.Err()
}

// stepVerdict says in words whether a step held and for long enough.
func stepVerdict(held, sustained bool, why []string) string {
	switch {
	case sustained:
		return "sustained"
	case held:
		return "held, " + strings.Join(why, "; ")
	default:
		return "**not sustained**: " + strings.Join(why, "; ")
	}
}

// runFlow drives reservation + drop-off token on a fresh locker, rate flows a second, for d,
// sampling the outbox lag meanwhile.
func runFlow(ctx context.Context, b *bench, rate float64, d time.Duration) (flowStep, error) {
	if _, err := b.api.bearer(ctx); err != nil {
		return flowStep{}, err
	}
	flow, reserve, token := newSample("flow (reservation + drop-off token)"), newSample("create reservation"), newSample("create drop-off token")
	lag := newSample("outbox lag")
	var next atomic.Int64
	var answeredMu sync.Mutex
	var answered []answeredFlow
	lockers := b.data.flowLockers
	before := b.api.statusCounts()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan error, 1)
	go func() { sampled <- sampleOutboxLag(sctx, b, lag) }()
	start := time.Now()
	_, skipped := loadclient.OpenLoop(ctx, rate, d, 512, func(ctx context.Context, _ int, scheduled time.Time) {
		i := int(next.Add(1)) - 1
		if i >= len(lockers) {
			flow.fail()
			return
		}
		l := lockers[i]
		path := fmt.Sprintf("/api/v1/towers/%s/lockers/%d/", l.TowerID, l.ID)
		r, err := b.api.authed(ctx, http.MethodPost, path+"reservations", map[string]any{"duration": 600})
		if err != nil || r.status != http.StatusCreated {
			reserve.fail()
			flow.fail()
			return
		}
		reserve.add(r.latency)
		var rsv struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(r.body, &rsv)
		r, err = b.api.authed(ctx, http.MethodPost, path+"dropoff-locker-tokens", map[string]any{"duration": 300, "client_info": "bench"})
		if err != nil || r.status != http.StatusCreated {
			token.fail()
			flow.fail()
			return
		}
		token.add(r.latency)
		flow.add(time.Since(scheduled))
		answeredMu.Lock()
		answered = append(answered, answeredFlow{reservation: rsv.ID, at: time.Now()})
		answeredMu.Unlock()
	})
	loadEnd := time.Now()
	elapsed := time.Since(start)
	stopSampling()
	if err := <-sampled; err != nil {
		return flowStep{}, err
	}
	st := flowStep{Rate: rate, Duration: d, Flow: flow.summary(), Reserve: reserve.summary(), Token: token.summary(),
		Skipped: skipped, Lag: lag.summary()}
	st.Achieved = float64(st.Flow.Count) / elapsed.Seconds()
	for _, n := range b.api.serverErrorsSince(before) {
		st.ServerErrors += n
	}
	var err error
	if st.OutboxEnd, err = outboxBacklog(ctx, b); err != nil {
		return st, err
	}
	st.TasksEnd = b.taskBacklog(ctx)
	// Each flow starts two workflows (reservation and token): a second of them is 2 × rate.
	if st.Lag.P99 > maxOutboxLag {
		st.Why = append(st.Why, fmt.Sprintf("outbox lag p99 %s > 1 s", ms(st.Lag.P99)))
	}
	answeredMu.Lock()
	st.LastSecond, st.NotEnded = b.reservationsNotEnded(ctx, answered, loadEnd)
	answeredMu.Unlock()
	if st.NotEnded > 0 {
		st.Why = append(st.Why, fmt.Sprintf("%d of the load's last second's %d reservations not ended a second after it", st.NotEnded, st.LastSecond))
	}
	if st.TasksEnd > int64(2*rate) {
		st.Why = append(st.Why, fmt.Sprintf("%d tasks queued in Temporal at the end, more than a second of starts (%.0f)", st.TasksEnd, 2*rate))
	}
	if st.Flow.Errors > 0 {
		st.Why = append(st.Why, fmt.Sprintf("%d flows failed", st.Flow.Errors))
	}
	if st.ServerErrors > 0 {
		st.Why = append(st.Why, fmt.Sprintf("%d 5xx answers", st.ServerErrors))
	}
	if skipped > 0 {
		st.Why = append(st.Why, fmt.Sprintf("%d flows not sent (512 in flight)", skipped))
	}
	st.Held = len(st.Why) == 0
	st.Sustained = st.Held && d >= sustainWindow
	if st.Held && !st.Sustained {
		st.Why = append(st.Why, fmt.Sprintf("but for %s only, under the %s the criterion needs", d, sustainWindow))
	}
	return st, nil
}

// answeredFlow is a flow whose drop-off token was answered: its reservation's id and when.
type answeredFlow struct {
	reservation string
	at          time.Time
}

// reservationsNotEnded waits until a second after loadEnd and counts, of the reservations
// of the flows answered in the load's last second, those whose workflow is still running
// (the drop-off token's signal, which ends it, not yet worked off). Without a Temporal
// client it counts nothing.
func (b *bench) reservationsNotEnded(ctx context.Context, flows []answeredFlow, loadEnd time.Time) (last, notEnded int) {
	if b.temporal == nil {
		return 0, 0
	}
	time.Sleep(time.Until(loadEnd.Add(time.Second)))
	for _, f := range flows {
		if f.reservation == "" || f.at.Before(loadEnd.Add(-time.Second)) {
			continue
		}
		last++
		d, err := b.temporal.DescribeWorkflowExecution(ctx, contract.ReservationWorkflowID(f.reservation), "")
		if err != nil || d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			notEnded++
		}
	}
	return last, notEnded
}

// sampleOutboxLag adds the outbox lag to s every half second until ctx is done.
func sampleOutboxLag(ctx context.Context, b *bench, s *sample) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		_, oldest, err := b.store.OutboxBacklog(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.add(oldest)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func outboxBacklog(ctx context.Context, b *bench) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_outbox`).Scan(&n)
	return n, err
}

// waitForQuiet waits (up to limit) until the system has worked off what the step before left:
// no workflow start queued in the outbox, no task queued in any of Temporal's task queues the
// service or the bench use, and no short-lived workflow (a gateway request, a bench workflow)
// still running — so one step's backlog does not weigh on the next one's figures. Long-lived
// workflows (reservations, tokens, access codes on their timers) do not count.
func waitForQuiet(ctx context.Context, b *bench, limit time.Duration) {
	start := time.Now()
	for {
		n, err := outboxBacklog(ctx, b)
		if err != nil {
			return
		}
		tasks := b.taskBacklog(ctx)
		running := b.shortLivedRunning(ctx)
		if n == 0 && tasks == 0 && running == 0 {
			return
		}
		if time.Since(start) >= limit {
			logf("still %d queued workflow starts, %d queued Temporal tasks and %d short-lived workflows running after %s; going on", n, tasks, running, limit)
			return
		}
		logf("waiting for %d queued workflow starts, %d queued Temporal tasks and %d short-lived workflows running before the next step", n, tasks, running)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}
