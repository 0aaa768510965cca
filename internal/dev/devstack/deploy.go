package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/worker"
)

// A rolling deploy of the cluster shape (`make deploy-cluster`, `devstack -deploy DIR`):
// every worker, then every apiserver, is replaced by the same process run from another
// folder of binaries, one at a time, while the others and nginx keep serving. The running
// dev stack does it, since it owns the processes: `devstack -deploy` asks it over a Unix
// socket in the run dir and prints its progress.
//
// Workers go first, so a new build's workflows and activities are polled for before an
// apiserver of that build starts them. An apiserver is first taken out of nginx (marked
// `down`, nginx reloaded) and nginx's workers of the previous configuration are waited for:
// they exit once the requests they have in flight are answered, so when the apiserver gets
// SIGTERM no request is on its way to it. The supervisor starts the new binary on the same
// address and environment; once its /readyz answers 200 it is put back in nginx. A new
// process that does not become ready stops the deploy: the previous build is started again
// in its place, and the processes already rolled keep the new one.

// controlSocket is the dev stack's control socket, in <data dir>/run.
const controlSocket = "control.sock"

// DeployOptions are a rolling deploy's folder and bounds.
type DeployOptions struct {
	// BinDir holds the new build: an apiserver and a worker binary.
	BinDir string `json:"bin_dir"`
	// Drain bounds how long an apiserver taken out of nginx is given for the requests nginx
	// has in flight to it [35s: the longest wait a request may ask for, Prefer: wait=30,
	// and 5 s]. Past it, the apiserver is stopped anyway and drains for 10 s itself.
	Drain time.Duration `json:"drain"`
	// StopGrace is how long a stopping process has after SIGTERM before SIGKILL [30s, the
	// compose file's stop_grace_period].
	StopGrace time.Duration `json:"stop_grace"`
	// ReadyTimeout is how long a new process has to answer /readyz 200 [90s].
	ReadyTimeout time.Duration `json:"ready_timeout"`
}

