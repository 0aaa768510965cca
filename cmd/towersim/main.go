// Command towersim is the dev-only tower simulator: it stands in for BLE locker towers plus
// the mobile SDK that relays their events (DESIGN §4.7, §9).
//
//	towersim serve -config <file> [-addr 127.0.0.1:8070] [-sync-interval 10s]
//	towersim open  [-url http://127.0.0.1:8070] -tower <id> -payload <hex> -auth <hex> [-empty | -item] [-claim C] [-access-token <jwt>]
//
// serve boots the towers of a provisioning file (see towersim.Config) and serves the control
// API (POST /sim/towers/{tower_id}/open, GET /sim/towers, ...). It uploads queued events at
// start and every -sync-interval. SIGINT or SIGTERM stops it within a couple of seconds.
//
// open presents a locker token at a tower of a running simulator, as a person with a phone
// would, and prints the outcome. Without -empty or -item the door closes the way the token
// type suggests: with the item after a drop-off, empty after a pickup or release.
//
// Environment: LOCKERNET_TOWERSIM_CONFIG, LOCKERNET_TOWERSIM_ADDR (serve),
// LOCKERNET_TOWERSIM_URL (open), LOCKERNET_LOG_FORMAT (json or text, default text),
// LOCKERNET_LOG_LEVEL (default info); a flag on the command line wins.
//
// Exit status: 0 success (open: the door opened); 1 open: the tower refused the token,
// serve: it could not start or stopped with an error; 2 usage error; 3 open: no answer from
// the simulator (unreachable, unknown tower, bad request).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  towersim serve -config <file> [-addr 127.0.0.1:8070] [-sync-interval 10s]
  towersim open  [-url http://127.0.0.1:8070] -tower <id> -payload <hex> -auth <hex> [-empty | -item] [-claim C] [-access-token <jwt>]
run "towersim <command> -h" for the flags of a command`

// Exit statuses.
const (
	exitOK       = 0
	exitRefused  = 1 // also: serve failed
	exitUsage    = 2
	exitNoAnswer = 3
)

// errRefused: the tower refused the token (the outcome is already printed).
var errRefused = errors.New("token refused")

// usageError marks errors in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// noAnswerError marks an open that got no verdict from the simulator.
type noAnswerError struct{ err error }

func (e noAnswerError) Error() string { return e.err.Error() }
func (e noAnswerError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil))
}

// run executes one command and returns the exit status. ready, if not nil, is called by
// serve with the control API's address once it listens.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(addr string)) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stderr, ready)
	case "open":
		err = open(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return exitOK
	default:
		err = usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	var ue usageError
	var ne noAnswerError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errRefused):
		return exitRefused
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "towersim:", err)
		fmt.Fprintln(stderr, usage)
		return exitUsage
	case errors.As(err, &ne):
		fmt.Fprintln(stderr, "towersim:", err)
		return exitNoAnswer
	default:
		fmt.Fprintln(stderr, "towersim:", err)
		return exitRefused
	}
}

// envDefault returns the environment variable's value, or def.
func envDefault(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
