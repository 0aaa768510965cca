package outbox

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// EndTokens is, for each token, the signal that tells its workflow it ended with outcome
// (contract.TokenOutcomeUsed, TokenOutcomeRevoked), read in tx. It is the one rule for
// every change that ends tokens — a tower's events, an operator's service change — whoever
// makes it; the change's Record writes the items. orgID scopes the lookup (0: an operator,
// any organization); a token not found is skipped.
func EndTokens(ctx context.Context, tx *store.Store, orgID int64, ids []uuid.UUID, outcome string) ([]store.OutboxItem, error) {
	items := make([]store.OutboxItem, 0, len(ids))
	for _, id := range ids {
		t, err := tx.Token(ctx, orgID, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		items = append(items, TokenItem(t, contract.SignalTokenEnded, outcome))
	}
	return items, nil
}

// EndServiceChange is the signals an operator's service change owes: its cancelled
// reservation and its revoked tokens are told they ended.
func EndServiceChange(ctx context.Context, tx *store.Store, towerID string, lockerID int64, ch store.ServiceChange) ([]store.OutboxItem, error) {
	var items []store.OutboxItem
	if ch.CancelledReservation != nil {
		r := store.Reservation{ID: *ch.CancelledReservation, TowerID: towerID, LockerID: lockerID, ExpiresAt: ch.CancelledReservationExpiresAt}
		items = append(items, ReservationItem(r, 0, contract.SignalReservationEnded, contract.OutcomeCancelled))
	}
	ended, err := EndTokens(ctx, tx, 0, ch.RevokedTokens, contract.TokenOutcomeRevoked)
	return append(items, ended...), err
}
