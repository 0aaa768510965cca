package outbox

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

func orgItem(org string, id int64) store.OutboxItem {
	return store.OutboxItem{ID: id, SearchAttributes: map[string]string{"OrganizationId": org}}
}

// A burst of one organization does not hold back another's next start: the queue serves the
// organizations round-robin, each in its own order.
func TestFairQueueServesOrganizationsInTurn(t *testing.T) {
	q := newFairQueue(4096)
	for i := range 1000 {
		require.True(t, q.push(orgItem("1", int64(i))))
	}
	require.True(t, q.push(orgItem("2", 5000)))
	require.True(t, q.push(orgItem("2", 5001)))
	require.True(t, q.push(orgItem("3", 7000)))
	ctx := context.Background()
	var got []string
	for range 7 {
		it, ok := q.pop(ctx)
		require.True(t, ok)
		got = append(got, orgOf(it)+":"+strconv.FormatInt(it.ID, 10))
	}
	assert.Equal(t, []string{"1:0", "2:5000", "3:7000", "1:1", "2:5001", "1:2", "1:3"}, got)

	full := newFairQueue(2)
	assert.True(t, full.push(orgItem("1", 1)))
	assert.True(t, full.push(orgItem("1", 2)))
	assert.False(t, full.push(orgItem("2", 3)), "full: the item stays in the table for the sweep")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	empty := newFairQueue(1)
	_, ok := empty.pop(cctx)
	assert.False(t, ok)
}
