// Package webhookrow is the outbox row that starts a webhook delivery's workflow: its
// workflow id, type, input and search attributes, built in one place for every writer — the
// store, which records a delivery's start with the event it delivers (and a redelivery's
// with its new round), and the outbox's re-arm after a restore. It is a package of its own
// below both because internal/outbox imports the store: the store cannot import the outbox.
// It imports nothing of the service's own.
package webhookrow

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// The webhook-delivery workflow a row starts. workflows holds the same names
// (WebhookDeliveryWorkflowName, WebhookDeliveryWorkflowID); a test keeps them equal.
const (
	WorkflowType = "WebhookDelivery"
	IDPrefix     = "webhook-delivery/"
)

// WorkflowID is the workflow of one delivery's round (0: the first delivery, n: the n-th
// redelivery asked for through the API).
func WorkflowID(deliveryID uuid.UUID, round int) string {
	if round == 0 {
		return IDPrefix + deliveryID.String()
	}
	return fmt.Sprintf("%s%s/retry-%d", IDPrefix, deliveryID, round)
}

// Delivery is what a delivery's row is made of.
type Delivery struct {
	ID         uuid.UUID
	Round      int
	OrgID      int64
	EndpointID uuid.UUID
	EventType  string
}

// Row is a delivery's workflow start as the outbox records it.
type Row struct {
	WorkflowID       string
	WorkflowType     string
	Input            json.RawMessage
	SearchAttributes map[string]string
}

// Revision is the workflow code a row's run is started for
// (workflows.WebhookRevisionMarkerless: it records no version markers).
const Revision = 1

// input is the workflow's input (workflows.WebhookDeliveryInput): the first round leaves
// its round out.
type input struct {
	DeliveryID string `json:"delivery_id"`
	Round      int    `json:"round,omitempty"`
	Revision   int    `json:"revision"`
}

// For is the row that starts d's round.
func For(d Delivery) Row {
	in, _ := json.Marshal(input{DeliveryID: d.ID.String(), Round: d.Round, Revision: Revision}) // plain fields: never fails
	return Row{
		WorkflowID:   WorkflowID(d.ID, d.Round),
		WorkflowType: WorkflowType,
		Input:        in,
		// What an operator filters deliveries by in the Temporal UI; OrganizationId also
		// spreads the outbox fairly between organizations.
		SearchAttributes: map[string]string{"OrganizationId": strconv.FormatInt(d.OrgID, 10),
			"WebhookEndpointId": d.EndpointID.String(), "EventType": d.EventType},
	}
}
