package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/webhook"
)

// deployDrill are the knobs of cluster-deploy: a load of about a minute, so that with the
// wait for its holds to expire the drill stays within three minutes on the shared cluster
// shape.
type deployKnobs struct {
	before, onB, after            time.Duration // load before the deploy, between it and the rollback, after the rollback
	flowRate, openRate, eventRate float64       // tower flows, gateway opens and webhook events a second
	hold                          time.Duration // each reservation's and drop-off token's duration
	probeDelay                    time.Duration // GW-0002's controller delay for the pinned probe's open
	buildB                        string        // build B's folder, beside the drill's binaries
}

var deployDrill = deployKnobs{10 * time.Second, 12 * time.Second, 6 * time.Second, 3, 3, 2, 15 * time.Second, 5 * time.Second, "drill-build-b"}

// The phases of the load, by when an operation started.
var deployPhases = []string{"before the deploy", "deploy A → B", "on B", "rollback B → A", "after the rollback"}

// drillClusterDeploy: a rolling deploy A → B of the cluster shape with the runbook's command,
// B's Reservation workflow really differing (a versioned step, worker/drill_build_b.go), then
// the rollback B → A with the same command at A's kept folder, all under a steady mixed load.
func drillClusterDeploy(ctx context.Context, o options, shape *clusterShape) (r *result) {
	k := deployDrill
	r = newResult("cluster-deploy", "cluster shape: rolling deploy A → B with a changed workflow, then rollback, under load")
	r.what = fmt.Sprintf("On the cluster shape (worker versioning on, as `make run-cluster` runs it), build A is the "+
		"current code (bin/dev) and build B the same code built with `-tags drill_build_b` (bin/dev/%s, made by make "+
		"test-faults): its Reservation workflow records one more side effect, behind `workflow.GetVersion`, in the task "+
		"that completes the run (worker/drill_build_b.go; without the GetVersion it fails replay of A's reservations). "+
		"A load runs through nginx the whole time: %.0f tower flows a second (a reservation of %s on a tower locker of "+
		"its own and, for every other flow, a drop-off token on it), %.0f gateway locker opens a second on GW-0001 "+
		"(`Idempotency-Key`, `Prefer: wait=10`, sent again until terminal) and %.0f webhook test events a second to a "+
		"receiver in the drill process. After %s the drill runs the runbook's deploy, `devstack -deploy <B's folder>` "+
		"(what `make deploy-cluster` runs), with one open in flight on GW-0002, whose lock controller takes %s, so that "+
		"a gateway request pinned to A is running when B becomes current; %s later it rolls back with the same command "+
		"at the folder the deploy kept A in (the deploy's `roll back with:` line), and the load runs %s more. Then every "+
		"client-visible failure is counted, every open, hold and event is accounted for, and the history of every "+
		"workflow run the drill started is read from Temporal: failed workflow tasks (non-determinism), the build of "+
		"each completed task and B's marker.",
		k.buildB, k.flowRate, human(k.hold), k.openRate, k.eventRate, human(k.before), human(k.probeDelay), human(k.onB), human(k.after))
	if shape.sys != nil {
		// A fresh shape: its apiservers and workers run bin/dev (build A) as started, and its
		// gateways have every locker free for the load's opens.
		logf("  starting a fresh cluster shape for this drill")
		shape.close()
	}
	cr := startCluster(ctx, r, shape, 0)
	if cr == nil {
		return r
	}
	defer cr.done()
	d := &deployRun{cr: cr, r: r, sys: cr.sys, k: k, pool: cr.sys.lockers()}
	if err := d.run(ctx, o); err != nil {
		r.err = err
	}
	return r
}

// deployRun is one run of cluster-deploy.
type deployRun struct {
	cr   *clusterRun
	r    *result
	sys  *system
	k    deployKnobs
	pool *lockerPool

	bins    string // bin/dev
	release string // build B's folder for this run
	phase   atomic.Int32
	lat     latencies

	tPromoted, tDeployed, tRolledBack time.Time
	buildA, buildB, buildBack         string
}

