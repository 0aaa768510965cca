package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// The sweep claims due items fairly: the oldest of every organization first, round-robin, so
// a backlog of one organization does not hold back another's workflow starts.
func TestClaimDueOutboxIsFairBetweenOrganizations(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	enqueue := func(org string, n int) {
		for i := range n {
			_, err := st.EnqueueWorkflow(ctx, store.OutboxItem{WorkflowID: fmt.Sprintf("wf-%s-%d", org, i), WorkflowType: "Reservation",
				Input: json.RawMessage(`{}`), SearchAttributes: map[string]string{"OrganizationId": org}}, 0)
			require.NoError(t, err)
		}
	}
	enqueue("1", 50)
	enqueue("2", 2)
	enqueue("3", 1)
	items, err := st.ClaimDueOutbox(ctx, 6, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 6)
	perOrg := map[string]int{}
	for _, it := range items {
		perOrg[it.SearchAttributes["OrganizationId"]]++
	}
	assert.Equal(t, map[string]int{"1": 3, "2": 2, "3": 1}, perOrg, "every organization's items before the rest of the backlog")

	// Claimed items are leased: the next claim takes the rest.
	more, err := st.ClaimDueOutbox(ctx, 100, time.Minute)
	require.NoError(t, err)
	assert.Len(t, more, 47)
	first := map[int64]bool{}
	for _, it := range items {
		first[it.ID] = true
	}
	for _, it := range more {
		assert.False(t, first[it.ID], "claimed twice: %s", it.WorkflowID)
	}
}

// DeleteOutbox removes the dispatched items only, and deleting one already gone is no error.
func TestDeleteOutboxRemovesOnlyTheDispatchedItems(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		id, err := st.EnqueueWorkflow(ctx, store.OutboxItem{WorkflowID: fmt.Sprintf("wf-delete-%d", i), WorkflowType: "Reservation",
			Input: json.RawMessage(`{}`), SearchAttributes: map[string]string{"OrganizationId": "1"}}, 0)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.NoError(t, st.DeleteOutbox(ctx, ids[0], ids[2]))
	require.NoError(t, st.DeleteOutbox(ctx, ids[0]), "deleting an item already gone is no error")
	n, _, err := st.OutboxBacklog(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	left, err := st.ClaimDueOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, ids[1], left[0].ID)
}
