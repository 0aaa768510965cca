package testenv

import "sync"

// AtOnce calls call(0) … call(n-1), each on its own goroutine, released together so that the
// calls race one another, and returns when every call has returned. A call keeps its result
// at its index, in a slice the caller made; call may report failures with t.Errorf or
// assert, never t.FailNow (it is not the test's goroutine).
func AtOnce(n int, call func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			call(i)
		})
	}
	close(start)
	wg.Wait()
}
