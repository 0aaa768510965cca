package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// EndTokens records in tx, for each token, the signal that tells its workflow it ended with
// outcome (workflows.TokenOutcomeUsed, TokenOutcomeRevoked). It is the one rule for every
// change that ends tokens — a tower's events, an operator's service change — whoever makes
// it. orgID scopes the lookup (0: an operator, any organization); a token not found is
// skipped. The items returned carry their outbox ids, for the caller to dispatch after
// commit; the outbox sweep dispatches them after grace anyway.
func EndTokens(ctx context.Context, tx *store.Store, orgID int64, ids []uuid.UUID, outcome string, grace time.Duration) ([]store.OutboxItem, error) {
	items := make([]store.OutboxItem, 0, len(ids))
	for _, id := range ids {
		t, err := tx.Token(ctx, orgID, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		it, err := Enqueue(ctx, tx, TokenItem(t, workflows.SignalTokenEnded, outcome), grace)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// EndServiceChange records in tx the signals an operator's service change owes: its
// cancelled reservation and its revoked tokens are told they ended.
func EndServiceChange(ctx context.Context, tx *store.Store, towerID string, lockerID int64, ch store.ServiceChange, grace time.Duration) ([]store.OutboxItem, error) {
	var items []store.OutboxItem
	if ch.CancelledReservation != nil {
		r := store.Reservation{ID: *ch.CancelledReservation, TowerID: towerID, LockerID: lockerID, ExpiresAt: ch.CancelledReservationExpiresAt}
		it, err := Enqueue(ctx, tx, ReservationItem(r, 0, workflows.SignalReservationEnded, workflows.OutcomeCancelled), grace)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	ended, err := EndTokens(ctx, tx, 0, ch.RevokedTokens, workflows.TokenOutcomeRevoked, grace)
	return append(items, ended...), err
}

// Enqueue records item in tx's outbox and returns it with its outbox id.
func Enqueue(ctx context.Context, tx *store.Store, item store.OutboxItem, grace time.Duration) (store.OutboxItem, error) {
	id, err := tx.EnqueueWorkflow(ctx, item, grace)
	item.ID = id
	return item, err
}