func (o DeployOptions) withDefaults() DeployOptions {
	if o.Drain <= 0 {
		o.Drain = 35 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 30 * time.Second
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	return o
}

// DeployReport says what a deploy did.
type DeployReport struct {
	BinDir string `json:"bin_dir"`
	// Previous is the folder the apiservers ran from before; Kept, if set, is where the
	// running binaries were copied because Previous is not a folder of releases beside
	// BinDir (bin/dev, which the next `make dev-build` rewrites): roll back to it.
	Previous string `json:"previous"`
	Kept     string `json:"kept,omitempty"`
	// Build is the worker deployment build the new processes poll as (empty: unversioned).
	Build string        `json:"build,omitempty"`
	Steps []DeployStep  `json:"steps"`
	Took  time.Duration `json:"took"`
}

// DeployStep is one process replaced: out of service at Started (taken out of nginx, or
// sent SIGTERM), back at Ready (ready, and back in nginx); Ready is zero if it failed.
type DeployStep struct {
	Name    string    `json:"name"`
	OldPid  int       `json:"old_pid"`
	NewPid  int       `json:"new_pid"`
	Bin     string    `json:"bin"`
	Started time.Time `json:"started"`
	Ready   time.Time `json:"ready"`
}

// deployEvent is a line of the control socket's answer: a progress line, or the report
// and error that end it.
type deployEvent struct {
	Line   string        `json:"line,omitempty"`
	Report *DeployReport `json:"report,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// roller does the rolling deploys of a running cluster shape.
type roller struct {
	ctx      context.Context // the stack's: a deploy goes on if its caller goes away
	cs       ClusterSettings
	repo     string
	nginxBin string
	sup      *supervisor
	logger   *slog.Logger
	// build is the build the stack's processes poll as under worker versioning (empty:
	// unversioned); a deploy gives the new processes their own.
	build string
	mu    sync.Mutex // one deploy at a time
}

// serveControl serves the deploy on <run dir>/control.sock until ctx is done. The run dir
// is the user's own (0700). Without the socket (a path too long for one, or another stack
// on this data dir) the stack runs all the same, without deploys; it says why.
func serveControl(ctx context.Context, r *roller, runDir string) {
	path := filepath.Join(runDir, controlSocket)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		r.logger.Warn("another dev stack answers on this data dir's control socket; deploys to this one are off", "socket", path)
		return
	}
	_ = os.Remove(path) // left by a stack that was killed
	ln, err := net.Listen("unix", path)
	if err != nil {
		r.logger.Warn("no control socket; deploys are off", "socket", path, "err", err)
		return
	}
	_ = os.Chmod(path, 0o600)
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
}

func (r *roller) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/deploy" {
		http.NotFound(w, req)
		return
	}
	var o DeployOptions
	if err := json.NewDecoder(req.Body).Decode(&o); err != nil {
		http.Error(w, "read deploy options: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !r.mu.TryLock() {
		http.Error(w, "a deploy is already running", http.StatusConflict)
		return
	}
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	var wmu sync.Mutex
	enc := json.NewEncoder(w)
	send := func(ev deployEvent) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = enc.Encode(ev) // a caller that went away misses the rest; the log has it
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		r.logger.Info(line)
		send(deployEvent{Line: line})
	}
	rep, err := r.deploy(r.ctx, o, say)
	ev := deployEvent{Report: &rep}
	if err != nil {
		r.logger.Error("deploy stopped", "err", err)
		ev.Error = err.Error()
	}
	send(ev)
}

// unit is a process a deploy replaces.
type unit struct {
	sv   *service
	bin  string // apiserver or worker
	addr string // its own address: /readyz, and the upstream server nginx knows it by
}

// units are the workers, then the apiservers, in the order they were started.
func (r *roller) units() []unit {
	var workers, apiservers []unit
	for _, sv := range r.sup.services {
		u, err := url.Parse(sv.health)
		if err != nil {
			continue
		}
		switch sv.child.bin {
		case "worker":
			workers = append(workers, unit{sv: sv, bin: "worker", addr: u.Host})
		case "apiserver":
			apiservers = append(apiservers, unit{sv: sv, bin: "apiserver", addr: u.Host})
		}
	}
	return append(workers, apiservers...)
}

func (r *roller) deploy(ctx context.Context, o DeployOptions, say func(string, ...any)) (DeployReport, error) {
	t0 := time.Now()
	o = o.withDefaults()
	dir, err := filepath.Abs(o.BinDir)
	if err != nil {
		return DeployReport{}, fmt.Errorf("resolve %s: %w", o.BinDir, err)
	}
	rep := DeployReport{BinDir: dir}
	for _, b := range []string{"apiserver", "worker"} {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil {
			return rep, fmt.Errorf("the new build: %w", err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return rep, fmt.Errorf("the new build: %s is not an executable file", filepath.Join(dir, b))
		}
	}
	units := r.units()
	if len(units) == 0 {
		return rep, errors.New("no apiserver or worker runs under this dev stack")
	}
	rep.Previous = filepath.Dir(units[len(units)-1].sv.binPath())
	if rep.Kept, err = keepRunning(units, dir, r.runningBuild(units[len(units)-1])); err != nil {
		return rep, err
	}
	// Under worker versioning the new processes poll as a build of their own (decision 0019),
	// made the deployment's current version once the first new worker polls: from then on the
	// auto-upgrade workflows' tasks go to it, while the gateway requests pinned to the
	// previous build finish on the processes of that build still running.
	var setEnv []string
	if r.build != "" {
		if rep.Build, err = releaseBuildID(dir); err != nil {
			return rep, err
		}
		setEnv = versioningEnv(r.cs.Settings, rep.Build)
		say("the new processes poll as build %s of worker deployment %s", rep.Build, r.cs.DeploymentName)
	}
	say("rolling %d processes to %s, one at a time (previous build: %s)", len(units), dir, rep.Previous)
	if rep.Kept != "" {
		say("the running binaries are kept in %s", rep.Kept)
	}
	promoted := false
	for _, u := range units {
		step, err := r.roll(ctx, u, filepath.Join(dir, u.bin), setEnv, o, say)
		rep.Steps = append(rep.Steps, step)
		if err != nil {
			rep.Took = time.Since(t0)
			return rep, fmt.Errorf("deploy stopped at %s (the processes before it run the new build, the others the previous one): %w", u.sv.name, err)
		}
		if rep.Build != "" && !promoted && u.bin == "worker" {
			if err := promoteBuild(ctx, r.cs.Settings, r.cs.TemporalAddress, rep.Build, r.logger); err != nil {
				rep.Took = time.Since(t0)
				return rep, fmt.Errorf("deploy stopped after %s: %w", u.sv.name, err)
			}
			promoted = true
			say("build %s is the worker deployment's current version", rep.Build)
		}
	}
	rep.Took = time.Since(t0)
	back := rep.Previous
	if rep.Kept != "" {
		back = rep.Kept
	}
	say("deployed in %s: every worker and apiserver runs %s", rep.Took.Round(100*time.Millisecond), dir)
	say("roll back with: %s", rollbackCommand(back))
	return rep, nil
}

// rollbackCommand is the command that deploys the build in dir: make's, for a folder of
// bin/dev/releases.
func rollbackCommand(dir string) string {
	cmd := "devstack -deploy " + dir
	if filepath.Base(filepath.Dir(dir)) == "releases" {
		return "make deploy-cluster RELEASE=" + filepath.Base(dir) + " (or " + cmd + ")"
	}
	return cmd
}

// roll replaces one process by bin, and puts the previous build back if bin does not
// become ready.
func (r *roller) roll(ctx context.Context, u unit, bin string, setEnv []string, o DeployOptions, say func(string, ...any)) (DeployStep, error) {
	name := u.sv.name
	step := DeployStep{Name: name, Bin: bin, Started: time.Now()}
	prevBin := u.sv.binPath()
	if u.bin == "apiserver" {
		t0 := time.Now()
		lingering, err := r.applyNginx(ctx, []string{u.addr}, o.Drain)
		if err != nil {
			r.nginxBack(ctx, say)
			return step, fmt.Errorf("take it out of nginx: %w", err)
		}
		if lingering > 0 {
			say("%s: out of nginx; %d nginx workers still had requests in flight after %s, stopping it anyway (it drains them for 10 s)", name, lingering, o.Drain)
		} else {
			say("%s: out of nginx; the requests nginx had in flight to it are answered (%s)", name, time.Since(t0).Round(time.Millisecond))
		}
	}
	t0 := time.Now()
	prevEnv := u.sv.envNow()
	stopped, started, err := u.sv.replace(ctx, bin, setEnv, o.StopGrace)
	step.OldPid = pidOf(stopped)
	if err == nil {
		step.NewPid = pidOf(started)
		say("%s: pid %d stopped, pid %d started from %s", name, step.OldPid, step.NewPid, bin)
		err = waitReady(ctx, "http://"+u.addr+"/readyz", o.ReadyTimeout, started)
	}
	if err != nil {
		say("%s: the new build did not become ready (%v); starting the previous one again", name, err)
		_, back, rerr := u.sv.replace(ctx, prevBin, prevEnv, o.StopGrace)
		if rerr == nil {
			rerr = waitReady(ctx, "http://"+u.addr+"/readyz", o.ReadyTimeout, back)
		}
		if rerr != nil {
			err = fmt.Errorf("%w; the previous build did not come back either: %v", err, rerr)
		} else {
			say("%s: runs the previous build again (pid %d)", name, pidOf(back))
		}
		if u.bin == "apiserver" {
			r.nginxBack(ctx, say)
		}
		return step, err
	}
	if u.bin == "apiserver" {
		if _, err := r.applyNginx(ctx, nil, 0); err != nil {
			return step, fmt.Errorf("put it back in nginx: %w", err)
		}
	}
	step.Ready = time.Now()
	took := time.Since(t0).Round(time.Millisecond)
	if u.bin == "apiserver" {
		say("%s: ready in %s, back in nginx", name, took)
	} else {
		say("%s: ready in %s", name, took)
	}
	return step, nil
}

// nginxBack puts every apiserver back in nginx after a failed step: one that is not
// ready is then skipped by nginx as a crashed one is (proxy_next_upstream).
func (r *roller) nginxBack(ctx context.Context, say func(string, ...any)) {
	if _, err := r.applyNginx(ctx, nil, 0); err != nil {
		say("nginx: could not put every apiserver back: %v", err)
	}
}

// applyNginx writes nginx's configuration with the apiservers in down marked `down`,
// checks it (nginx -t) and has the running nginx load it (SIGHUP, what `nginx -s reload`
// sends): nginx starts workers on the new configuration and tells the previous ones to
// answer the requests they have in flight and exit. With wait > 0 it returns once those
// have exited, or after wait with how many have not.
func (r *roller) applyNginx(ctx context.Context, down []string, wait time.Duration) (lingering int, err error) {
	dir, path, err := writeNginxConfig(r.cs, r.repo, down)
	if err != nil {
		return 0, err
	}
	if out, err := exec.CommandContext(ctx, r.nginxBin, append(nginxArgs(dir, path), "-t", "-q")...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("nginx -t: %s: %w", strings.TrimSpace(string(out)), err)
	}
	sv := r.sup.service("nginx")
	if sv == nil {
		return 0, errors.New("nginx is not supervised by this stack")
	}
	p := sv.current()
	master := pidOf(p)
	old := childPids(master)
	if master <= 0 || exited(p) || syscall.Kill(master, syscall.SIGHUP) != nil {
		// nginx is down: the supervisor starts it again, on the file just written.
		err := pollUntil(ctx, 30*time.Second, func() bool {
			q := sv.current()
			return q != p && !exited(q) && probe(ctx, sv.health)
		})
		if err != nil {
			return 0, fmt.Errorf("nginx is down and did not come back: %w", err)
		}
		return 0, nil
	}
	loaded := func() bool {
		for pid := range childPids(master) {
			if !old[pid] {
				return true
			}
		}
		return false
	}
	if err := pollUntil(ctx, 10*time.Second, loaded); err != nil {
		return 0, fmt.Errorf("nginx did not start workers on the new configuration (see %s): %w", filepath.Join(dir, "error.log"), err)
	}
	if wait <= 0 {
		return 0, nil
	}
	remaining := func() int {
		now := childPids(master)
		n := 0
		for pid := range old {
			if now[pid] {
				n++
			}
		}
		return n
	}
	_ = pollUntil(ctx, wait, func() bool { return remaining() == 0 })
	return remaining(), ctx.Err()
}

// service returns the supervised child named name, or nil.
func (sp *supervisor) service(name string) *service {
	for _, sv := range sp.services {
		if sv.name == name {
			return sv
		}
	}
	return nil
}

// keptBuildFile, in a folder keepRunning kept, holds the build its processes polled as
// (releaseBuildID).
const keptBuildFile = "build-id"

// runningBuild is the build u's process polls as under worker versioning: the one a deploy
// gave it, else the stack's own ("" : unversioned).
func (r *roller) runningBuild(u unit) string {
	build := r.build
	for _, kv := range u.sv.envNow() {
		if v, ok := strings.CutPrefix(kv, "LOCKERNET_BUILD_ID="); ok {
			build = v
		}
	}
	return build
}

// keepRunning copies the binaries the units run now into a folder beside dir, unless
// they already run from one there (a release folder is kept as it is): the first deploy
// from bin/dev, which the next `make dev-build` rewrites, can be rolled back all the same.
// It copies the running processes' own executables, so a rebuild since they started does
// not matter, and with them, when build is set, the build they poll as (keptBuildFile): the
// stack's build id is its revision when built from a clean checkout, not the binaries' hash,
// and a rollback must return to the same build, whose pinned runs wait for its workers. It
// returns the folder, or "" when nothing needed keeping.
func keepRunning(units []unit, dir, build string) (string, error) {
	parent := filepath.Dir(dir)
	running := map[string]*unit{}
	for i := range units {
		u := &units[i]
		if running[u.bin] != nil {
			continue
		}
		running[u.bin] = u
	}
	need := false
	for _, u := range running {
		if d := filepath.Dir(u.sv.binPath()); d != dir && filepath.Dir(d) != parent {
			need = true
		}
	}
	if !need {
		return "", nil
	}
	kept := filepath.Join(parent, "running-before-"+filepath.Base(dir))
	if err := os.MkdirAll(kept, 0o755); err != nil {
		return "", fmt.Errorf("keep the running build: %w", err)
	}
	for b, u := range running {
		src := u.sv.binPath()
		if pid := pidOf(u.sv.current()); pid > 0 {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
				src = fmt.Sprintf("/proc/%d/exe", pid)
			}
		}
		if err := copyExecutable(src, filepath.Join(kept, b)); err != nil {
			return "", fmt.Errorf("keep the running build: %w", err)
		}
	}
	if build != "" {
		if err := os.WriteFile(filepath.Join(kept, keptBuildFile), []byte(build+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("keep the running build: %w", err)
		}
	}
	return kept, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst+".new", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".new", dst)
}

// waitReady waits until url answers 200 (a /readyz: the process reaches Postgres and
// Temporal), failing early if p exits.
func waitReady(ctx context.Context, url string, timeout time.Duration, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 3 * time.Second}
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s within %s (last: %s)", p.name, url, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pollUntil checks ok every 50 ms until it holds, for at most timeout.
func pollUntil(ctx context.Context, timeout time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// childPids are the live child processes of ppid (nginx's workers, under its master).
func childPids(ppid int) map[int]bool {
	out := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if p, _ := strconv.Atoi(f[1]); p == ppid {
			out[pid] = true
		}
	}
	return out
}

func pidOf(p *proc) int {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func exited(p *proc) bool {
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Deploy asks the cluster shape running on dataDir (make run-cluster) to roll its workers
// and apiservers to the build in o.BinDir, one at a time, and prints its progress to out.
// If the caller goes away, the deploy goes on in the stack, which logs the rest.
func Deploy(ctx context.Context, dataDir string, o DeployOptions, out io.Writer) (DeployReport, error) {
	sock := filepath.Join(dataDir, "run", controlSocket)
	if _, err := os.Stat(sock); err != nil {
		return DeployReport{}, fmt.Errorf("no cluster shape runs on LOCKERNET_DATA_DIR=%s (no %s): start it with make run-cluster", dataDir, sock)
	}
	dir, err := filepath.Abs(o.BinDir)
	if err != nil {
		return DeployReport{}, fmt.Errorf("resolve %s: %w", o.BinDir, err)
	}
	o.BinDir = dir
	body, err := json.Marshal(o)
	if err != nil {
		return DeployReport{}, err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://devstack/deploy", bytes.NewReader(body))
	if err != nil {
		return DeployReport{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return DeployReport{}, fmt.Errorf("reach the dev stack on %s: %w", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return DeployReport{}, fmt.Errorf("the dev stack refused the deploy: %s", strings.TrimSpace(string(b)))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev deployEvent
		if err := dec.Decode(&ev); err != nil {
			return DeployReport{}, fmt.Errorf("the dev stack stopped answering during the deploy (its log says how it went): %w", err)
		}
		if ev.Line != "" {
			fmt.Fprintln(out, ev.Line)
		}
		if ev.Report != nil {
			if ev.Error != "" {
				return *ev.Report, errors.New(ev.Error)
			}
			return *ev.Report, nil
		}
	}
}

// releaseBuildID is the build a release folder's processes poll as: the build recorded in a
// folder keepRunning kept, else a hash of its apiserver and worker (the same bytes, the same
// build); either way rolling back to kept binaries returns to their build.
func releaseBuildID(dir string) (string, error) {
	if b, err := os.ReadFile(filepath.Join(dir, keptBuildFile)); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" && !strings.ContainsAny(id, " \t\n") {
			return id, nil
		}
		return "", fmt.Errorf("%s holds no build id", filepath.Join(dir, keptBuildFile))
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the kept build's id: %w", err)
	}
	h, err := worker.HashFiles(filepath.Join(dir, "apiserver"), filepath.Join(dir, "worker"))
	if err != nil {
		return "", fmt.Errorf("derive the new build's id: %w", err)
	}
	return "exe-" + h, nil
}
