package workflows_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/outbox/webhookrow"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// The names the store writes into the outbox are the workflow's.
func TestWebhookDeliveryNamesAgree(t *testing.T) {
	id := uuid.New()
	assert.Equal(t, workflows.WebhookDeliveryWorkflowName, store.WebhookDeliveryWorkflowType)
	assert.Equal(t, workflows.WebhookDeliveryWorkflowID(id.String()), store.WebhookDeliveryWorkflowID(id, 0))
	assert.Contains(t, workflows.SearchAttributeNames, workflows.AttrWebhookEndpointID.GetName())
	assert.Contains(t, workflows.SearchAttributeNames, workflows.AttrEventType.GetName())
	assert.Equal(t, "WebhookEndpointId", workflows.AttrWebhookEndpointID.GetName())
	assert.Equal(t, "EventType", workflows.AttrEventType.GetName())
}

// Every delivery the outbox starts now is started for the markerless revision, and the
// workflow reads it from the row's input.
func TestWebhookRowsStartMarkerlessRuns(t *testing.T) {
	assert.Equal(t, workflows.WebhookRevisionMarkerless, webhookrow.Revision)
	id := uuid.New()
	for round := range 2 {
		r := webhookrow.For(webhookrow.Delivery{ID: id, Round: round, OrgID: 1, EndpointID: uuid.New(), EventType: "webhook.test"})
		var in workflows.WebhookDeliveryInput
		require.NoError(t, json.Unmarshal(r.Input, &in))
		assert.Equal(t, workflows.WebhookDeliveryInput{DeliveryID: id.String(), Round: round, Revision: workflows.WebhookRevisionMarkerless}, in)
	}
}