func (d *deployRun) run(ctx context.Context, o options) error {
	var err error
	if d.bins, err = findBinaries(o.binDir); err != nil {
		return err
	}
	if d.release, err = d.prepareBuildB(); err != nil {
		return err
	}
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	d.buildA = st.Current
	if d.buildA == "" {
		return errors.New("the cluster shape runs unversioned: the drill needs worker versioning (LOCKERNET_WORKER_VERSIONING)")
	}
	tower, err := newTowerLoad(ctx, d.sys, int(d.k.flowRate*(d.k.before+d.k.onB+d.k.after+40*time.Second).Seconds()), d.k.hold)
	if err != nil {
		return err
	}
	rc, ep, stopReceiver, err := d.webhookReceiver(ctx)
	if err != nil {
		return err
	}
	defer stopReceiver()
	if err := (sim{d.sys.gws[1]}).setFaults(ctx, "controller_slow", int(d.k.probeDelay/time.Millisecond)); err != nil {
		return err
	}
	slowed := true
	defer func() {
		if slowed {
			_ = sim{d.sys.gws[1]}.setFaults(context.WithoutCancel(ctx), "none", 0)
		}
	}()

	l := &deployLoad{d: d, tower: tower, app: &appClient{base: "http://" + d.sys.apiAddr, key: d.sys.creds.AppEngineAPIKey},
		endpoint: ep, cloud: d.sys.cloud(), pool: d.pool, stop: make(chan struct{})}
	l.start(ctx)
	var deployErr error
	func() {
		if !sleepCtx(ctx, d.k.before) {
			deployErr = ctx.Err()
			return
		}
		if err := d.replayOnB(ctx); err != nil {
			deployErr = err
			return
		}
		probe := d.startProbe(ctx)
		d.phase.Store(1)
		out, err := d.deploy(ctx, d.release)
		d.tDeployed = time.Now()
		if err != nil {
			deployErr = fmt.Errorf("deploy A → B: %w\n%s", err, out.text)
			return
		}
		d.tPromoted = out.promoted
		d.buildB = out.build
		d.r.figure("Deploy A → B (`devstack -deploy`)", "%s; build %s current %s after the command started",
			secs(out.took), out.build, secs(out.promoted.Sub(out.started)))
		d.phase.Store(2)
		d.pinnedLeft(ctx)
		pr := probe()
		l.addOpen(pr.out, pr.t)
		if err := d.checkPinned(ctx, pr); err != nil {
			deployErr = err
			return
		}
		_ = sim{d.sys.gws[1]}.setFaults(ctx, "none", 0)
		slowed = false
		if !sleepCtx(ctx, d.k.onB) {
			deployErr = ctx.Err()
			return
		}
		if out.kept == "" {
			deployErr = fmt.Errorf("the deploy did not say where it kept build A:\n%s", out.text)
			return
		}
		d.phase.Store(3)
		back, err := d.deploy(ctx, out.kept)
		d.tRolledBack = time.Now()
		if err != nil {
			deployErr = fmt.Errorf("roll back B → A: %w\n%s", err, back.text)
			return
		}
		d.buildBack = back.build
		d.r.figure("Rollback B → A (`devstack -deploy` at the kept folder)", "%s; build %s current again", secs(back.took), back.build)
		d.phase.Store(4)
		sleepCtx(ctx, d.k.after)
	}()
	l.finish()
	if deployErr != nil {
		return deployErr
	}
	return d.check(ctx, l, rc)
}

