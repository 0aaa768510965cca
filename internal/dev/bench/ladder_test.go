package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// climb runs a ladder against a system that holds every rate up to knee.
func climb(rates []float64, precision, knee float64) []float64 {
	l := newLadder(rates, precision)
	var offered []float64
	for r, ok := l.rate(); ok; r, ok = l.rate() {
		offered = append(offered, r)
		l.record(r, r <= knee)
		if len(offered) > 50 {
			break
		}
	}
	return offered
}

// The ladder climbs the listed rates, then bisects between the last held and the first not
// held until the knee is bracketed within the precision.
func TestLadderBisectsToTheKnee(t *testing.T) {
	assert.Equal(t, []float64{25, 50, 100, 75, 63, 57, 54}, climb([]float64{25, 50, 100, 150}, 0.1, 55))
	assert.Equal(t, []float64{10, 25, 18, 14, 16, 15}, climb([]float64{10, 25, 50}, 0.1, 15))
	// Without bisection: the listed rates up to the first not held, as before.
	assert.Equal(t, []float64{10, 25}, climb([]float64{10, 25, 50}, 0, 15))
	// Every rate held: the list, nothing more.
	assert.Equal(t, []float64{10, 25, 50}, climb([]float64{10, 25, 50}, 0.1, 1000))
	// Even the first not held: halves down towards it.
	assert.Equal(t, []float64{10, 5, 8, 7}, climb([]float64{10, 25}, 0.1, 7))
}
