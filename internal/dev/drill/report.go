package drill

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// result is what one drill found.
type result struct {
	name, title string
	what        string   // what the drill did, in a paragraph
	settings    []string // settings the drill changed from the defaults, and why
	figures     [][2]string
	checks      []check
	notes       []string
	lost        int
	duplicates  int
	started     time.Time
	took        time.Duration
	err         error // the drill could not run to the end
}

// check is one thing a drill verified. Fatal checks fail the run: lost requests, doubled
// actuations or side effects, components that did not recover, contract violations.
type check struct {
	what   string
	ok     bool
	detail string
	fatal  bool
}

func newResult(name, title string) *result {
	return &result{name: name, title: title, started: time.Now()}
}

func (r *result) figure(name, format string, args ...any) {
	r.figures = append(r.figures, [2]string{name, fmt.Sprintf(format, args...)})
	logf("  %s: %s", name, fmt.Sprintf(format, args...))
}

// verify records a fatal check.
func (r *result) verify(ok bool, what, format string, args ...any) {
	r.checks = append(r.checks, check{what: what, ok: ok, detail: fmt.Sprintf(format, args...), fatal: true})
	mark := "ok"
	if !ok {
		mark = "FAILED"
	}
	logf("  check %s: %s (%s)", mark, what, fmt.Sprintf(format, args...))
}

// observe records a check that is reported but does not fail the run.
func (r *result) observe(ok bool, what, format string, args ...any) {
	r.checks = append(r.checks, check{what: what, ok: ok, detail: fmt.Sprintf(format, args...)})
	mark := "ok"
	if !ok {
		mark = "not met"
	}
	logf("  observed %s: %s (%s)", mark, what, fmt.Sprintf(format, args...))
}

func (r *result) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// passed: nothing lost, nothing doubled, every fatal check held, the drill ran to the end.
func (r *result) passed() bool {
	if r.err != nil || r.lost > 0 || r.duplicates > 0 {
		return false
	}
	for _, c := range r.checks {
		if c.fatal && !c.ok {
			return false
		}
	}
	return true
}

// recovery is the headline recovery time of a drill, for the summary.
func (r *result) recovery() string {
	for _, f := range r.figures {
		if rest, ok := strings.CutPrefix(f[0], "Time to recover"); ok {
			if what := strings.Trim(strings.TrimSpace(rest), "()"); what != "" {
				return f[1] + " (" + what + ")"
			}
			return f[1]
		}
	}
	return "—"
}

type report struct {
	started time.Time
	commit  string // when the drills started: what the binaries were built from
	command string
	results []*result
}

