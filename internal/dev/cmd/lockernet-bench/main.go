// Command lockernet-bench measures the Locker Network Service in both of its shapes (make
// bench): the running `make run` stack and a `make run-cluster` shape it starts and stops
// itself, and writes docs/benchmarks.md; the scenarios are package bench.
//
//	lockernet-bench [-shapes run,cluster] [-scenarios footprint,proxy,tracing,search,flow,expiry,webhooks,temporal]
//	                [-step 60s] [-out docs/benchmarks.md]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockernet/lockernet/internal/dev/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("lockernet-bench", flag.ContinueOnError)
	s := bench.Settings{Args: os.Args[1:]}
	s.RegisterFlags(fs)
	err := fs.Parse(s.Args)
	if err == nil {
		err = bench.Run(ctx, s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockernet-bench:", err)
		os.Exit(1)
	}
}
