package outbox

import (
	"context"
	"fmt"

	"github.com/lockernet/lockernet/internal/store"
)

// RearmResult counts the workflows Rearm asked for.
type RearmResult struct {
	Reservations, Tokens, AccessCodes, WebhookDeliveries, PickupWindows int
}

// Total is every workflow asked for.
func (r RearmResult) Total() int {
	return r.Reservations + r.Tokens + r.AccessCodes + r.WebhookDeliveries + r.PickupWindows
}

// rearmBatch is how many outbox items one transaction of Rearm writes.
const rearmBatch = 500

// Rearm is the reconciler a restore runs (lockernet-admin restore, reconcile): it records in
// the outbox the start of the workflow of every reservation, locker token and access code
// whose row is active, with its original expiry, of every pickup window still open, with its
// next time, and of every webhook delivery still pending. The dispatcher starts each one that the
// restored Temporal state lacks; one already running is left as it is (the start uses the
// existing run), one that already finished is not started again (the id reuse policy refuses
// it and the client takes the refusal as the existing run; the sweeper writes back an expiry
// no workflow will). A
// workflow whose row the restore lost finds nothing to do when it runs: each of its
// activities acts only on an active row. Running it twice asks for the same workflows twice;
// the second ask changes nothing.
func Rearm(ctx context.Context, st *store.Store) (RearmResult, error) {
	var res RearmResult
	var items []store.OutboxItem
	rs, err := st.ActiveReservations(ctx)
	if res.Reservations, err = addItems(&items, rs, err, func(r store.Reservation) store.OutboxItem {
		return ReservationItem(r, r.OrganizationID, "", nil)
	}); err != nil {
		return res, err
	}
	ts, err := st.ActiveTokens(ctx)
	if res.Tokens, err = addItems(&items, ts, err, func(t store.LockerToken) store.OutboxItem { return TokenItem(t, "", nil) }); err != nil {
		return res, err
	}
	cs, err := st.ActiveAccessCodes(ctx)
	if res.AccessCodes, err = addItems(&items, cs, err, func(c store.AccessCode) store.OutboxItem { return AccessCodeItem(c, "", nil) }); err != nil {
		return res, err
	}
	ws, err := st.OpenPickupWindows(ctx)
	if res.PickupWindows, err = addItems(&items, ws, err, func(w store.PickupWindow) store.OutboxItem { return PickupWindowItem(w, false) }); err != nil {
		return res, err
	}
	ds, err := st.PendingWebhookDeliveries(ctx)
	if res.WebhookDeliveries, err = addItems(&items, ds, err, WebhookDeliveryItem); err != nil {
		return res, err
	}
	for len(items) > 0 {
		n := min(rearmBatch, len(items))
		if err := st.WithTx(ctx, func(tx *store.Store) error { return tx.EnqueueWorkflows(ctx, 0, items[:n]) }); err != nil {
			return res, fmt.Errorf("rearm workflows: %w", err)
		}
		items = items[n:]
	}
	return res, nil
}

// addItems appends the outbox item of each of list (read with error err) to items and
// returns how many it appended.
func addItems[T any](items *[]store.OutboxItem, list []T, err error, item func(T) store.OutboxItem) (int, error) {
	if err != nil {
		return 0, err
	}
	for _, v := range list {
		*items = append(*items, item(v))
	}
	return len(list), nil
}