// prepareBuildB copies build B into a folder of releases of the drill's own, as make
// deploy-cluster builds a release into bin/dev/releases.
func (d *deployRun) prepareBuildB() (string, error) {
	src := filepath.Join(d.bins, d.k.buildB)
	dst := filepath.Join(d.sys.dir, "releases", "build-b")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	for _, b := range []string{"apiserver", "worker"} {
		if _, err := os.Stat(filepath.Join(src, b)); err != nil {
			return "", fmt.Errorf("build B not found (make test-faults builds it: go build -tags drill_build_b -o bin/dev/%s/ ./cmd/apiserver ./cmd/worker ./cmd/lockernet-admin): %w", d.k.buildB, err)
		}
		if err := copyFile(filepath.Join(src, b), filepath.Join(dst, b)); err != nil {
			return "", err
		}
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// status is the worker deployment's status (lockernet-admin deployment status).
func (d *deployRun) status(ctx context.Context) (deployments.Status, error) {
	return (&deployments.Admin{Client: d.sys.tc, Namespace: "default", Name: "lockernet"}).Status(ctx)
}

// deployOutput is what one `devstack -deploy` printed, and when.
type deployOutput struct {
	text              string
	build, kept       string
	started, promoted time.Time
	took              time.Duration
}

var (
	deployBuildLine    = regexp.MustCompile(`^the new processes poll as build (\S+) `)
	deployPromotedLine = regexp.MustCompile(`^build (\S+) is the worker deployment's current version`)
	deployKeptLine     = regexp.MustCompile(`^the running binaries are kept in (\S+)`)
)

// deploy runs the runbook's rolling deploy, `devstack -deploy DIR` on the cluster's data
// dir, and reads its progress as it comes.
func (d *deployRun) deploy(ctx context.Context, dir string) (deployOutput, error) {
	out := deployOutput{started: time.Now()}
	cmd := exec.CommandContext(ctx, filepath.Join(d.bins, "devstack"), "-deploy", dir)
	cmd.Env = append(os.Environ(), "LOCKERNET_DATA_DIR="+d.sys.cluster.dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return out, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	logf("  devstack -deploy %s", dir)
	if err := cmd.Start(); err != nil {
		return out, err
	}
	var text strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		logf("    %s", line)
		text.WriteString(line + "\n")
		if m := deployBuildLine.FindStringSubmatch(line); m != nil {
			out.build = m[1]
		}
		if m := deployPromotedLine.FindStringSubmatch(line); m != nil {
			out.promoted = time.Now()
		}
		if m := deployKeptLine.FindStringSubmatch(line); m != nil {
			out.kept = m[1]
		}
	}
	err = cmd.Wait()
	out.took = time.Since(out.started)
	out.text = text.String() + stderr.String()
	d.r.verify(err == nil, "`devstack -deploy "+filepath.Base(dir)+"` exits 0", "%v", orOK(err))
	if err == nil && out.promoted.IsZero() {
		err = fmt.Errorf("no build was made current")
	}
	return out, err
}

// replayOnB is the runbook's step before a deploy: export the histories of what runs
// (lockernet-admin histories export, build A's) and replay them on the new build (build B's
// lockernet-admin histories replay), which must replay every one.
func (d *deployRun) replayOnB(ctx context.Context) error {
	dir := filepath.Join(d.sys.dir, "histories-before-deploy")
	env := append(os.Environ(), fmt.Sprintf("TEMPORAL_ADDRESS=127.0.0.1:%d", d.sys.cluster.temporalPort), "TEMPORAL_NAMESPACE=default")
	run := func(bin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		logf("  %s %s", filepath.Base(bin), strings.Join(args, " "))
		if err != nil {
			logf("%s", indent(string(out)))
		}
		return string(out), err
	}
	out, err := run(filepath.Join(d.bins, "lockernet-admin"), "histories", "export", "-out", dir, "-per-type", "20", "-since", "10m")
	if err != nil {
		return fmt.Errorf("lockernet-admin histories export: %w\n%s", err, out)
	}
	exported := "no summary printed"
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " histories of ") {
			exported = strings.TrimSpace(line)
		}
	}
	out, err = run(filepath.Join(d.bins, d.k.buildB, "lockernet-admin"), "histories", "replay", "-dir", dir)
	ok, failed := 0, 0
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "ok "):
			ok++
		case strings.HasPrefix(line, "FAIL "):
			failed++
		}
	}
	d.r.figure("Before the deploy: A's histories exported and replayed on B (lockernet-admin histories export, then B's histories replay)",
		"%s; %d replayed ok, %d failed", exported, ok, failed)
	d.r.verify(err == nil && ok > 0 && failed == 0, "build B replays the runs build A ran and runs (the runbook's step before a deploy)", "%s", orOK(err))
	return nil
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "      " + strings.ReplaceAll(s, "\n", "\n      ")
}

// webhookReceiver starts a receiver and an endpoint for the load's test events.
func (d *deployRun) webhookReceiver(ctx context.Context) (*drillReceiver, string, func(), error) {
	rc := &drillReceiver{got: map[string]int{}}
	srv := httptest.NewServer(rc)
	app := &appClient{base: "http://" + d.sys.apiAddr, key: d.sys.creds.AppEngineAPIKey}
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := app.do(ctx, http.MethodPost, "/webhooks/endpoints", map[string]any{"url": srv.URL + "/hooks",
		"event_types": []string{"webhook.test"}}, http.StatusCreated, &ep); err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	key, err := webhook.ParseSecret(ep.Secret)
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	rc.key = key
	return rc, ep.ID, srv.Close, nil
}

// pinnedProbe is the open sent just before the deploy on the slowed GW-0002.
type pinnedProbe struct {
	t   target
	out clientOutcome
}

