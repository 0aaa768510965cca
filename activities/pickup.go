package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/store"
)

// PickupStore is what the pickup-window activity needs from Postgres.
type PickupStore interface {
	PickupWindowDue(ctx context.Context, id uuid.UUID) (store.PickupWindow, error)
}

// PickupWindowDueInput names the window whose timer fired.
type PickupWindowDueInput struct {
	WindowID string
}

// PickupWindowDueResult is the window after its step: its status, and when its workflow must
// act next (zero: nothing more is scheduled).
type PickupWindowDueResult struct {
	Status string
	NextAt time.Time
}

// PickupWindowDue runs a window's step (store.PickupWindowDue): the reminder or the overdue
// mark that is due, once. A window that no longer exists (restored without it) ends the
// workflow without side effects.
func (a *Activities) PickupWindowDue(ctx context.Context, in PickupWindowDueInput) (PickupWindowDueResult, error) {
	id, err := uuid.Parse(in.WindowID)
	if err != nil {
		return PickupWindowDueResult{}, temporal.NewNonRetryableApplicationError("bad pickup window id", "InvalidInput", err)
	}
	w, err := a.Pickups.PickupWindowDue(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return PickupWindowDueResult{Status: "missing"}, nil
	}
	if err != nil {
		return PickupWindowDueResult{}, fmt.Errorf("pickup window step: %w", err)
	}
	return PickupWindowDueResult{Status: w.Status, NextAt: w.NextAt()}, nil
}
