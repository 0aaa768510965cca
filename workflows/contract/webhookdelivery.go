package contract

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// WebhookDeliveryWorkflowName is the workflow type of one webhook delivery (DESIGN §10).
const WebhookDeliveryWorkflowName = "WebhookDelivery"

// WebhookDeliveryIDPrefix begins every delivery's workflow ID (the store's SQL writes the
// first round's rows with it).
const WebhookDeliveryIDPrefix = "webhook-delivery/"

// WebhookDeliveryWorkflowID is the workflow of one delivery's round: round 0 is the first
// delivery, round n the n-th redelivery asked for through the API ("<id>/retry-<n>").
func WebhookDeliveryWorkflowID(deliveryID string, round int) string {
	if round == 0 {
		return WebhookDeliveryIDPrefix + deliveryID
	}
	return fmt.Sprintf("%s%s/retry-%d", WebhookDeliveryIDPrefix, deliveryID, round)
}

// Search attributes of a delivery's workflow, beside OrganizationId.
var (
	AttrWebhookEndpointID = temporal.NewSearchAttributeKeyKeyword("WebhookEndpointId")
	AttrEventType         = temporal.NewSearchAttributeKeyKeyword("EventType")
)

// WebhookDeliveryInput starts a delivery's round. The outbox writes it as
// {"delivery_id": "...", "round": n, "revision": r}; Attempt and Deferrals carry the count
// across a continue-as-new (Revision is carried too).
type WebhookDeliveryInput struct {
	DeliveryID string `json:"delivery_id"`
	Round      int    `json:"round,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Deferrals  int    `json:"deferrals,omitempty"`
	// Revision is the workflow code the run was started for: WebhookRevisionMarkerless
	// (every delivery started now) takes every change's current path without recording a
	// version marker; zero, the runs started before it, decide by their recorded markers.
	Revision int `json:"revision,omitempty"`
}

// WebhookRevisionMarkerless is the WebhookDeliveryInput.Revision of runs that record no
// version markers (each marker comes with an upsert of the TemporalChangeVersion search
// attribute: one more visibility write per delivery). Every delivery is started with it
// (WebhookDelivery.Start, and the store's SQL for an event's first rounds).
const WebhookRevisionMarkerless = 1

// WebhookDeliveryResult is how a delivery's round ended (activities.WebhookAttemptResult's
// Outcome) and how many attempts it made.
type WebhookDeliveryResult struct {
	Outcome  string
	Attempts int
}

// WebhookDelivery is one delivery's round, as the outbox starts its workflow.
type WebhookDelivery struct {
	ID         string
	Round      int
	OrgID      int64
	EndpointID string
	EventType  string
}

// WebhookDeliveryStart is a delivery's workflow start as the outbox records it.
type WebhookDeliveryStart struct {
	WorkflowID       string
	WorkflowType     string
	Input            json.RawMessage
	SearchAttributes map[string]string
}

// Start is the outbox's start of d's round: its workflow id, type, input (the current
// revision) and search attributes, built in one place for every writer — the store, which
// records a delivery's start with the event it delivers (and a redelivery's with its new
// round), and the outbox's re-arm after a restore.
func (d WebhookDelivery) Start() WebhookDeliveryStart {
	in, _ := json.Marshal(WebhookDeliveryInput{DeliveryID: d.ID, Round: d.Round, Revision: WebhookRevisionMarkerless}) // plain fields: never fails
	return WebhookDeliveryStart{
		WorkflowID:   WebhookDeliveryWorkflowID(d.ID, d.Round),
		WorkflowType: WebhookDeliveryWorkflowName,
		Input:        in,
		// What an operator filters deliveries by in the Temporal UI; OrganizationId also
		// spreads the outbox fairly between organizations.
		SearchAttributes: SearchAttrs{OrganizationID: d.OrgID, WebhookEndpointID: d.EndpointID, EventType: d.EventType}.Map(),
	}
}
