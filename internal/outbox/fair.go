package outbox

import (
	"context"
	"sync"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// fairQueue holds committed items waiting for a dispatch worker, one FIFO per organization,
// served round-robin: one organization's burst of thousands of starts delays another's next
// start by at most one item per busy organization, not by the whole burst.
type fairQueue struct {
	mu    sync.Mutex
	orgs  map[string][]store.OutboxItem
	ring  []string // organizations with items, in serving order
	next  int
	avail chan struct{} // one token per queued item
}

func newFairQueue(capacity int) *fairQueue {
	return &fairQueue{orgs: map[string][]store.OutboxItem{}, avail: make(chan struct{}, capacity)}
}

// orgOf is the organization an item belongs to (its OrganizationId search attribute; items
// without one share a queue).
func orgOf(it store.OutboxItem) string {
	return it.SearchAttributes[contract.AttrOrganizationID.GetName()]
}

// push queues it; false when the queue is full (the item stays in the table for the sweep).
func (q *fairQueue) push(it store.OutboxItem) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case q.avail <- struct{}{}:
	default:
		return false
	}
	org := orgOf(it)
	if len(q.orgs[org]) == 0 {
		q.ring = append(q.ring, org)
	}
	q.orgs[org] = append(q.orgs[org], it)
	return true
}

// pop waits for an item and takes the next organization's oldest; false when ctx is done.
func (q *fairQueue) pop(ctx context.Context) (store.OutboxItem, bool) {
	select {
	case <-ctx.Done():
		return store.OutboxItem{}, false
	case <-q.avail:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next >= len(q.ring) {
		q.next = 0
	}
	org := q.ring[q.next]
	items := q.orgs[org]
	it := items[0]
	if len(items) == 1 {
		delete(q.orgs, org)
		q.ring = append(q.ring[:q.next], q.ring[q.next+1:]...)
	} else {
		q.orgs[org] = items[1:]
		q.next++
	}
	return it, true
}
