package store

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// EventHandoff takes the workflow starts of committed webhook deliveries for an immediate
// dispatch (an outbox.Dispatcher).
type EventHandoff interface {
	Dispatch(items ...OutboxItem)
}

// eventHandoff is the store's hand-off, shared by the store and the transactions it opens.
type eventHandoff struct {
	to atomic.Pointer[handoffTo]
}

type handoffTo struct {
	h     EventHandoff
	grace time.Duration
}

// HandOffEvents makes every commit that records webhook deliveries (RecordEvent,
// RetryWebhookDelivery) hand their workflows' starts to h as soon as it has committed, so a
// delivery starts at once from the process that committed its event. The outbox rows are
// written as before, due only after grace: the sweep is the safety net for a start lost
// with its process or refused by Temporal, and leaves a start in flight alone. Without a
// hand-off the rows are due at once and the sweep starts them.
func (s *Store) HandOffEvents(h EventHandoff, grace time.Duration) {
	if h == nil {
		s.handoff.to.Store(nil)
		return
	}
	s.handoff.to.Store(&handoffTo{h: h, grace: grace})
}

// deliveryGrace is how long a fresh delivery's outbox row is left to the hand-off before
// the sweep takes it (0 without a hand-off).
func (s *Store) deliveryGrace() time.Duration {
	if s.handoff == nil {
		return 0
	}
	if to := s.handoff.to.Load(); to != nil {
		return to.grace
	}
	return 0
}

// HoldHandoff returns a view of s whose commits keep their deliveries' workflow starts instead
// of handing them off, and release, which hands off everything kept at once. A pass of many
// transactions (the pickup windows' due pass) starts its deliveries after its last commit
// rather than between its batches, where the starts would compete with the batches still to
// commit. Without a hand-off it returns s itself. The outbox rows are written as ever, so a
// start kept by a process that dies is the sweep's. Call it on the store, not inside WithTx
// (a transaction hands off at its own commit).
func (s *Store) HoldHandoff() (*Store, func()) {
	if s.handoff == nil || s.handoff.to.Load() == nil {
		return s, func() {}
	}
	kept := &keptStarts{}
	view := *s
	view.handoff = &eventHandoff{}
	view.handoff.to.Store(&handoffTo{h: kept, grace: s.handoff.to.Load().grace})
	return &view, func() {
		kept.mu.Lock()
		items := kept.items
		kept.items = nil
		kept.mu.Unlock()
		s.handoff.dispatch(items)
	}
}

// keptStarts is HoldHandoff's hand-off: it keeps the starts until release.
type keptStarts struct {
	mu    sync.Mutex
	items []OutboxItem
}

func (k *keptStarts) Dispatch(items ...OutboxItem) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.items = append(k.items, items...)
}

// committedDeliveries hands off items written by a statement of s: inside WithTx after the
// commit, outside it (the statement committed on its own) at once.
func (s *Store) committedDeliveries(items []OutboxItem) {
	if len(items) == 0 {
		return
	}
	if s.committed != nil {
		*s.committed = append(*s.committed, items...)
		return
	}
	s.handoff.dispatch(items)
}

func (h *eventHandoff) dispatch(items []OutboxItem) {
	if h == nil || len(items) == 0 {
		return
	}
	if to := h.to.Load(); to != nil {
		to.h.Dispatch(items...)
	}
}

// committedStart is a delivery's outbox row as the statement that wrote it returns it.
type committedStart struct {
	ID               int64             `json:"id"`
	WorkflowID       string            `json:"workflow_id"`
	WorkflowType     string            `json:"workflow_type"`
	Input            json.RawMessage   `json:"input"`
	SearchAttributes map[string]string `json:"search_attributes"`
}

// committedStartColumns is what an INSERT INTO workflow_outbox returns for the hand-off, and
// committedStartsAgg folds those rows (of a CTE named ob) into one jsonb array.
const (
	committedStartColumns = `id, workflow_id, workflow_type, input, search_attributes`
	committedStartsAgg    = `coalesce(jsonb_agg(jsonb_build_object('id', ob.id, 'workflow_id', ob.workflow_id,
		'workflow_type', ob.workflow_type, 'input', ob.input, 'search_attributes', ob.search_attributes)), '[]'::jsonb)`
)

func outboxItems(rows []committedStart) []OutboxItem {
	items := make([]OutboxItem, len(rows))
	for i, r := range rows {
		items[i] = OutboxItem{ID: r.ID, WorkflowID: r.WorkflowID, WorkflowType: r.WorkflowType, Input: r.Input,
			SearchAttributes: r.SearchAttributes}
	}
	return items
}
