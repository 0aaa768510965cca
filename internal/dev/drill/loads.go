package drill

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// The client loops the drills run against their system, whatever its shape: gateway opens
// sent asynchronously and polled (opens), gateway opens offered at a fixed rate and sent
// until answered (openLoad), and the tally of what their clients saw (outcomeTally).

// outcomeTally is what a drill's clients saw of their idempotent calls, reduced for the
// report.
type outcomeTally struct {
	answered, lost int
	sends, errors  int // HTTP exchanges, and those that failed
	hit            int // clients with a failed exchange, who sent their call again
	multi          int // keys that stood for more than one request (X-Request-Id)
	states         map[string]int
	settled        []time.Time     // when each answered client had its answer
	retried        []time.Time     // the same, for the clients that were hit
	waits          []time.Duration // each answered client's time to its answer
	failures       map[string]int  // failed exchanges by kind (failureKind)
}

// tallyOutcomes reduces the clients' outcomes, logging each client left without an answer.
func tallyOutcomes(outs []clientOutcome) outcomeTally {
	t := outcomeTally{states: map[string]int{}, failures: map[string]int{}}
	for i, out := range outs {
		t.sends += out.sends
		t.errors += out.errors
		for k, n := range out.failures {
			t.failures[k] += n
		}
		if out.errors > 0 {
			t.hit++
		}
		if len(out.ids) > 1 {
			t.multi++
		}
		if !out.done {
			t.lost++
			logf("  client %d never got an answer: %s", i, out.lastErr)
			continue
		}
		t.answered++
		t.states[out.final.state]++
		t.settled = append(t.settled, out.settled)
		t.waits = append(t.waits, out.settled.Sub(out.started))
		if out.errors > 0 {
			t.retried = append(t.retried, out.settled)
		}
	}
	return t
}

// openAnswers pairs each open's outcome with its locker, for the door account.
func openAnswers(outs []clientOutcome, targets []target) []openAnswer {
	out := make([]openAnswer, len(outs))
	for i, o := range outs {
		out[i] = openAnswer{t: targets[i], answered: o.done, state: o.final.state, body: o.final.body}
	}
	return out
}

// openLoad is an open-loop load of gateway opens: each on a fresh locker, with an
// Idempotency-Key and Prefer: wait=10, sent again with the same key until it has its
// terminal answer.
type openLoad struct {
	mu      sync.Mutex
	outs    []clientOutcome
	targets []target
	err     error // set when the pool ran out of lockers
}

// run offers rate opens a second for d and returns once every one has its answer or ctx
// has ended.
func (l *openLoad) run(ctx context.Context, c *cloud, pool *lockerPool, rate float64, d time.Duration) {
	loadclient.OpenLoop(ctx, rate, d, 0, func(ctx context.Context, _ int, _ time.Time) {
		t, err := pool.take(-1)
		if err != nil {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			return
		}
		out := c.untilAnswered(ctx, http.MethodPost, openPath(t.gw.locationID, t.locker), nil, newKey(), 10)
		l.mu.Lock()
		l.outs, l.targets = append(l.outs, out), append(l.targets, t)
		l.mu.Unlock()
	})
}

// waitingClients are clients that each open a locker of their own at once and wait
// (Prefer: wait) until they have the terminal answer, sending the call again with the same
// key after an error or a 202.
type waitingClients struct {
	outs    []clientOutcome
	targets []target
	wg      sync.WaitGroup
}

// startWaiting starts one client per target; call wait for their outcomes. A client whose
// call is not an open (create) sends that instead.
func startWaiting(ctx context.Context, c *cloud, targets []target, wait int, create func(i int) (path string, body []byte, ok bool)) *waitingClients {
	w := &waitingClients{outs: make([]clientOutcome, len(targets)), targets: targets}
	for i := range targets {
		w.wg.Add(1)
		go func(i int) {
			defer w.wg.Done()
			if create != nil {
				if path, body, ok := create(i); ok {
					w.outs[i] = c.untilAnswered(ctx, http.MethodPost, path, body, newKey(), wait)
					return
				}
			}
			t := targets[i]
			w.outs[i] = c.untilAnswered(ctx, http.MethodPost, openPath(t.gw.locationID, t.locker), nil, newKey(), wait)
		}(i)
	}
	return w
}

