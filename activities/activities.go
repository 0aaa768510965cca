// Package activities holds the Temporal activities: the workflows' only way to touch
// Postgres, the gateways or anything else outside the workflow. Each is idempotent, so a
// retry after a lost answer repeats nothing.
package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/store"
)

// ReservationStore is what the reservation activities need from Postgres.
type ReservationStore interface {
	ExpireReservation(ctx context.Context, id uuid.UUID) (bool, error)
}

// Activities holds the dependencies shared by all activities of the worker.
type Activities struct {
	Reservations ReservationStore
	Tokens       TokenStore
	AccessCodes  AccessCodeStore
	Pickups      PickupStore
	Gateways     GatewayDeps  // the gateway cloud API's requests (gateway.go)
	Webhooks     *WebhookDeps // webhook deliveries (webhooks.go)
}

// ExpireReservationInput names the reservation whose timer fired.
type ExpireReservationInput struct {
	ReservationID string
}

// ExpireReservationResult tells whether the expiry changed anything.
type ExpireReservationResult struct {
	// Expired is false when the reservation had already ended (consumed or cancelled).
	Expired bool
}

// ExpireReservation marks the reservation expired and frees its locker if it still holds it.
func (a *Activities) ExpireReservation(ctx context.Context, in ExpireReservationInput) (ExpireReservationResult, error) {
	expired, err := applyExpiry(ctx, "reservation", in.ReservationID, a.Reservations.ExpireReservation)
	return ExpireReservationResult{Expired: expired}, err
}

// applyExpiry runs a store's expiry write-back for the thing with id: a malformed id is
// permanent, a "not due yet" (the database clock a moment behind the timer) is retried.
func applyExpiry(ctx context.Context, what, rawID string, expire func(context.Context, uuid.UUID) (bool, error)) (bool, error) {
	id, err := uuid.Parse(rawID)
	if err != nil {
		return false, temporal.NewNonRetryableApplicationError("bad "+what+" id", "InvalidInput", err)
	}
	expired, err := expire(ctx, id)
	if errors.Is(err, store.ErrNotDue) {
		return false, temporal.NewApplicationError(what+" not due yet", "NotDue")
	}
	if err != nil {
		return false, fmt.Errorf("expire %s: %w", what, err)
	}
	activity.GetLogger(ctx).Info(what+" expiry applied", "id", rawID, "expired", expired)
	return expired, nil
}
