// Package drill is the fault drills of the Locker Network Service (make test-faults,
// internal/dev/cmd/lockernet-drill): each drill starts a whole system of separate processes
// of its own (a private PostgreSQL cluster, the embedded Temporal server, the apiserver, the
// worker and two simulated gateways from bin/dev), drives it through its HTTP APIs as clients would,
// breaks one component while requests are in flight, and then counts what every client got:
// lost requests (must be 0), duplicate door actuations (must be 0) and the time to recover.
// The cluster-* drills share one system of the production shape instead (make run-cluster:
// bin/dev/devstack -cluster on a private PostgreSQL cluster, with the Temporal server as its
// own process, two apiservers and two workers behind nginx, and its supervisor), kill its
// processes by the pids the supervisor records, and check besides that the durable timers
// of the tower holds fired once and late rather than never or twice. Run writes the report
// of docs/reliability.md.
//
// The files go by job: run.go (settings, the list of drills, Run), system.go and cluster.go
// (a drill's system in the make run shape and in the cluster shape), procs.go (child
// processes), client.go (the clients' loops on the gateway cloud and tower APIs),
// checks.go (door and request accounting), report.go (the report), and one file per drill
// or family of drills.
package drill

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// options are the drills' knobs; the defaults make each drill take a few minutes.
type options struct {
	binDir  string
	lockers int
	// clusterLockers is lockers for the cluster shape, whose drills share one system: their
	// opens add up.
	clusterLockers int
	keep           bool
	settleLimit    time.Duration

	kwOpens        int
	kwDuring       int
	kwDelay        time.Duration
	kwRestartAfter time.Duration

	apiClients int
	apiDelay   time.Duration
	apiDown    time.Duration

	pgLoad      time.Duration
	pgStopAfter time.Duration
	pgDown      time.Duration
	pgFlowRate  float64
	pgOpenRate  float64
	pgHold      time.Duration
	pgLockers   int

	gfOpens           int
	gfHardwareTimeout time.Duration
	gfCallTimeout     time.Duration

	seOpens  int
	seDelay  time.Duration
	cseOpens int
	cseDelay time.Duration

	whDown    int
	whUp      int
	whDownFor time.Duration
	whSlow    time.Duration

	ckwOpens int
	ckwFlows int
	ckwDelay time.Duration
	ckwHold  time.Duration

	ckaClients int
	ckaDelay   time.Duration

	cktLoad      time.Duration
	cktRate      float64
	cktKillAfter time.Duration
	cktHold      time.Duration
	cktOpens     int
	cktDelay     time.Duration

	cpgLoad      time.Duration
	cpgStopAfter time.Duration
	cpgDown      time.Duration
	cpgFlowRate  float64
	cpgOpenRate  float64
	cpgHold      time.Duration

	rsBefore   time.Duration
	rsAfter    time.Duration
	rsGap      time.Duration
	rsFlowRate float64
	rsOpenRate float64
	rsHold     time.Duration
}

type drill struct {
	name string
	run  func(context.Context, options) *result
	// onCluster drills run on the one cluster-shape system they share (clusterShape).
	onCluster func(context.Context, options, *clusterShape) *result
}

var drills = []drill{
	{name: "kill-worker", run: drillKillWorker},
	{name: "restart-apiserver", run: drillRestartAPIServer},
	{name: "restart-postgres", run: drillRestartPostgres},
	{name: "gateway-faults", run: drillGatewayFaults},
	{name: "stop-each", run: drillStopEach},
	{name: "webhooks", run: drillWebhooks},
	{name: "restore", run: drillRestore},
	// First of the cluster drills: its first kill comes right after the shape's start.
	{name: "cluster-stop-each", onCluster: drillClusterStopEach},
	{name: "cluster-kill-worker", onCluster: drillClusterKillWorker},
	{name: "cluster-kill-apiserver", onCluster: drillClusterKillAPIServer},
	{name: "cluster-kill-temporal", onCluster: drillClusterKillTemporal},
	{name: "cluster-restart-postgres", onCluster: drillClusterRestartPostgres},
	{name: "cluster-deploy", onCluster: drillClusterDeploy},
}

// Settings are what the command line chose: which drills, where the report goes, and the
// drills' knobs (RegisterFlags names them all).
type Settings struct {
	// Drills are the comma-separated drills to run, in this order.
	Drills string
	// Out is the report's file; empty: print it.
	Out string
	// Command is the command to name in the report; empty: lockernet-drill and Args.
	Command string
	// Args are the command's arguments, for the report's default Command.
	Args []string

	o options
}

