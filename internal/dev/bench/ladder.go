package bench

import "math"

// ladder chooses the rates a stepped scenario offers: the listed rates in turn until one is
// not held, then halves the gap between the highest rate held and the lowest not held until
// the two are within precision of each other (0.1: the knee found within 10 %), each rate
// rounded to a whole number per second. With precision 0 it stops at the first rate not held.
type ladder struct {
	rates     []float64
	precision float64
	i         int
	held      float64 // highest rate held so far (0: none)
	failed    float64 // lowest rate not held so far (0: none yet)
	next      float64
}

func newLadder(rates []float64, precision float64) *ladder {
	l := &ladder{rates: rates, precision: precision}
	if len(rates) > 0 {
		l.next = rates[0]
	}
	return l
}

// rate is the next rate to offer; false when the ladder is done.
func (l *ladder) rate() (float64, bool) { return l.next, l.next > 0 }

// record notes whether the rate just offered was held and picks the next.
func (l *ladder) record(rate float64, held bool) {
	l.next = 0
	if held {
		l.held = max(l.held, rate)
	} else if l.failed == 0 || rate < l.failed {
		l.failed = rate
	}
	if l.failed == 0 {
		if l.i++; l.i < len(l.rates) {
			l.next = l.rates[l.i]
		}
		return
	}
	if l.precision <= 0 || l.failed-l.held <= l.precision*max(l.held, l.failed/2) {
		return
	}
	mid := math.Round((l.held + l.failed) / 2)
	if mid <= l.held || mid >= l.failed {
		return
	}
	l.next = mid
}
