package outbox

import (
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// scope is what an operator filters a workflow by in the Temporal UI.
type scope struct {
	orgID, locationID, lockerID int64
	towerID, kind               string
}

func item(workflowID, workflowType string, input any, sc scope, signal string, arg any) store.OutboxItem {
	in, _ := json.Marshal(input)
	it := store.OutboxItem{
		WorkflowID:   workflowID,
		WorkflowType: workflowType,
		Input:        in,
		SearchAttributes: map[string]string{
			workflows.AttrOrganizationID.GetName(): strconv.FormatInt(sc.orgID, 10),
			workflows.AttrLocationID.GetName():     strconv.FormatInt(sc.locationID, 10),
			workflows.AttrTowerID.GetName():        sc.towerID,
			workflows.AttrLockerID.GetName():       strconv.FormatInt(sc.lockerID, 10),
			workflows.AttrRequestKind.GetName():    sc.kind,
		},
	}
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
		scope{orgID: orgID, locationID: r.LocationID, lockerID: r.LockerID, towerID: r.TowerID, kind: "reservation"}, signal, arg)
}

// TokenItem is the outbox item that starts (and, with a signal, signals) a token's expiry
// workflow.
func TokenItem(t store.LockerToken, signal string, arg any) store.OutboxItem {
	return item(workflows.LockerTokenWorkflowID(t.ID.String()), workflows.LockerTokenWorkflowName,
		workflows.LockerTokenInput{TokenID: t.ID.String(), Type: t.Type, ExpiresAt: t.ExpiresAt},
		scope{orgID: t.OrgID, locationID: t.LocationID, lockerID: t.LockerID, towerID: t.TowerID, kind: t.Type + "-token"}, signal, arg)
}

// AccessCodeItem is the outbox item that starts (and, with a signal, signals) an access
// code's workflow.
func AccessCodeItem(c store.AccessCode, signal string, arg any) store.OutboxItem {
	return item(workflows.AccessCodeWorkflowID(c.ID.String()), workflows.AccessCodeWorkflowName,
		workflows.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt},
		scope{orgID: c.OrganizationID, locationID: c.LocationID, lockerID: int64(c.LockerID), kind: "access-code"}, signal, arg)
}

// AccessCodeCleanupItem starts the workflow of a code that never became active: it waits
// for the hold request to settle and releases whatever hold it left.
func AccessCodeCleanupItem(c store.AccessCode, holdRequest uuid.UUID) store.OutboxItem {
	return item(workflows.AccessCodeWorkflowID(c.ID.String()), workflows.AccessCodeWorkflowName,
		workflows.AccessCodeInput{CodeID: c.ID.String(), ExpiresAt: c.ExpiresAt, HoldRequestID: holdRequest.String(), Ended: true},
		scope{orgID: c.OrganizationID, locationID: c.LocationID, lockerID: int64(c.LockerID), kind: "access-code"}, "", nil)
}