// drillNames are the known drills, in the order they run by default.
func drillNames() []string {
	var names []string
	for _, d := range drills {
		names = append(names, d.name)
	}
	return names
}

// RegisterFlags defines the command's flags on fs, each filling s; the defaults make each
// drill take a few minutes.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Drills, "drills", strings.Join(drillNames(), ","), "comma-separated drills to run, in this order")
	fs.StringVar(&s.Out, "out", "", "write the report (markdown) to this file; empty: print it")
	fs.StringVar(&s.Command, "command", "", "the command to name in the report (default: this command line)")
	o := &s.o
	fs.StringVar(&o.binDir, "bin", "", "directory of the apiserver, worker and gateway binaries (default: next to this one)")
	fs.IntVar(&o.lockers, "lockers-per-gateway", 128, "lockers of each simulated gateway (every open gets one of its own)")
	fs.IntVar(&o.clusterLockers, "cluster-lockers-per-gateway", 256, "lockers of each simulated gateway of the cluster shape, whose drills share one system (their opens add up: about 140 + 100 + 60 + 50 + 80 with the defaults)")
	fs.BoolVar(&o.keep, "keep", false, "keep each drill's directories (logs, clusters) instead of removing them")
	fs.DurationVar(&o.settleLimit, "settle-limit", 5*time.Minute, "how long requests and components get to recover before the drill fails")

	fs.IntVar(&o.kwOpens, "kill-worker-opens", 200, "kill-worker: door opens in flight when the worker is killed")
	fs.IntVar(&o.kwDuring, "kill-worker-during", 20, "kill-worker: more opens accepted while no worker runs")
	fs.DurationVar(&o.kwDelay, "kill-worker-delay", 15*time.Second, "kill-worker: how long the simulated gateways take for each open (below the gateway's 20 s open-attempt timeout)")
	fs.DurationVar(&o.kwRestartAfter, "kill-worker-restart-after", 2*time.Second, "kill-worker: pause between the kill and the new worker")

	fs.IntVar(&o.apiClients, "apiserver-clients", 75, "restart-apiserver: clients waiting in each round (two in three open a door)")
	fs.DurationVar(&o.apiDelay, "apiserver-delay", 15*time.Second, "restart-apiserver: how long the simulated gateways take for each call (more than the apiserver's 10 s drain, less than the gateway's 20 s open-attempt timeout)")
	fs.DurationVar(&o.apiDown, "apiserver-down", time.Second, "restart-apiserver: pause between the apiserver's exit and its restart")

	fs.DurationVar(&o.pgLoad, "postgres-load", 45*time.Second, "restart-postgres: how long the load runs")
	fs.DurationVar(&o.pgStopAfter, "postgres-stop-after", 12*time.Second, "restart-postgres: when, into the load, Postgres stops")
	fs.DurationVar(&o.pgDown, "postgres-down", 8*time.Second, "restart-postgres: how long Postgres stays down")
	fs.Float64Var(&o.pgFlowRate, "postgres-flow-rate", 10, "restart-postgres: tower flows (reservation + drop-off token) per second")
	fs.Float64Var(&o.pgOpenRate, "postgres-open-rate", 3, "restart-postgres: gateway door opens per second")
	fs.DurationVar(&o.pgHold, "postgres-hold", 20*time.Second, "restart-postgres: duration of each reservation and drop-off token")
	fs.IntVar(&o.pgLockers, "postgres-tower-lockers", 600, "restart-postgres: tower lockers made for the flows (one per flow)")

	fs.IntVar(&o.gfOpens, "gateway-opens", 20, "gateway-faults: door opens sent in each fault phase")
	fs.DurationVar(&o.gfHardwareTimeout, "gateway-hardware-timeout", 12*time.Second, "gateway-faults: LOCKERNET_GATEWAY_HARDWARE_TIMEOUT")
	fs.DurationVar(&o.gfCallTimeout, "gateway-call-timeout", 4*time.Second, "gateway-faults: LOCKERNET_GATEWAY_CALL_TIMEOUT")
	fs.IntVar(&o.seOpens, "stop-each-opens", 16, "stop-each: door opens in flight in each round (one process stopped)")
	fs.DurationVar(&o.seDelay, "stop-each-delay", 6*time.Second, "stop-each: how long the lock controllers take for each open (controller_slow)")
	fs.IntVar(&o.cseOpens, "cluster-stop-each-opens", 16, "cluster-stop-each: door opens in flight in each round (one process stopped)")
	fs.DurationVar(&o.cseDelay, "cluster-stop-each-delay", 6*time.Second, "cluster-stop-each: how long the lock controllers take for each open (controller_slow)")
	fs.IntVar(&o.whDown, "webhook-events-down", 50, "webhooks: events recorded while the receiver is down")
	fs.IntVar(&o.whUp, "webhook-events-up", 100, "webhooks: events recorded once it is back")
	fs.DurationVar(&o.whDownFor, "webhook-down", 6*time.Second, "webhooks: how long the receiver answers 503")
	fs.DurationVar(&o.whSlow, "webhook-slow", 300*time.Millisecond, "webhooks: how long each of the receiver's answers takes once it is back")

	fs.DurationVar(&o.rsBefore, "restore-before", 10*time.Second, "restore: how long the load runs before the first backup")
	fs.DurationVar(&o.rsAfter, "restore-after", 12*time.Second, "restore: how long the load runs after the first backup began")
	fs.DurationVar(&o.rsGap, "restore-gap", 5*time.Second, "restore: time between the two backups (the restore takes Temporal's state from the first, the database from the second)")
	fs.Float64Var(&o.rsFlowRate, "restore-flow-rate", 4, "restore: tower flows (reservation + drop-off token) per second")
	fs.Float64Var(&o.rsOpenRate, "restore-open-rate", 2, "restore: gateway door opens per second")
	fs.DurationVar(&o.rsHold, "restore-hold", 90*time.Second, "restore: duration of each reservation and drop-off token (longer than the stop, restore and start)")

	fs.IntVar(&o.ckwOpens, "cluster-kill-worker-opens", 100, "cluster-kill-worker: door opens in flight when the worker is killed")
	fs.IntVar(&o.ckwFlows, "cluster-kill-worker-flows", 40, "cluster-kill-worker: tower flows made just before the kill")
	fs.DurationVar(&o.ckwDelay, "cluster-kill-worker-delay", 10*time.Second, "cluster-kill-worker: how long the simulated gateways take for each open")
	fs.DurationVar(&o.ckwHold, "cluster-kill-worker-hold", 6*time.Second, "cluster-kill-worker: duration of each reservation and drop-off token")
	fs.IntVar(&o.ckaClients, "cluster-apiserver-clients", 60, "cluster-kill-apiserver: clients waiting behind nginx")
	fs.DurationVar(&o.ckaDelay, "cluster-apiserver-delay", 10*time.Second, "cluster-kill-apiserver: how long the simulated gateways take for each open")
	fs.DurationVar(&o.cktLoad, "cluster-temporal-load", 30*time.Second, "cluster-kill-temporal: how long the load runs")
	fs.Float64Var(&o.cktRate, "cluster-temporal-flow-rate", 4, "cluster-kill-temporal: tower flows per second")
	fs.DurationVar(&o.cktKillAfter, "cluster-temporal-kill-after", 10*time.Second, "cluster-kill-temporal: when, into the load, the Temporal server is killed")
	fs.IntVar(&o.cktOpens, "cluster-temporal-opens", 50, "cluster-kill-temporal: door opens in flight when the Temporal server is killed")
	fs.DurationVar(&o.cktDelay, "cluster-temporal-delay", 10*time.Second, "cluster-kill-temporal: how long the simulated gateways take for each open")
	fs.DurationVar(&o.cktHold, "cluster-temporal-hold", 10*time.Second, "cluster-kill-temporal: duration of each reservation and drop-off token")
	fs.DurationVar(&o.cpgLoad, "cluster-postgres-load", 40*time.Second, "cluster-restart-postgres: how long the load runs")
	fs.DurationVar(&o.cpgStopAfter, "cluster-postgres-stop-after", 12*time.Second, "cluster-restart-postgres: when, into the load, Postgres stops")
	fs.DurationVar(&o.cpgDown, "cluster-postgres-down", 8*time.Second, "cluster-restart-postgres: how long Postgres stays down")
	fs.Float64Var(&o.cpgFlowRate, "cluster-postgres-flow-rate", 4, "cluster-restart-postgres: tower flows per second")
	fs.Float64Var(&o.cpgOpenRate, "cluster-postgres-open-rate", 2, "cluster-restart-postgres: gateway door opens per second")
	fs.DurationVar(&o.cpgHold, "cluster-postgres-hold", 15*time.Second, "cluster-restart-postgres: duration of each reservation and drop-off token")
}

