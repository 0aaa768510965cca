package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // the engine server's CPU profile
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/lockernet/lockernet/internal/dev/devtemporal"
)

// The engine scenario measures Temporal itself on make run's server — the dev server on
// SQLite that devtemporal runs — with Temporal's stock settings and with ours, in one run:
// each variant is a fresh server with empty files, in a process of its own (this binary run
// again with -engine-serve), driven by the temporal scenario's bare workflows and ladder;
// beside each step a 30 s CPU profile of that server process is taken, and the report shows
// where its time went at its knee (the highest step it kept up with). Every step runs on a
// server of its own, started for it, so no step measures an earlier one's hangover. It needs no running
// shape. The cluster shape's server (Temporal on PostgreSQL, in processes devstack starts) is
// not measured by it.

// engineVariant is one server configuration.
type engineVariant struct {
	Name, About string
	Stock       bool
	Shards      int
	Sync        string
	// CheckpointPages is SQLite's wal_autocheckpoint (0: its default).
	CheckpointPages int
	// Durable is false for a setting that acknowledges a write before it is on disk: measured
	// only to show what durability costs, never a candidate.
	Durable bool
}

var engineVariants = []engineVariant{
	{Name: "stock", About: "Temporal's own dynamic-config defaults, 1 history shard, SQLite synchronous=full", Stock: true, Shards: 1, Sync: "full", Durable: true},
	{Name: "ours", About: "make run's server: our dynamic config (devtemporal: start-dev's plus transfer and timer queue polls at 2,000/s), 1 shard, synchronous=full", Shards: 1, Sync: "full", Durable: true},
	{Name: "ours-4-shards", About: "ours with 4 history shards", Shards: 4, Sync: "full", Durable: true},
	{Name: "ours-checkpoint-10k", About: "ours with SQLite wal_autocheckpoint=10000 pages (a WAL copied back into the database a tenth as often; a commit still waits for its fsync)", Shards: 1, Sync: "full", CheckpointPages: 10000, Durable: true},
	{Name: "ours-sync-normal", About: "ours with SQLite synchronous=normal (what make run used before: a commit acknowledged before its WAL frames reach the disk) — not durable, shown for its cost only", Shards: 1, Sync: "normal"},
}

func engineVariantNamed(name string) (engineVariant, bool) {
	for _, v := range engineVariants {
		if v.Name == name {
			return v, true
		}
	}
	return engineVariant{}, false
}

// engineProfile is one step's CPU profile of the server process.
type engineProfile struct {
	Rate float64
	File string
	Top  string // go tool pprof -top, trimmed
	Err  string
}

// engineRun is one variant's outcome.
type engineRun struct {
	Variant  engineVariant
	Bare     bareResult
	Profiles []engineProfile
	// Load is the machine's 1-minute load average at the end of each step, by rate: what
	// else ran on the two cores meanwhile.
	Load map[float64]float64
	Err  string
}

// engineResult is the scenario's outcome.
type engineResult struct {
	Runs []engineRun
}

func (r *engineResult) sustained(name string) float64 {
	for _, run := range r.Runs {
		if run.Variant.Name == name {
			return run.Bare.Sustained
		}
	}
	return 0
}

