package gatewayexec

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
)

// outcomeWaiters wakes the handlers waiting for a gateway request's outcome as soon as it
// is stored. Two ways, whichever comes first:
//   - in this process (handOff): the request's workflow ran on this apiserver's own
//     gateway worker — eager start makes that the common case — and its FinishGatewayRequest
//     activity hands over the stored row, so the handler answers without reading it again;
//   - from any instance (notify): Postgres announces the id at commit (LISTEN/NOTIFY on
//     store.GatewayOutcomeChannel), and the handler reads the row.
//
// Either is sooner than the workflow's result: the workflow stores the outcome, then
// completes its task, and the history write and long poll behind that would add several
// milliseconds to every answer. The workflow result stays the fallback, so nothing depends
// on a notification arriving.
type outcomeWaiters struct {
	mu      sync.Mutex
	waiting map[uuid.UUID]map[*outcomeWaiter]struct{}
}

// outcomeWaiter is one handler waiting: done is closed once the outcome is stored; row is
// then the stored request when it was handed over in this process, else nil (read it).
type outcomeWaiter struct {
	done chan struct{}
	row  *store.GatewayRequest
}

func newOutcomeWaiters() *outcomeWaiters {
	return &outcomeWaiters{waiting: map[uuid.UUID]map[*outcomeWaiter]struct{}{}}
}

// wait registers a waiter for the request and returns it with the function that stops
// waiting.
func (w *outcomeWaiters) wait(id uuid.UUID) (*outcomeWaiter, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &outcomeWaiter{done: make(chan struct{})}
	if w.waiting[id] == nil {
		w.waiting[id] = map[*outcomeWaiter]struct{}{}
	}
	w.waiting[id][o] = struct{}{}
	return o, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.waiting[id]; ok {
			delete(set, o)
			if len(set) == 0 {
				delete(w.waiting, id)
			}
		}
	}
}

// notify wakes every handler waiting for the request; they read the stored row.
func (w *outcomeWaiters) notify(id uuid.UUID) { w.wake(id, nil) }

// handOff wakes every handler waiting for the request with its stored, terminal row.
func (w *outcomeWaiters) handOff(row store.GatewayRequest) {
	if row.Terminal() {
		w.wake(row.ID, &row)
	}
}

func (w *outcomeWaiters) wake(id uuid.UUID, row *store.GatewayRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for o := range w.waiting[id] {
		o.row = row
		close(o.done)
	}
	delete(w.waiting, id)
}

// OutcomeStored hands a gateway request's stored outcome to the handlers of this process
// waiting for it. The apiserver's own gateway worker calls it (activities.GatewayDeps.Stored),
// so an answer needs neither the notification from Postgres nor another read of the row.
func (g *Executor) OutcomeStored(row store.GatewayRequest) { g.outcomes.handOff(row) }

// Listen keeps the outcome listener running until ctx is done, listening again after a lost
// connection; meanwhile waits end on workflow results alone.
func (g *Executor) Listen(ctx context.Context) {
	w := g.outcomes
	for {
		err := g.store.ListenGatewayOutcomes(ctx, func() {}, w.notify)
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
