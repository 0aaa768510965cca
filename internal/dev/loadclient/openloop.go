package loadclient

import (
	"context"
	"sync"
	"time"
)

// OpenLoop calls fn rate times a second for d, each call in its own goroutine, and waits
// for the last of them. Each call is handed its index and the time it was scheduled for,
// so a caller can measure from the schedule and a slow server cannot hide its queueing (no
// coordinated omission). With maxInFlight > 0, a call that would be one more than
// maxInFlight at once is skipped and counted, rather than delayed: the client itself is
// saturated. When ctx ends, no further call starts.
func OpenLoop(ctx context.Context, rate float64, d time.Duration, maxInFlight int,
	fn func(ctx context.Context, i int, scheduled time.Time)) (sent, skipped int) {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	var sem chan struct{}
	if maxInFlight > 0 {
		sem = make(chan struct{}, maxInFlight)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return sent, skipped
			case <-time.After(wait):
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			default:
				skipped++
				continue
			}
		}
		sent++
		wg.Add(1)
		go func(i int, at time.Time) {
			defer func() {
				if sem != nil {
					<-sem
				}
				wg.Done()
			}()
			fn(ctx, i, at)
		}(i, at)
	}
	wg.Wait()
	return sent, skipped
}