// startProbe opens a locker of GW-0002 (its controller slowed by probeDelay) and returns
// what waits for its outcome.
func (d *deployRun) startProbe(ctx context.Context) func() pinnedProbe {
	ch := make(chan pinnedProbe, 1)
	go func() {
		t, err := d.pool.take(1)
		if err != nil {
			ch <- pinnedProbe{out: clientOutcome{lastErr: err.Error()}}
			return
		}
		ch <- pinnedProbe{t: t, out: d.sys.cloud().untilAnswered(ctx, http.MethodPost, openPath(t.gw.locationID, t.locker), nil, newKey(), 30)}
	}()
	// The open is stored and its workflow started before the deploy begins.
	time.Sleep(500 * time.Millisecond)
	return func() pinnedProbe { return <-ch }
}

// deployLoad is the drill's steady mixed load, offered until stop is closed.
type deployLoad struct {
	d        *deployRun
	tower    *towerLoad
	app      *appClient
	endpoint string
	cloud    *cloud
	pool     *lockerPool
	stop     chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	opens   []clientOutcome
	targets []target
	events  []string
	errs    []error
}

func (l *deployLoad) start(ctx context.Context) {
	l.offer(ctx, l.d.k.flowRate, func(ctx context.Context) {
		i := int(l.tower.next.Add(1) - 1)
		if i >= len(l.tower.lockers) {
			return
		}
		ph := l.d.phase.Load()
		calls := towerFlow(ctx, l.tower.tower, l.tower.lockers[i], l.tower.hold, i%2 == 0, &l.tower.cs)
		l.tower.flows.add(calls, i%2 == 0)
		for _, c := range calls {
			if c.ok() {
				l.d.lat.add("tower "+c.kind, ph, c.end.Sub(c.start))
			}
		}
	})
	l.offer(ctx, l.d.k.openRate, func(ctx context.Context) {
		t, err := l.pool.take(0)
		if err != nil {
			l.fail(err)
			return
		}
		ph := l.d.phase.Load()
		out := l.cloud.untilAnswered(ctx, http.MethodPost, openPath(t.gw.locationID, t.locker), nil, newKey(), 10)
		if out.done {
			l.d.lat.add("gateway open", ph, out.settled.Sub(out.started))
		}
		l.addOpen(out, t)
	})
	l.offer(ctx, l.d.k.eventRate, func(ctx context.Context) {
		ph := l.d.phase.Load()
		t0 := time.Now()
		var out struct {
			EventID string `json:"event_id"`
		}
		for {
			a, err := send(ctx, http.MethodPost, l.app.base+"/webhooks/endpoints/"+l.endpoint+"/test", map[string]string{"x-api-key": l.app.key}, nil)
			if err == nil && a.status == http.StatusAccepted {
				if jerr := json.Unmarshal(a.body, &out); jerr != nil {
					l.fail(jerr)
					return
				}
				break
			}
			if err != nil {
				l.tower.cs.add(failureKind(0, nil), 1)
			} else {
				l.tower.cs.add(failureKind(a.status, a.header), 1)
			}
			if !sleepCtx(ctx, 200*time.Millisecond) {
				l.fail(fmt.Errorf("a webhook test event was never accepted"))
				return
			}
		}
		l.d.lat.add("webhook test event", ph, time.Since(t0))
		l.mu.Lock()
		l.events = append(l.events, out.EventID)
		l.mu.Unlock()
	})
}

// offer calls op rate times a second, each in its own goroutine, until stop is closed.
func (l *deployLoad) offer(ctx context.Context, rate float64, op func(context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.stop:
				return
			case <-tick.C:
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					op(ctx)
				}()
			}
		}
	}()
}

func (l *deployLoad) addOpen(out clientOutcome, t target) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opens, l.targets = append(l.opens, out), append(l.targets, t)
}

func (l *deployLoad) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// finish stops offering and waits for every operation in flight to end.
func (l *deployLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// latencies are the operations' durations by kind and phase.
type latencies struct {
	mu sync.Mutex
	m  map[string]map[int32][]time.Duration
}

func (l *latencies) add(kind string, phase int32, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]map[int32][]time.Duration{}
	}
	if l.m[kind] == nil {
		l.m[kind] = map[int32][]time.Duration{}
	}
	l.m[kind][phase] = append(l.m[kind][phase], d)
}

// p99 of ds (the largest for fewer than 100).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*99+99)/100 - 1
	return s[min(i, len(s)-1)]
}

// figures reports each kind's p99 in each phase.
func (l *latencies) figures(r *result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds := make([]string, 0, len(l.m))
	for k := range l.m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		var parts []string
		for ph, name := range deployPhases {
			ds := l.m[k][int32(ph)]
			if len(ds) == 0 {
				parts = append(parts, name+" –")
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s (n=%d)", name, ms(p99(ds)), len(ds)))
		}
		r.figure("p99 of "+k, "%s", strings.Join(parts, "; "))
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