// Run runs the chosen drills in turn and writes their report. It returns failed when a
// drill failed its checks, and an error when the drills could not be run at all.
func Run(ctx context.Context, s Settings) (failed bool, err error) {
	o := s.o
	names := drillNames()
	var chosen []drill
	for _, n := range strings.Split(s.Drills, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, d := range drills {
			if d.name == n {
				chosen, found = append(chosen, d), true
			}
		}
		if !found {
			return false, fmt.Errorf("unknown drill %q (known: %s)", n, strings.Join(names, ", "))
		}
	}
	if _, err := findBinaries(o.binDir); err != nil {
		return false, err
	}
	rep := &report{started: time.Now(), commit: commit(), command: s.Command}
	shape := &clusterShape{o: o}
	defer shape.close()
	if rep.command == "" {
		rep.command = strings.Join(append([]string{"lockernet-drill"}, s.Args...), " ")
	}
	for _, d := range chosen {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		logf("drill %s: starting", d.name)
		var r *result
		if d.onCluster != nil {
			r = d.onCluster(ctx, o, shape)
		} else {
			r = d.run(ctx, o)
		}
		r.took = time.Since(r.started)
		rep.results = append(rep.results, r)
		verdict := "passed"
		if !r.passed() {
			verdict, failed = "FAILED", true
		}
		if r.err != nil {
			logf("drill %s: %v", d.name, r.err)
		}
		logf("drill %s: %s in %s (lost %d, duplicate actuations %d)", d.name, verdict, r.took.Round(time.Second), r.lost, r.duplicates)
	}
	if ctx.Err() != nil {
		return false, errors.New("interrupted")
	}
	text := rep.markdown()
	if s.Out == "" {
		fmt.Print(text)
	} else {
		if err := os.WriteFile(s.Out, []byte(text), 0o644); err != nil {
			return failed, fmt.Errorf("write report: %w", err)
		}
		logf("wrote %s", s.Out)
	}
	return failed, nil
}

