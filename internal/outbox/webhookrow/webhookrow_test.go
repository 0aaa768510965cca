package webhookrow_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/outbox/webhookrow"
)

// TestRoundsStartTheirOwnWorkflows: each round of a delivery starts a workflow of its own,
// and the workflow reads the delivery and round from the input.
func TestRoundsStartTheirOwnWorkflows(t *testing.T) {
	t.Parallel()
	id, endpoint := uuid.New(), uuid.New()
	seen := map[string]bool{}
	for round := range 3 {
		r := webhookrow.For(webhookrow.Delivery{ID: id, Round: round, OrgID: 42, EndpointID: endpoint, EventType: "locker.released"})
		assert.False(t, seen[r.WorkflowID], "round %d has a workflow of its own", round)
		seen[r.WorkflowID] = true
		assert.Equal(t, webhookrow.WorkflowType, r.WorkflowType)
		var in struct {
			DeliveryID string `json:"delivery_id"`
			Round      int    `json:"round"`
		}
		require.NoError(t, json.Unmarshal(r.Input, &in))
		assert.Equal(t, id.String(), in.DeliveryID)
		assert.Equal(t, round, in.Round)
		assert.Equal(t, map[string]string{"OrganizationId": "42", "WebhookEndpointId": endpoint.String(), "EventType": "locker.released"},
			r.SearchAttributes)
	}
	assert.Equal(t, "webhook-delivery/"+id.String(), webhookrow.WorkflowID(id, 0), "the first round's id is the delivery's")
}
