package outbox

import (
	"context"
	"fmt"

	"github.com/lockernet/lockernet/internal/store"
)

// RearmResult counts the workflows Rearm asked for.
type RearmResult struct {
	Reservations, Tokens, AccessCodes, WebhookDeliveries int
}

// Total is every workflow asked for.
func (r RearmResult) Total() int {
	return r.Reservations + r.Tokens + r.AccessCodes + r.WebhookDeliveries
}

// rearmBatch is how many outbox items one transaction of Rearm writes.
const rearmBatch = 500

// Rearm is the reconciler a restore runs (lockernet-admin restore, reconcile): it records in
// the outbox the start of the workflow of every reservation, locker token and access code
// whose row is active, with its original expiry, and of every webhook delivery still pending. The dispatcher starts each one that the
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
	if err != nil {
		return res, err
	}
	for _, r := range rs {
		items = append(items, ReservationItem(r, r.OrganizationID, "", nil))
	}
	res.Reservations = len(rs)
	ts, err := st.ActiveTokens(ctx)
	if err != nil {
		return res, err
	}
	for _, t := range ts {
		items = append(items, TokenItem(t, "", nil))
	}
	res.Tokens = len(ts)
	cs, err := st.ActiveAccessCodes(ctx)
	if err != nil {
		return res, err
	}
	for _, c := range cs {
		items = append(items, AccessCodeItem(c, "", nil))
	}
	res.AccessCodes = len(cs)
	ds, err := st.PendingWebhookDeliveries(ctx)
	if err != nil {
		return res, err
	}
	for _, d := range ds {
		items = append(items, WebhookDeliveryItem(d))
	}
	res.WebhookDeliveries = len(ds)
	for len(items) > 0 {
		n := min(rearmBatch, len(items))
		if err := st.WithTx(ctx, func(tx *store.Store) error { return tx.EnqueueWorkflows(ctx, 0, items[:n]) }); err != nil {
			return res, fmt.Errorf("rearm workflows: %w", err)
		}
		items = items[n:]
	}
	return res, nil
}
