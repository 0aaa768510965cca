package outbox

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/outbox/webhookrow"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// item is a workflow start (and, with a signal, signal) with the attributes an operator
// filters it by in the Temporal UI.
func item(workflowID, workflowType string, input any, attrs workflows.SearchAttrs, signal string, arg any) store.OutboxItem {
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
	return item(workflows.ReservationWorkflowID(r.ID.String()), workflows.ReservationWorkflowName,
		workflows.ReservationInput{ReservationID: r.ID.String(), ExpiresAt: r.ExpiresAt},
		workflows.SearchAttrs{OrganizationID: orgID, LocationID: r.LocationID, TowerID: r.TowerID, LockerID: r.LockerID, RequestKind: "reservation"}, signal, arg)
}

// TokenItem is the outbox item that starts (and, with a signal, signals) a token's expiry
// workflow.
func TokenItem(t store.LockerToken, signal string, arg any) store.OutboxItem {
	return item(workflows.LockerTokenWorkflowID(t.ID.String()), workflows.LockerTokenWorkflowName,
		workflows.LockerTokenInput{TokenID: t.ID.String(), Type: t.Type, ExpiresAt: t.ExpiresAt},
		workflows.SearchAttrs{OrganizationID: t.OrgID, LocationID: t.LocationID, TowerID: t.TowerID, LockerID: t.LockerID, RequestKind: t.Type + "-token"}, signal, arg)
}

// WebhookDeliveryItem is the outbox item that starts the workflow of a delivery's current
// round; the store records the same row (webhookrow) with the event it delivers.
func WebhookDeliveryItem(d store.PendingDelivery) store.OutboxItem {
	r := webhookrow.For(webhookrow.Delivery{ID: d.ID, Round: d.Round, OrgID: d.OrgID, EndpointID: d.EndpointID, EventType: d.EventType})
	return store.OutboxItem{WorkflowID: r.WorkflowID, WorkflowType: r.WorkflowType, Input: r.Input, SearchAttributes: r.SearchAttributes}
}

// AccessCodeItem is the outbox item that starts (and, with a signal, signals) an access
// code's workflow.
func AccessCodeItem(c store.AccessCode, signal string, arg any) store.OutboxItem {
	return item(workflows.AccessCodeWorkflowID(c.ID.String()), workflows.AccessCodeWorkflowName,
		workflows.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt},
		codeAttrs(c), signal, arg)
}

// AccessCodeCleanupItem starts the workflow of a code that never became active: it waits
// for the hold request to settle and releases whatever hold it left.
func AccessCodeCleanupItem(c store.AccessCode, holdRequest uuid.UUID) store.OutboxItem {
	return item(workflows.AccessCodeWorkflowID(c.ID.String()), workflows.AccessCodeWorkflowName,
		workflows.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt, HoldRequestID: holdRequest.String(), Ended: true},
		codeAttrs(c), "", nil)
}

func codeAttrs(c store.AccessCode) workflows.SearchAttrs {
	return workflows.SearchAttrs{OrganizationID: c.OrganizationID, LocationID: c.LocationID, LockerID: int64(c.LockerID), RequestKind: "access-code"}
}
