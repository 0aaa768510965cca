// Command lockernet-drill runs the fault drills of the Locker Network Service (make
// test-faults) on real processes, in the make run shape and in the cluster shape, and
// writes their report (docs/reliability.md); the drills are package drill.
//
//	lockernet-drill [-drills kill-worker,restart-apiserver,restart-postgres,gateway-faults,stop-each,webhooks,restore,
//	                 cluster-stop-each,cluster-kill-worker,cluster-kill-apiserver,cluster-kill-temporal,cluster-restart-postgres,cluster-deploy]
//	                [-out docs/reliability.md]
//
// It exits 1 when a drill loses a request, doubles a door actuation or another side
// effect, breaks the API contract, or leaves a component that does not recover within a
// generous limit, and 2 when the drills cannot run. Times are measured and reported, never
// asserted. It is a dev tool: it links the embedded Temporal server, so it is not part of
// make build.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lockernet/lockernet/internal/dev/drill"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("lockernet-drill", flag.ContinueOnError)
	s := drill.Settings{Args: os.Args[1:]}
	s.RegisterFlags(fs)
	err := fs.Parse(s.Args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	failed := false
	if err == nil {
		failed, err = drill.Run(ctx, s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockernet-drill:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}