// baseEnv are the settings every drill's apiserver and worker get.
func baseEnv() map[string]string {
	return map[string]string{
		// The drills' clients poll hundreds of requests; the rate limit is not under test.
		"LOCKERNET_GATEWAY_RATE_LIMIT": "1000000",
		"LOCKERNET_TOWER_RATE_LIMIT":   "1000000",
		"LOCKERNET_APP_RATE_LIMIT":     "1000000",
		"LOCKERNET_TOKEN_RATE_LIMIT":   "1000000",
		// Health checks every 2 s instead of 30 s, so the online state is seen to recover.
		"LOCKERNET_GATEWAY_SYNC_INTERVAL": "2s",
	}
}

var baseSettings = []string{
	"`LOCKERNET_GATEWAY_RATE_LIMIT=1000000` (and the tower, app engine and token limits likewise): the drill's clients poll hundreds of requests; the rate limits are not under test.",
	"`LOCKERNET_GATEWAY_SYNC_INTERVAL=2s` (default 30 s): gateway health is checked often enough to see the online state recover.",
}

// start is the start phase of a make run drill: it records baseSettings before the drill's
// own settings and brings up the drill's system, recording a failure to start in r. The
// caller defers the system's done.
func start(ctx context.Context, r *result, o options, env map[string]string, gatewayArgs ...string) *system {
	r.settings = append(append([]string{}, baseSettings...), r.settings...)
	all := baseEnv()
	for k, v := range env {
		all[k] = v
	}
	t := time.Now()
	sys, err := newSystem(ctx, systemOptions{binDir: o.binDir, lockersPerGateway: o.lockers, env: all, gatewayArgs: gatewayArgs, keep: o.keep})
	if err != nil {
		r.err = fmt.Errorf("start the system: %w", err)
		return nil
	}
	logf("  system up in %s (postgres :%d, temporal %s, apiserver %s, logs %s)", time.Since(t).Round(100*time.Millisecond),
		sys.pgPort, sys.temporal.Address(), sys.apiAddr, sys.dir)
	return sys
}

// finish records whether every process is running at the end and, when the drill failed,
// prints the tail of each process's log before the system is removed.
func finish(r *result, sys *system) {
	down := sys.notRunning()
	r.verify(len(down) == 0, "every process is running at the end", "%s", orNone(strings.Join(down, ", ")))
	if r.passed() {
		return
	}
	n := 30
	if sys.cluster != nil {
		n = 80 // every child's output is in the dev stack's log
	}
	for _, p := range sys.procs() {
		fmt.Fprintf(os.Stderr, "----- last lines of %s (%s)\n%s\n", p.name, p.logPath, p.logTail(n))
	}
}

func orNone(s string) string {
	if s == "" {
		return "none down"
	}
	return s
}
