package outbox

import (
	"context"
	"time"

	"github.com/lockernet/lockernet/internal/store"
)

// Handoff takes committed items for an immediate dispatch (a *Dispatcher).
type Handoff interface {
	Dispatch(items ...store.OutboxItem)
}

// Change is a state change made in tx; it returns the workflow starts and signals it owes.
type Change func(tx *store.Store) ([]store.OutboxItem, error)

// Record is the one way a state change starts or signals workflows durably: it runs change
// in one transaction of st, writes the outbox items change returns in that same transaction
// (the sweep takes them after grace if nothing else did), and after the commit hands them to
// h for an immediate dispatch (nil h: the sweep alone). It returns the items with their
// outbox ids; nothing is dispatched when the transaction fails.
func Record(ctx context.Context, st *store.Store, grace time.Duration, h Handoff, change Change) ([]store.OutboxItem, error) {
	var items []store.OutboxItem
	err := st.WithTx(ctx, func(tx *store.Store) error {
		var err error
		if items, err = change(tx); err != nil {
			return err
		}
		return tx.EnqueueWorkflows(ctx, grace, items)
	})
	if err != nil {
		return nil, err
	}
	if h != nil && len(items) > 0 {
		h.Dispatch(items...)
	}
	return items, nil
}
