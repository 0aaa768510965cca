package apiserver

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestOutcomeWaiters(t *testing.T) {
	t.Parallel()
	w := newOutcomeWaiters()
	a, b := uuid.New(), uuid.New()

	ch, stop := w.wait(a)
	assert.Nil(t, ch, "nobody listens: never fires")
	stop()

	w.setListening(true)
	a1, stopA1 := w.wait(a)
	a2, stopA2 := w.wait(a)
	b1, stopB1 := w.wait(b)
	w.notify(a)
	assert.True(t, closed(a1))
	assert.True(t, closed(a2))
	assert.False(t, closed(b1))
	stopA1() // after the notification: harmless
	stopA2()

	stopB1()
	assert.True(t, closed(b1), "stopping releases the channel")
	w.notify(b) // nobody waits any more: harmless

	b2, stopB2 := w.wait(b)
	w.setListening(false)
	assert.False(t, closed(b2), "losing the listener does not wake anyone early")
	stopB2()
	assert.Empty(t, w.waiting)
}
