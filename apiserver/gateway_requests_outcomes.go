package apiserver

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// outcomeWaiters wakes the handlers waiting for a gateway request's outcome as soon as
// Postgres announces it (LISTEN/NOTIFY on store.GatewayOutcomeChannel): the workflow writes
// the outcome, then completes its workflow task, and the history write and long poll behind
// that completion would add several milliseconds to every answer. The workflow result stays
// the fallback, so nothing depends on a notification arriving.
type outcomeWaiters struct {
	mu        sync.Mutex
	listening bool
	waiting   map[uuid.UUID]map[chan struct{}]struct{}
}

func newOutcomeWaiters() *outcomeWaiters {
	return &outcomeWaiters{waiting: map[uuid.UUID]map[chan struct{}]struct{}{}}
}

// wait returns a channel closed when the request's outcome is announced (nil when nobody
// listens, so it never fires) and the function that stops waiting.
func (w *outcomeWaiters) wait(id uuid.UUID) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.listening {
		return nil, func() {}
	}
	ch := make(chan struct{})
	if w.waiting[id] == nil {
		w.waiting[id] = map[chan struct{}]struct{}{}
	}
	w.waiting[id][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.waiting[id]; ok {
			if _, ok := set[ch]; ok {
				delete(set, ch)
				close(ch)
			}
			if len(set) == 0 {
				delete(w.waiting, id)
			}
		}
	}
}

// notify wakes every handler waiting for the request.
func (w *outcomeWaiters) notify(id uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiting[id] {
		close(ch)
	}
	delete(w.waiting, id)
}

func (w *outcomeWaiters) setListening(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Whoever waits while nobody listens simply gets the workflow result.
	w.listening = on
}

// listen keeps the outcome listener running until ctx is done, listening again after a lost
// connection; meanwhile waits end on workflow results alone.
func (g *gatewayRequests) listen(ctx context.Context) {
	w := g.outcomes
	for {
		err := g.store.ListenGatewayOutcomes(ctx, func() { w.setListening(true) }, w.notify)
		w.setListening(false)
		if ctx.Err() != nil {
			return
		}
		g.logger.WarnContext(ctx, "listen for gateway request outcomes; answers wait for workflow results meanwhile", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