// wait returns every client's outcome once each has one or has given up.
func (w *waitingClients) wait() []clientOutcome {
	w.wg.Wait()
	return w.outs
}

// opens are door opens sent asynchronously and then polled.
type opens []*asyncOpen

type asyncOpen struct {
	t     target
	key   string // its Idempotency-Key
	id    string
	err   string
	final answer
}

// submitOpens sends n opens on fresh lockers with Prefer: respond-async, each retried with
// its Idempotency-Key until it is accepted (or a minute passes).
func submitOpens(ctx context.Context, c *cloud, pool *lockerPool, n int) (opens, error) {
	targets := make([]target, n)
	for i := range targets {
		t, err := pool.take(-1)
		if err != nil {
			return nil, err
		}
		targets[i] = t
	}
	return sendOpens(ctx, c, targets), nil
}

// sendOpens opens each target's locker as submitOpens does.
func sendOpens(ctx context.Context, c *cloud, targets []target) opens {
	out := make(opens, len(targets))
	for i, t := range targets {
		out[i] = &asyncOpen{t: t, key: newKey()}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	parallel(len(out), 32, func(i int) {
		q := out[i]
		for {
			a, err := c.do(sctx, http.MethodPost, openPath(q.t.gw.locationID, q.t.locker), nil,
				map[string]string{"Idempotency-Key": q.key, "Prefer": "respond-async"})
			if err == nil && a.requestID != "" {
				q.id = a.requestID
				return
			}
			if err != nil {
				q.err = err.Error()
			} else {
				q.err = fmt.Sprintf("HTTP %d: %s", a.status, loadclient.Excerpt(a.body))
			}
			select {
			case <-sctx.Done():
				logf("  an open was never accepted: %s", q.err)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return out
}

// replayMismatches sends every settled open's call once more with its Idempotency-Key, as a
// client that never saw the outcome would, and counts the replays that do not answer the
// outcome the client polled (status, body, X-Request-Id, X-Request-State) or are not marked
// Idempotent-Replayed. It returns the mismatches and the replays sent.
func (b opens) replayMismatches(ctx context.Context, c *cloud) (mismatch, replayed int) {
	var mu sync.Mutex
	parallel(len(b), 16, func(i int) {
		q := b[i]
		if q.id == "" || !q.final.terminal() {
			return
		}
		a, err := c.do(ctx, http.MethodPost, openPath(q.t.gw.locationID, q.t.locker), nil,
			map[string]string{"Idempotency-Key": q.key, "Prefer": "wait=0"})
		same := err == nil && a.status == q.final.status && bytes.Equal(a.body, q.final.body) &&
			a.requestID == q.id && a.state == q.final.state && a.replayed
		mu.Lock()
		defer mu.Unlock()
		replayed++
		if same {
			return
		}
		mismatch++
		if err != nil {
			logf("  replay of %s: %v", q.key, err)
		} else {
			logf("  replay of %s differs: HTTP %d %s %q vs HTTP %d %s %q", q.key, a.status, a.state, loadclient.Excerpt(a.body),
				q.final.status, q.final.state, loadclient.Excerpt(q.final.body))
		}
	})
	return mismatch, replayed
}

// checkReplays replays every settled open with its key (replayMismatches) and checks that
// each replay answered the same outcome.
func checkReplays(ctx context.Context, r *result, c *cloud, b opens) {
	mismatch, replayed := b.replayMismatches(ctx, c)
	r.verify(mismatch == 0, "a retry of each open with its Idempotency-Key answers the same outcome (status, body, X-Request-Id, "+
		"X-Request-State, Idempotent-Replayed)", "%d of %d differ", mismatch, replayed)
}
