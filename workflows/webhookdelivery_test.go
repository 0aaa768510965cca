package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/workflows/contract"
)

// A delivery's search attributes are registered on the namespace.
func TestWebhookDeliverySearchAttributes(t *testing.T) {
	assert.Contains(t, contract.SearchAttributeNames, contract.AttrWebhookEndpointID.GetName())
	assert.Contains(t, contract.SearchAttributeNames, contract.AttrEventType.GetName())
	assert.Equal(t, "WebhookEndpointId", contract.AttrWebhookEndpointID.GetName())
	assert.Equal(t, "EventType", contract.AttrEventType.GetName())
}
