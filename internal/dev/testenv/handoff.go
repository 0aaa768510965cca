package testenv

import (
	"sync"

	"github.com/lockernet/lockernet/internal/store"
)

// HandedOff is a store.EventHandoff that keeps what it is handed, for a test to take.
type HandedOff struct {
	mu    sync.Mutex
	items []store.OutboxItem
}

// Dispatch keeps items.
func (h *HandedOff) Dispatch(items ...store.OutboxItem) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = append(h.items, items...)
}

// Take returns what was handed off since the last Take.
func (h *HandedOff) Take() []store.OutboxItem {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.items
	h.items = nil
	return out
}