// runEngine measures each named variant in turn.
func runEngine(ctx context.Context, names []string, rates []float64, refine float64, step time.Duration, dir string) (*engineResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("engine: find this binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	res := &engineResult{}
	for _, name := range names {
		v, ok := engineVariantNamed(name)
		if !ok {
			return nil, fmt.Errorf("engine: no variant %q", name)
		}
		if ctx.Err() != nil {
			break
		}
		run := engineRun{Variant: v}
		if err := measureVariant(ctx, self, v, rates, refine, step, dir, &run); err != nil {
			run.Err = err.Error()
			logf("engine: %s: %v", v.Name, err)
		}
		res.Runs = append(res.Runs, run)
	}
	return res, ctx.Err()
}

func measureVariant(ctx context.Context, self string, v engineVariant, rates []float64, refine float64, step time.Duration, dir string, run *engineRun) error {
	run.Bare.Step = step
	profiles := map[float64]engineProfile{}
	l := newLadder(rates, refine)
	for rate, ok := l.rate(); ok && ctx.Err() == nil; rate, ok = l.rate() {
		// A fresh server for every step: a step past the knee leaves a server impaired for
		// minutes after its task queues look empty, which the next step would measure.
		st, p, err := engineStep(ctx, self, v, rate, step, dir)
		if err != nil {
			return err
		}
		profiles[rate] = p
		if run.Load == nil {
			run.Load = map[float64]float64{}
		}
		run.Load[rate] = loadAverage()
		run.Bare.Steps = append(run.Bare.Steps, st)
		if st.Kept {
			run.Bare.Sustained = max(run.Bare.Sustained, rate)
		}
		l.record(rate, st.Held)
	}
	// The profiles at the knee: the highest step kept up with, and the lowest not.
	var kept, lost float64
	for _, s := range run.Bare.Steps {
		if s.Kept {
			kept = max(kept, s.Rate)
		}
		if !s.Held && (lost == 0 || s.Rate < lost) {
			lost = s.Rate
		}
	}
	for _, r := range []float64{kept, lost} {
		if p, ok := profiles[r]; ok && r > 0 {
			run.Profiles = append(run.Profiles, p)
		}
	}
	return ctx.Err()
}

// engineStep runs one rate on a fresh server of variant v, with a CPU profile of the server
// process taken in the middle of the step.
func engineStep(ctx context.Context, self string, v engineVariant, rate float64, step time.Duration, dir string) (bareStep, engineProfile, error) {
	work, err := os.MkdirTemp("", "lockernet-engine-"+v.Name+"-")
	if err != nil {
		return bareStep{}, engineProfile{}, err
	}
	defer os.RemoveAll(work)
	port, pprofPort, err := twoFreePorts()
	if err != nil {
		return bareStep{}, engineProfile{}, err
	}
	logf("engine: %s: a fresh server for %.0f/s (%s)", v.Name, rate, v.About)
	cmd := exec.CommandContext(ctx, self, "-engine-serve",
		strings.Join([]string{v.Name, work, strconv.Itoa(port), strconv.Itoa(pprofPort)}, ","))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		return bareStep{}, engineProfile{}, fmt.Errorf("start the server: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitForFrontend(ctx, addr, time.Minute); err != nil {
		return bareStep{}, engineProfile{}, err
	}
	var prof engineProfile
	tg := bareTarget{key: "engine " + v.Name, address: addr, namespace: "default",
		quiet: func(context.Context) {}, // one step per server
		during: func(ctx context.Context, rate float64) {
			secs := min(30, int(step.Seconds()))
			// In the middle of the step, once the rate is steady.
			select {
			case <-ctx.Done():
				return
			case <-time.After(step/2 - time.Duration(secs)*time.Second/2):
			}
			prof = takeProfile(ctx, pprofPort, secs, rate, filepath.Join(dir, fmt.Sprintf("%s-%03.0f.pprof", v.Name, rate)))
		},
	}
	res, err := runBareOn(ctx, tg, newLadder([]float64{rate}, 0), step)
	if err != nil {
		return bareStep{}, prof, err
	}
	if len(res.Steps) != 1 {
		return bareStep{}, prof, fmt.Errorf("engine: %s at %.0f/s: no step ran", v.Name, rate)
	}
	return res.Steps[0], prof, nil
}

// loadAverage is the machine's 1-minute load average (0 when it cannot be read).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// takeProfile fetches a CPU profile of secs seconds from the server process and summarises it.
func takeProfile(ctx context.Context, port, secs int, rate float64, file string) engineProfile {
	p := engineProfile{Rate: rate, File: file}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, secs), nil)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	resp, err := (&http.Client{Timeout: time.Duration(secs+30) * time.Second}).Do(req)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.Err = fmt.Sprintf("profile: status %d, %v", resp.StatusCode, err)
		return p
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		p.Err = err.Error()
		return p
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=12", file).Output()
	if err != nil {
		p.Err = fmt.Sprintf("go tool pprof: %v", err)
		return p
	}
	p.Top = trimPprofTop(string(out))
	return p
}

