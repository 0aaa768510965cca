package workflows_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

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
