package drill

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The tally counts a client as hit when one of its exchanges failed, as lost when it never
// had a terminal answer, and a key as doubled when it saw two request ids.
func TestTallyOutcomes(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	outs := []clientOutcome{
		{sends: 1, ids: map[string]bool{"a": true}, done: true, started: t0, settled: t0.Add(time.Second),
			final: answer{state: "completed"}},
		{sends: 3, errors: 2, failures: map[string]int{"no answer": 2}, ids: map[string]bool{"b": true, "c": true}, done: true,
			started: t0, settled: t0.Add(3 * time.Second), final: answer{state: "gateway_unresponsive"}},
		{sends: 5, errors: 5, failures: map[string]int{"HTTP 503 + Retry-After": 5}, lastErr: "gave up"},
	}
	tl := tallyOutcomes(outs)
	assert.Equal(t, 2, tl.answered)
	assert.Equal(t, 1, tl.lost)
	assert.Equal(t, 9, tl.sends)
	assert.Equal(t, 7, tl.errors)
	assert.Equal(t, 2, tl.hit)
	assert.Equal(t, 1, tl.multi)
	assert.Equal(t, map[string]int{"completed": 1, "gateway_unresponsive": 1}, tl.states)
	assert.Equal(t, map[string]int{"no answer": 2, "HTTP 503 + Retry-After": 5}, tl.failures)
	assert.Equal(t, []time.Time{t0.Add(3 * time.Second)}, tl.retried, "only the answered client that was hit")
	assert.Equal(t, []time.Duration{time.Second, 3 * time.Second}, tl.waits)
}
