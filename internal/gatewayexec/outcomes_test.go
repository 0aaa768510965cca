package gatewayexec

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

func woken(o *outcomeWaiter) bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

func TestOutcomeWaiters(t *testing.T) {
	t.Parallel()
	w := newOutcomeWaiters()
	a, b := uuid.New(), uuid.New()

	// Postgres announced a's outcome: every waiter for a wakes and reads the row.
	a1, stopA1 := w.wait(a)
	a2, stopA2 := w.wait(a)
	b1, stopB1 := w.wait(b)
	w.notify(a)
	assert.True(t, woken(a1))
	assert.True(t, woken(a2))
	assert.Nil(t, a1.row, "announced: the handler reads the row")
	assert.False(t, woken(b1))
	stopA1() // after the wake: harmless
	stopA2()

	// The worker in this process hands over b's stored row: the waiter gets it as stored.
	pending := store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: b}, Status: gatewayreq.StateDispatched}
	w.handOff(pending)
	assert.False(t, woken(b1), "a row without an outcome wakes nobody")
	now := time.Now()
	done := store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: b}, Status: gatewayreq.StateCompleted, CompletedAt: &now}
	require.True(t, done.Terminal())
	w.handOff(done)
	require.True(t, woken(b1))
	require.NotNil(t, b1.row)
	assert.Equal(t, done.ID, b1.row.ID)
	assert.Equal(t, gatewayreq.StateCompleted, b1.row.Status)
	stopB1()
	w.notify(b) // nobody waits any more: harmless

	// A waiter that stops before any outcome is forgotten, never woken.
	b2, stopB2 := w.wait(b)
	stopB2()
	w.handOff(done)
	assert.False(t, woken(b2))
	assert.Empty(t, w.waiting)
}
