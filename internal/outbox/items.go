package outbox

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// item is a workflow start (and, with a signal, signal) with the attributes an operator
// filters it by in the Temporal UI.
func item(workflowID, workflowType string, input any, attrs contract.SearchAttrs, signal string, arg any) store.OutboxItem {
	in, _ := json.Marshal(input)
	it := store.OutboxItem{WorkflowID: workflowID, WorkflowType: workflowType, Input: in, SearchAttributes: attrs.Map()}
	if signal != "" {
		it.SignalName = signal
		it.SignalArg, _ = json.Marshal(arg)
	}
	return it
}

// ReservationItem is the outbox item that starts (and, with a signal, signals) the
// reservation's workflow.
func ReservationItem(r store.Reservation, orgID int64, signal string, arg any) store.OutboxItem {
	return item(contract.ReservationWorkflowID(r.ID.String()), contract.ReservationWorkflowName,
		contract.ReservationInput{ReservationID: r.ID.String(), ExpiresAt: r.ExpiresAt},
		contract.SearchAttrs{OrganizationID: orgID, LocationID: r.LocationID, TowerID: r.TowerID, LockerID: r.LockerID, RequestKind: "reservation"}, signal, arg)
}

// TokenItem is the outbox item that starts (and, with a signal, signals) a token's expiry
// workflow.
func TokenItem(t store.LockerToken, signal string, arg any) store.OutboxItem {
	return item(contract.LockerTokenWorkflowID(t.ID.String()), contract.LockerTokenWorkflowName,
		contract.LockerTokenInput{TokenID: t.ID.String(), Type: t.Type, ExpiresAt: t.ExpiresAt},
		contract.SearchAttrs{OrganizationID: t.OrgID, LocationID: t.LocationID, TowerID: t.TowerID, LockerID: t.LockerID, RequestKind: t.Type + "-token"}, signal, arg)
}

// WebhookDeliveryItem is the outbox item that starts the workflow of a delivery's current
// round; the store records the same row (contract.WebhookDelivery.Start) with the event it
// delivers.
func WebhookDeliveryItem(d store.PendingDelivery) store.OutboxItem {
	r := contract.WebhookDelivery{ID: d.ID.String(), Round: d.Round, OrgID: d.OrgID, EndpointID: d.EndpointID.String(), EventType: d.EventType}.Start()
	return store.OutboxItem{WorkflowID: r.WorkflowID, WorkflowType: r.WorkflowType, Input: r.Input, SearchAttributes: r.SearchAttributes}
}

// AccessCodeItem is the outbox item that starts (and, with a signal, signals) an access
// code's workflow.
func AccessCodeItem(c store.AccessCode, signal string, arg any) store.OutboxItem {
	return item(contract.AccessCodeWorkflowID(c.ID.String()), contract.AccessCodeWorkflowName,
		contract.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt},
		codeAttrs(c), signal, arg)
}

// AccessCodeCleanupItem starts the workflow of a code that never became active: it waits
// for the hold request to settle and releases whatever hold it left.
func AccessCodeCleanupItem(c store.AccessCode, holdRequest uuid.UUID) store.OutboxItem {
	return item(contract.AccessCodeWorkflowID(c.ID.String()), contract.AccessCodeWorkflowName,
		contract.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt, HoldRequestID: holdRequest.String(), Ended: true},
		codeAttrs(c), "", nil)
}

func codeAttrs(c store.AccessCode) contract.SearchAttrs {
	return contract.SearchAttrs{OrganizationID: c.OrganizationID, LocationID: c.LocationID, LockerID: int64(c.LockerID), RequestKind: "access-code"}
}

// PickupWindowItem is the outbox item that starts a pickup window's workflow (a window just
// opened) or, with changed, starts-or-signals it (the window changed outside it: extended,
// re-timed, marked for return, closed). Either way the input carries the window's next time as
// it is now.
func PickupWindowItem(w store.PickupWindow, changed bool) store.OutboxItem {
	signal, arg := "", any(nil)
	if changed {
		signal, arg = contract.SignalPickupWindowChanged, contract.PickupWindowChange{NextAt: w.NextAt()}
	}
	return item(contract.PickupWindowWorkflowID(w.ID.String()), contract.PickupWindowWorkflowName,
		contract.PickupWindowInput{WindowID: w.ID.String(), NextAt: w.NextAt()},
		contract.SearchAttrs{OrganizationID: w.OrgID, LocationID: w.LocationID, TowerID: w.TowerID, LockerID: w.LockerID,
			RequestKind: "pickup-window"}, signal, arg)
}

// PickupWindowItems are the items the token uses of an upload owe their pickup windows: a
// start for each window a drop-off opened, a signal for each a pickup closed.
func PickupWindowItems(uses []store.TokenUse) []store.OutboxItem {
	var items []store.OutboxItem
	for _, u := range uses {
		if u.Window != nil {
			items = append(items, PickupWindowItem(*u.Window, !u.Window.Live()))
		}
	}
	return items
}