// trimPprofTop keeps the summary lines and the table of go tool pprof -top.
func trimPprofTop(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") ||
			strings.HasPrefix(l, "Time:") || strings.TrimSpace(l) == "" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func waitForFrontend(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: "default",
			Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server at %s did not answer within %s: %w", addr, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func twoFreePorts() (int, int, error) {
	var ports [2]int
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// serveEngine is the server process of one variant (-engine-serve name,dir,port,pprofport):
// a dev server on fresh files in dir, and the pprof listener, until SIGTERM.
func serveEngine(spec string) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		return errors.New("-engine-serve: name,dir,port,pprofport")
	}
	v, ok := engineVariantNamed(parts[0])
	if !ok {
		return fmt.Errorf("-engine-serve: no variant %q", parts[0])
	}
	port, err1 := strconv.Atoi(parts[2])
	pprofPort, err2 := strconv.Atoi(parts[3])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("-engine-serve: %w", err)
	}
	srv, err := devtemporal.Start(devtemporal.Options{DBPath: filepath.Join(parts[1], "temporal.db"), Port: port,
		Namespace: "default", LogFile: filepath.Join(parts[1], "temporal.log"), Stock: v.Stock, Shards: v.Shards, Sync: v.Sync, CheckpointPages: v.CheckpointPages})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(pprofPort)))
	if err != nil {
		_ = srv.Stop()
		return err
	}
	go func() { _ = http.Serve(ln, http.DefaultServeMux) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ln.Close()
	return srv.Stop()
}

func (e *engineResult) markdown(w writer, step time.Duration) {
	w("## Temporal itself: stock settings against ours (make run's server)")
	w("")
	w("Every step of every variant runs on a fresh dev server (the one `make run` embeds: go.temporal.io/server on SQLite, devtemporal) in a process of its own, "+
		"on empty files, so that no step measures the hangover of a step past the knee before it, driven by the bare-workflow scenario (%s per offered rate, the same sustained criterion); a 30 s CPU profile of the "+
		"server process is taken in the middle of every step, and the ones of the highest step kept up with and the lowest not are shown. "+
		"Only durable settings are candidates; a variant marked *not durable* is measured to show what durability costs.", step)
	w("")
	w("| variant | settings | durable | sustained bare workflows/s | start p50 there | start p99 there |")
	w("|---|---|---|---|---|---|")
	for _, r := range e.Runs {
		p50, p99 := "—", "—"
		for _, s := range r.Bare.Steps {
			if s.Kept && s.Rate == r.Bare.Sustained {
				p50, p99 = ms(s.Start.P50), ms(s.Start.P99)
			}
		}
		sus := fmt.Sprintf("%.0f", r.Bare.Sustained)
		if r.Err != "" {
			sus += " (" + firstLine(r.Err) + ")"
		}
		dur := "yes"
		if !r.Variant.Durable {
			dur = "**not durable**"
		}
		w("| %s | %s | %s | %s | %s | %s |", r.Variant.Name, r.Variant.About, dur, sus, p50, p99)
	}
	w("")
	if stock, ours := e.sustained("stock"), e.sustained("ours"); stock > 0 && ours > 0 {
		w("Ours against stock on the same server in this run: **%.2f×** (target ≥ 1.5×: %s).", ours/stock, verdict(ours/stock >= 1.5))
		w("")
	}
	for _, r := range e.Runs {
		w("### Variant %s", r.Variant.Name)
		w("")
		if len(r.Bare.Steps) > 0 {
			r.Bare.table(w)
			var loads []string
			for _, st := range r.Bare.Steps {
				loads = append(loads, fmt.Sprintf("%.0f/s %.1f", st.Rate, r.Load[st.Rate]))
			}
			w("The machine's 1-minute load average at the end of each step (2 cores): %s.", strings.Join(loads, ", "))
			w("")
		}
		for _, p := range r.Profiles {
			if p.Err != "" {
				w("CPU profile at %.0f/s: not taken (%s).", p.Rate, p.Err)
				w("")
				continue
			}
			w("CPU profile of the server process at %.0f/s (`go tool pprof -top %s`):", p.Rate, filepath.Base(p.File))
			w("")
			w("```")
			w("%s", p.Top)
			w("```")
			w("")
		}
	}
}
