package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// flowResult is the tower-flow scenario's outcome.
type flowResult struct {
	Rate, Achieved float64
	Duration       time.Duration
	Flow, Reserve  summary
	Token          summary
	Skipped        int
	OutboxBacklog  int
	OutboxDrain    time.Duration
	DrainRate      float64 // workflow starts a second while catching up
}

// runFlow drives reservation + drop-off token on a fresh locker, rate flows a second, for d.
func runFlow(ctx context.Context, b *bench, rate float64, d time.Duration) (flowResult, error) {
	if _, err := b.api.bearer(ctx); err != nil {
		return flowResult{}, err
	}
	flow, reserve, token := newSample("flow (reservation + drop-off token)"), newSample("create reservation"), newSample("create drop-off token")
	var next atomic.Int64
	lockers := b.data.flowLockers
	start := time.Now()
	sent, skipped := openLoop(ctx, rate, d, 512, func(ctx context.Context, _ int, scheduled time.Time) {
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
		r, err = b.api.authed(ctx, http.MethodPost, path+"dropoff-locker-tokens", map[string]any{"duration": 300, "client_info": "bench"})
		if err != nil || r.status != http.StatusCreated {
			token.fail()
			flow.fail()
			return
		}
		token.add(r.latency)
		flow.add(time.Since(scheduled))
	})
	elapsed := time.Since(start)
	res := flowResult{Rate: rate, Duration: d, Flow: flow.summary(), Reserve: reserve.summary(), Token: token.summary(), Skipped: skipped}
	res.Achieved = float64(res.Flow.Count) / elapsed.Seconds()
	_ = sent
	// The workflows start through the outbox: how far behind is Temporal, and how fast does
	// it catch up? (Measured over at most a minute; the rest is extrapolated.)
	var err error
	if res.OutboxBacklog, err = outboxBacklog(ctx, b); err != nil {
		return res, err
	}
	drainStart := time.Now()
	for time.Since(drainStart) < time.Minute {
		time.Sleep(time.Second)
		n, err := outboxBacklog(ctx, b)
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
	}
	left, err := outboxBacklog(ctx, b)
	if err != nil {
		return res, err
	}
	res.DrainRate = float64(res.OutboxBacklog-left) / time.Since(drainStart).Seconds()
	if left > 0 && res.DrainRate > 0 {
		res.OutboxDrain = time.Since(drainStart) + time.Duration(float64(left)/res.DrainRate*float64(time.Second))
	} else {
		res.OutboxDrain = time.Since(drainStart)
	}
	return res, nil
}

func outboxBacklog(ctx context.Context, b *bench) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_outbox`).Scan(&n)
	return n, err
}

// waitForQuiet waits (up to limit) until no workflow start is queued, so one scenario's
// backlog does not weigh on the next one's figures.
func waitForQuiet(ctx context.Context, b *bench, limit time.Duration) {
	start := time.Now()
	for time.Since(start) < limit {
		n, err := outboxBacklog(ctx, b)
		if err != nil {
			return
		}
		// The workflow tasks an earlier scenario left queued in Temporal (timers firing,
		// first tasks) would be measured too.
		tasks := b.taskBacklog(ctx)
		if n == 0 && tasks < 50 {
			return
		}
		logf("waiting for %d queued workflow starts and %d queued Temporal tasks before the next scenario", n, tasks)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}
