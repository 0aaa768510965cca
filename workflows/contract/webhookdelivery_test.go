package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/workflows/contract"
)

// Each round of a delivery starts a workflow of its own, and the workflow reads the delivery,
// the round and the revision from the input.
func TestWebhookDeliveryRoundsStartTheirOwnWorkflows(t *testing.T) {
	t.Parallel()
	id, endpoint := uuid.NewString(), uuid.NewString()
	seen := map[string]bool{}
	for round := range 3 {
		r := contract.WebhookDelivery{ID: id, Round: round, OrgID: 42, EndpointID: endpoint, EventType: "locker.released"}.Start()
		assert.False(t, seen[r.WorkflowID], "round %d has a workflow of its own", round)
		seen[r.WorkflowID] = true
		assert.Equal(t, contract.WebhookDeliveryWorkflowName, r.WorkflowType)
		var in contract.WebhookDeliveryInput
		require.NoError(t, json.Unmarshal(r.Input, &in))
		assert.Equal(t, contract.WebhookDeliveryInput{DeliveryID: id, Round: round, Revision: contract.WebhookRevisionMarkerless}, in)
		assert.Equal(t, map[string]string{"OrganizationId": "42", "WebhookEndpointId": endpoint, "EventType": "locker.released"},
			r.SearchAttributes)
	}
	assert.Equal(t, "webhook-delivery/"+id, contract.WebhookDeliveryWorkflowID(id, 0), "the first round's id is the delivery's")
	assert.Equal(t, "webhook-delivery/"+id+"/retry-2", contract.WebhookDeliveryWorkflowID(id, 2))
}