func (rep *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Reliability: fault drills\n\n")
	w("Produced by `%s` (`internal/dev/cmd/lockernet-drill`); do not edit by hand, run it again.\n\n", rep.command)
	w("Each drill starts a whole system of its own from the binaries in `bin/dev/` (`make dev-build`): a private\n")
	w("PostgreSQL cluster (the machine's `initdb`/`pg_ctl`, in a temporary directory, on a free port), the embedded\n")
	w("Temporal server on its own SQLite file, and the apiserver, the worker and the two simulated gateways\n")
	w("(`gateway -tags simcontrol`) as separate processes on free ports, which the drill kills, stops and restarts\n")
	w("one by one while clients drive the real HTTP APIs. A drill fails on a lost request, a door actuated more\n")
	w("than once per open request (or any other doubled side effect), a component that does not recover within a\n")
	w("generous limit, or a broken contract (a fatal check); times are measured and reported, never asserted.\n\n")
	w("The `cluster-*` drills run on the production shape instead (`make run-cluster`, started as\n")
	w("`bin/dev/devstack -cluster` on a private PostgreSQL cluster, data dir and free ports, shared by those drills in\n")
	w("turn): the official Temporal server as its own process on Postgres with 4 history shards, two apiservers and two\n")
	w("workers behind nginx, and the dev stack's supervisor, which restarts what a drill stops or kills. Clients go\n")
	w("through nginx. Besides lost requests and door actuations they check that every tower hold was released by its\n")
	w("own workflow's durable timer, late but exactly once (one run of the workflow, completed once, one expiry).\n\n")
	w("Every drill that kills a cloud process with door opens in flight (a worker and the apiserver on both shapes,\n")
	w("the Temporal server on the cluster shape) checks DESIGN §6.2's promise for gateways that honour\n")
	w("`Idempotency-Key`: every open ends `completed`, every door moved exactly once by the simulators' count, and\n")
	w("every client retry with its key answers the same outcome. The Temporal server is killed on the cluster shape\n")
	w("only: make run's shape embeds it in the dev stack's process (and a drill's system in the drill's), where\n")
	w("killing it kills the whole dev system.\n\n")
	w("The stop-each drills (one on each shape) stop or kill every process in turn, the gateways included, each time\n")
	w("with keyed opens in flight at slow lock controllers, and hold each request's reported outcome against its door\n")
	w("(DESIGN §6.2): `completed` ⇒ the door moved exactly once; `rejected` or `dispatch_failed` ⇒ it did not move;\n")
	w("`gateway_unresponsive` ⇒ at most once, and only with `details.outcome` `unknown`.\n\n")

	w("| | |\n|---|---|\n")
	w("| Date | %s |\n", rep.started.UTC().Format("2006-01-02 15:04 MST"))
	w("| Commit | %s |\n", rep.commit)
	w("| Machine | %s |\n", machine())
	w("| Go | %s |\n", runtime.Version())
	w("| Command | `%s` |\n", rep.command)
	w("| Took | %s |\n\n", time.Since(rep.started).Round(time.Second))

	w("## Summary\n\n| drill | lost requests | duplicate actuations | time to recover | result |\n|---|---|---|---|---|\n")
	for _, r := range rep.results {
		verdict := "pass"
		if !r.passed() {
			verdict = "**FAIL**"
		}
		w("| [%s](#%s) | %d | %d | %s | %s |\n", r.title, anchor(r.title), r.lost, r.duplicates, r.recovery(), verdict)
	}
	w("\n")
	w("## How to run\n\n")
	w("```sh\n")
	w("make test-faults                        # dev-build and temporal-build, then every drill; writes this file; exit status 1 on a failure\n")
	w("make test-faults DRILLS=kill-worker     # one drill, or a comma-separated list; prints the report instead\n")
	w("make test-faults DRILLS=cluster-kill-worker,cluster-kill-temporal   # cluster drills share one cluster shape\n")
	w("make test-faults DRILL_ARGS='-kill-worker-opens 500 -keep'   # knobs: bin/dev/lockernet-drill -h\n")
	w("```\n\n")
	w("The drills need the machine's `initdb` and `pg_ctl` (each drill runs a private cluster; the shared server on\n")
	w("127.0.0.1:5432 is never used), nginx for the cluster drills, and free local ports. They leave no process,\n")
	w("cluster or directory behind.\n\n")
	for _, r := range rep.results {
		w("## %s\n\n", r.title)
		if r.what != "" {
			w("%s\n\n", r.what)
		}
		if len(r.settings) > 0 {
			w("Settings changed for this drill:\n\n")
			for _, s := range r.settings {
				w("- %s\n", s)
			}
			w("\n")
		}
		if r.err != nil {
			w("**The drill did not run to the end:** %s\n\n", oneLine(r.err.Error()))
		}
		w("| figure | value |\n|---|---|\n")
		w("| Lost requests | %d |\n", r.lost)
		w("| Duplicate door actuations | %d |\n", r.duplicates)
		for _, f := range r.figures {
			w("| %s | %s |\n", f[0], f[1])
		}
		w("| Drill took | %s |\n\n", r.took.Round(time.Second))
		if len(r.checks) > 0 {
			w("What was checked:\n\n| check | result | detail |\n|---|---|---|\n")
			for _, c := range r.checks {
				mark := "✓"
				switch {
				case !c.ok && c.fatal:
					mark = "✗ **failed**"
				case !c.ok:
					mark = "not met (reported only)"
				}
				w("| %s | %s | %s |\n", c.what, mark, c.detail)
			}
			w("\n")
		}
		for _, n := range r.notes {
			w("%s\n\n", n)
		}
	}
	return b.String()
}

func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " (with uncommitted changes in the working tree)"
	}
	return "`" + c + "`"
}

func machine() string {
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
			}
		}
		mem = fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
	}
	kernel := ""
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	parts := []string{fmt.Sprintf("%d CPUs", runtime.NumCPU())}
	for _, p := range []string{cpu, mem, kernel} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ") + " (shared with other builds and test runs)"
}

// durations summarises a set of durations as min / median / max.
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) string { return secs(d) }
	return fmt.Sprintf("min %s, median %s, max %s (n=%d)", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}

// human writes a setting's duration the way the report writes times: "15 s", "1.5 s".
func human(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return secs(d)
}

func secs(d time.Duration) string {
	if d > -time.Second && d < time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// counts renders a histogram such as "completed 150, gateway_unresponsive 50".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
