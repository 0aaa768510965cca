package devstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

// TestRollingDeployUnderLoad starts the cluster shape, keeps a trickle of requests going
// through nginx, and rolls every worker and apiserver to a new folder of binaries: each is
// replaced in turn while the others answer, no request fails, the new processes run from
// the new folder, and a crash afterwards is restarted from it. A deploy to a build that does
// not start stops at its first process and puts the previous build back there; rolling back
// is a deploy to the kept previous build.
func TestRollingDeployUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal server, nginx and every service")
	}
	if _, err := findNginx(); err != nil {
		t.Skip(err)
	}
	binDir := buildClusterBinaries(t)
	cs, clusterOut := startClusterShape(t, binDir)
	creds, err := seed.ReadCredentials(filepath.Join(cs.DataDir, seed.CredentialsFile))
	require.NoError(t, err)
	api := "http://" + cs.APIAddr
	token := clientToken(t, api, *creds)

	// The new build: the same binaries in a folder of releases.
	releases := filepath.Join(t.TempDir(), "releases")
	release := filepath.Join(releases, "new")
	require.NoError(t, os.MkdirAll(release, 0o755))
	for _, b := range []string{"apiserver", "worker"} {
		require.NoError(t, copyExecutable(filepath.Join(binDir, b), filepath.Join(release, b)))
		// Bytes after the end of the executable: it runs the same, but it is another build
		// to the worker deployment (its id is the binaries' hash).
		f, err := os.OpenFile(filepath.Join(release, b), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("another build")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	firstBuild := currentBuild(t, cs)
	require.NotEmpty(t, firstBuild, "the stack made its build current")
	names := []string{"worker-1", "worker-2", "apiserver-1", "apiserver-2"}
	before := map[string]int{}
	for _, n := range names {
		before[n] = readPid(t, filepath.Join(cs.DataDir, "run", n+".pid"))
		assert.Equal(t, filepath.Join(binDir, binOf(n)), exe(t, before[n]))
	}

	load := startTrickle(api, token)
	watch := startWatch(cs)
	out := &syncbuf.Buffer{}
	rep, err := Deploy(context.Background(), cs.DataDir, DeployOptions{BinDir: release}, out)
	down := watch.stop()
	sent, failures := load.stop()
	t.Logf("deploy output:\n%s", out.String())
	require.NoError(t, err)
	require.NotEmpty(t, rep.Build, "the new processes poll as a build of their own")
	assert.NotEqual(t, firstBuild, rep.Build)
	assert.Equal(t, rep.Build, currentBuild(t, cs), "the new build is the deployment's current version")

	// Every process was replaced, workers first, one after the other.
	require.Len(t, rep.Steps, len(names))
	for i, st := range rep.Steps {
		assert.Equal(t, names[i], st.Name)
		assert.Equal(t, before[st.Name], st.OldPid, "%s: the process it stopped", st.Name)
		assert.NotEqual(t, st.OldPid, st.NewPid, "%s: a new process", st.Name)
		assert.Equal(t, st.NewPid, readPid(t, filepath.Join(cs.DataDir, "run", st.Name+".pid")))
		assert.Equal(t, filepath.Join(release, binOf(st.Name)), exe(t, st.NewPid), "%s runs the new build", st.Name)
		assert.ErrorIs(t, syscall.Kill(st.OldPid, 0), syscall.ESRCH, "%s: the old process is gone", st.Name)
		if i > 0 {
			assert.False(t, st.Started.Before(rep.Steps[i-1].Ready), "%s was taken out only once %s was back", st.Name, rep.Steps[i-1].Name)
		}
	}
	// Seen from outside: never more than one of the four was not answering on its own
	// address, so the other apiserver kept serving while one was replaced.
	assert.LessOrEqual(t, down.most, 1, "processes not answering at the same time (%d probes)", down.samples)
	// Not one request through nginx failed.
	require.Positive(t, sent)
	assert.Empty(t, failures, "of %d requests through nginx during the deploy", sent)
	t.Logf("deploy: %d processes in %s; %d requests through nginx meanwhile, %d failed; at most %d process(es) not answering at once over %d probes",
		len(rep.Steps), rep.Took.Round(100*time.Millisecond), sent, len(failures), down.most, down.samples)
	conf := readFile(t, filepath.Join(cs.DataDir, "nginx", "nginx.conf"))
	assert.NotContains(t, conf, " down;", "every apiserver is back in nginx")
	assert.NotContains(t, clusterOut.String(), "process died", "a deploy is not a crash")

	// The build it ran before was bin/dev-like (not a release): kept beside the new one.
	require.Equal(t, filepath.Join(releases, "running-before-new"), rep.Kept)
	for _, b := range []string{"apiserver", "worker"} {
		assert.True(t, sameFile(t, filepath.Join(binDir, b), filepath.Join(rep.Kept, b)), "%s is kept", b)
	}
	assert.Contains(t, out.String(), "roll back with: make deploy-cluster RELEASE=running-before-new")

	// A crash after the deploy is restarted from the new build.
	for _, n := range []string{"apiserver-1", "worker-2"} {
		pid := readPid(t, filepath.Join(cs.DataDir, "run", n+".pid"))
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		var restarted int
		require.Eventually(t, func() bool {
			restarted = pidIn(filepath.Join(cs.DataDir, "run", n+".pid"))
			return restarted != 0 && restarted != pid && probe(context.Background(), "http://"+addrOf(cs, n)+"/readyz")
		}, 60*time.Second, 200*time.Millisecond, "%s is restarted", n)
		assert.Equal(t, filepath.Join(release, binOf(n)), exe(t, restarted), "%s is restarted from the new build", n)
	}

	// A build whose worker does not start: the deploy stops at worker-1, which runs the
	// build it ran before again; nothing else was touched and no request failed.
	broken := filepath.Join(releases, "broken")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, copyExecutable(filepath.Join(binDir, "apiserver"), filepath.Join(broken, "apiserver")))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "worker"), []byte("#!/bin/sh\necho 'this build is broken' >&2\nexit 1\n"), 0o755))
	pids := map[string]int{}
	for _, n := range names {
		pids[n] = readPid(t, filepath.Join(cs.DataDir, "run", n+".pid"))
	}
	load = startTrickle(api, token)
	out = &syncbuf.Buffer{}
	rep, err = Deploy(context.Background(), cs.DataDir, DeployOptions{BinDir: broken}, out)
	sent, failures = load.stop()
	t.Logf("deploy to a broken build:\n%s", out.String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker-1")
	require.Len(t, rep.Steps, 1)
	assert.True(t, rep.Steps[0].Ready.IsZero())
	assert.Empty(t, rep.Kept, "the running build is a release already")
	w1 := readPid(t, filepath.Join(cs.DataDir, "run", "worker-1.pid"))
	assert.NotEqual(t, pids["worker-1"], w1)
	assert.Equal(t, filepath.Join(release, "worker"), exe(t, w1), "worker-1 runs the build it ran before")
	assert.True(t, probe(context.Background(), "http://"+addrOf(cs, "worker-1")+"/readyz"))
	for _, n := range names[1:] {
		assert.Equal(t, pids[n], readPid(t, filepath.Join(cs.DataDir, "run", n+".pid")), "%s was not touched", n)
	}
	assert.Empty(t, failures, "of %d requests through nginx during the failed deploy", sent)

	// Roll back: the same command, pointed at the kept build.
	kept := filepath.Join(releases, "running-before-new")
	load = startTrickle(api, token)
	out = &syncbuf.Buffer{}
	rep, err = Deploy(context.Background(), cs.DataDir, DeployOptions{BinDir: kept}, out)
	sent, failures = load.stop()
	require.NoError(t, err, out.String())
	for _, n := range names {
		pid := readPid(t, filepath.Join(cs.DataDir, "run", n+".pid"))
		assert.Equal(t, filepath.Join(kept, binOf(n)), exe(t, pid), "%s runs the kept build", n)
	}
	assert.Empty(t, failures, "of %d requests through nginx during the rollback", sent)
	t.Logf("rollback: %s; %d requests through nginx meanwhile, %d failed", rep.Took.Round(100*time.Millisecond), sent, len(failures))
	assert.Equal(t, firstBuild, rep.Build, "the kept binaries are the first build")
	assert.Equal(t, firstBuild, currentBuild(t, cs), "and it is current again")
}

// currentBuild is the worker deployment's current build on the cluster shape's Temporal.
func currentBuild(t *testing.T, cs ClusterSettings) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := temporalclient.Dial(ctx, cs.TemporalAddress, cs.TemporalNS, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer tc.Close()
	st, err := (&deployments.Admin{Client: tc, Namespace: cs.TemporalNS, Name: cs.DeploymentName}).Status(ctx)
	require.NoError(t, err)
	return st.Current
}

func TestSupervisorReplaceRunsTheNewBinaryFromThenOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, v := range []string{"old", "new"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, v), 0o755))
		bins[v] = filepath.Join(dir, v, "sleep")
		require.NoError(t, copyExecutable("/bin/sleep", bins[v]))
	}
	out := &syncbuf.Buffer{}
	sp := &supervisor{out: out, logger: slog.New(slog.NewTextHandler(out, nil)), pidDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer sp.stop(time.Second)
	sv, err := sp.start(ctx, child{name: "svc", bin: bins["old"], args: []string{"600"}}, nil)
	require.NoError(t, err)
	require.NoError(t, sv.waitHealthy(ctx, time.Minute))
	first := readPid(t, filepath.Join(dir, "svc.pid"))

	stopped, started, err := sv.replace(ctx, bins["new"], nil, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, first, pidOf(stopped))
	assert.True(t, exited(stopped), "the old process has exited when replace returns")
	assert.NotEqual(t, first, pidOf(started))
	assert.Equal(t, pidOf(started), readPid(t, filepath.Join(dir, "svc.pid")))
	assert.Equal(t, bins["new"], exe(t, pidOf(started)))
	assert.Equal(t, 0, sv.Restarts(), "a replacement is not a restart")
	assert.NotContains(t, out.String(), "process died")

	// A crash now is restarted from the new binary.
	require.NoError(t, syscall.Kill(pidOf(started), syscall.SIGKILL))
	var restarted int
	require.Eventually(t, func() bool {
		restarted = pidIn(filepath.Join(dir, "svc.pid"))
		return restarted != 0 && restarted != pidOf(started)
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, bins["new"], exe(t, restarted))
	assert.Equal(t, 1, sv.Restarts())

	sp.stop(time.Second)
	_, _, err = sv.replace(ctx, bins["old"], nil, time.Second)
	assert.ErrorContains(t, err, "stopping", "a stopped service is not started again")
}

func TestNginxConfigMarksAnApiserverDown(t *testing.T) {
	t.Parallel()
	cs := ClusterSettings{Settings: Settings{}, APIServers: []string{"127.0.0.1:9101", "127.0.0.1:9102"}}
	cs.DataDir, cs.APIAddr = t.TempDir(), "127.0.0.1:9100"
	repo := filepath.Join("..", "..", "..")
	dir, path, err := writeNginxConfig(cs, repo, []string{"127.0.0.1:9101"})
	require.NoError(t, err)
	conf := readFile(t, path)
	assert.Contains(t, conf, "server 127.0.0.1:9101 max_fails=1 fail_timeout=5s down;\n")
	assert.Contains(t, conf, "server 127.0.0.1:9102 max_fails=1 fail_timeout=5s;\n")
	if bin, err := findNginx(); err == nil {
		out, err := exec.Command(bin, append(nginxArgs(dir, path), "-t", "-q")...).CombinedOutput()
		assert.NoError(t, err, "nginx -t: %s", out)
	}

	_, path, err = writeNginxConfig(cs, repo, nil)
	require.NoError(t, err)
	assert.NotContains(t, readFile(t, path), "down")

	_, err = markDown(conf, "127.0.0.1:910")
	assert.ErrorContains(t, err, "no upstream server 127.0.0.1:910", "a prefix of an address is not that address")
}

func TestDeployNeedsARunningClusterAndABuild(t *testing.T) {
	t.Parallel()
	_, err := Deploy(context.Background(), t.TempDir(), DeployOptions{BinDir: t.TempDir()}, io.Discard)
	assert.ErrorContains(t, err, "make run-cluster")

	out := &syncbuf.Buffer{}
	r := &roller{sup: &supervisor{}, logger: slog.New(slog.NewTextHandler(out, nil))}
	empty := t.TempDir()
	_, err = r.deploy(context.Background(), DeployOptions{BinDir: empty}, func(string, ...any) {})
	assert.ErrorContains(t, err, filepath.Join(empty, "apiserver"))
	require.NoError(t, os.WriteFile(filepath.Join(empty, "apiserver"), []byte("not a program"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(empty, "worker"), []byte("not a program"), 0o644))
	_, err = r.deploy(context.Background(), DeployOptions{BinDir: empty}, func(string, ...any) {})
	assert.ErrorContains(t, err, "not an executable file")
}

// startClusterShape starts the cluster shape as `make run-cluster` does, on free ports and
// a test database, with small pools, and stops it when the test ends.
func startClusterShape(t *testing.T, binDir string) (ClusterSettings, *syncbuf.Buffer) {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	dropTemporalDatabases(t, dbURL)
	addrs := freeAddrs(t, 11)
	env := map[string]string{
		"DATABASE_URL": dbURL, "LOCKERNET_DATA_DIR": t.TempDir(), "TEMPORAL_ADDRESS": "",
		"LOCKERNET_API_ADDR": addrs[0], "LOCKERNET_TOWERSIM_ADDR": addrs[1],
		"LOCKERNET_GW1_ADDR": addrs[2], "LOCKERNET_GW1_SIM_ADDR": addrs[3], "LOCKERNET_GW2_ADDR": addrs[4], "LOCKERNET_GW2_SIM_ADDR": addrs[5],
		"LOCKERNET_APISERVER_ADDRS": addrs[6] + "," + addrs[7], "LOCKERNET_WORKER_ADDRS": addrs[8] + "," + addrs[9],
		"LOCKERNET_TEMPORAL_PORT": strconv.Itoa(freeTemporalPorts(t)), "LOCKERNET_TEMPORAL_UI_PORT": port(addrs[10]),
		"LOCKERNET_LOG_LEVEL": "warn",
		// Small pools: other test packages share the server's 100 connections meanwhile.
		// 4 × (3 + 1) + 2 × (4 + 1) + 2 × 3 + 2 = 34 at most.
		"LOCKERNET_TEMPORAL_SQL_MAX_CONNS": "3", "LOCKERNET_TEMPORAL_VIS_MAX_CONNS": "1",
		"LOCKERNET_APISERVER_DB_MAX_CONNS": "4", "LOCKERNET_WORKER_DB_MAX_CONNS": "3",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cs, err := LoadClusterSettings()
	require.NoError(t, err)
	cs.BinDir = binDir
	cs.RepoDir = filepath.Join("..", "..", "..")
	cs.SchemaDir = filepath.Join(goList(t, "-m", "-f", "{{.Dir}}", "go.temporal.io/server"), "schema", "postgresql", "v12")
	require.NoError(t, checkClusterPorts(cs))
	ready := make(chan struct{})
	cs.OnReady = func() { close(ready) }

	out := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = RunCluster(ctx, cs, slog.New(slog.NewTextHandler(out, nil)), out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("the cluster did not stop within 60 s of Ctrl-C")
		}
		if t.Failed() {
			t.Logf("cluster output (tail):\n%s", out.Tail(8000))
		}
	})
	select {
	case <-ready:
	case <-done:
		t.Fatalf("the cluster stopped during start-up: %v\n%s", runErr, out.Tail(8000))
	case <-time.After(4 * time.Minute):
		t.Fatalf("the cluster did not come up within 4 minutes\n%s", out.Tail(8000))
	}
	return cs, out
}

// trickle sends a steady stream of requests through nginx (one every 50 ms at most), as
// clients would: the liveness probe and an authenticated read, in turn.
type trickle struct {
	stopc, done chan struct{}
	mu          sync.Mutex
	sent        int
	failures    []string
}

func startTrickle(api, token string) *trickle {
	tr := &trickle{stopc: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	urls := []string{api + "/healthz", api + "/api/v1/locations/closest?lat=34.05&lon=-118.24"}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.stopc:
				return
			case <-time.After(50 * time.Millisecond):
			}
			u := urls[i%len(urls)]
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			failure := ""
			resp, err := client.Do(req)
			if err != nil {
				failure = err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failure = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
				}
			}
			tr.mu.Lock()
			tr.sent++
			if failure != "" {
				tr.failures = append(tr.failures, time.Now().Format("15:04:05.000")+" GET "+u+": "+failure)
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *trickle) stop() (sent int, failures []string) {
	close(tr.stopc)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.sent, tr.failures
}

// watch probes every apiserver and worker on its own address, over and over, and counts
// how many did not answer at the same time.
type watch struct {
	stopc, done   chan struct{}
	most, samples int
}

func startWatch(cs ClusterSettings) *watch {
	w := &watch{stopc: make(chan struct{}), done: make(chan struct{})}
	addrs := append(append([]string{}, cs.APIServers...), cs.Workers...)
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stopc:
				return
			case <-time.After(100 * time.Millisecond):
			}
			n := 0
			for _, a := range addrs {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if !probe200(ctx, "http://"+a+"/healthz") {
					n++
				}
				cancel()
			}
			w.samples++
			w.most = max(w.most, n)
		}
	}()
	return w
}

func (w *watch) stop() *watch {
	close(w.stopc)
	<-w.done
	return w
}

func probe200(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func binOf(name string) string { return strings.SplitN(name, "-", 2)[0] }

func addrOf(cs ClusterSettings, name string) string {
	i, _ := strconv.Atoi(strings.SplitN(name, "-", 2)[1])
	if binOf(name) == "apiserver" {
		return cs.APIServers[i-1]
	}
	return cs.Workers[i-1]
}

func exe(t *testing.T, pid int) string {
	t.Helper()
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	require.NoError(t, err)
	return p
}

func pidIn(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	require.NoError(t, err)
	y, err := os.ReadFile(b)
	require.NoError(t, err)
	return bytes.Equal(x, y)
}

// A folder of releases is its binaries' build, unless it is the running build a deploy kept:
// then it is the build those processes polled as (the stack's revision, say), so that a
// rollback returns to the build its pinned runs wait for.
func TestReleaseBuildIDOfAKeptBuildIsTheBuildItRan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, b := range []string{"apiserver", "worker"} {
		require.NoError(t, copyExecutable("/bin/sleep", filepath.Join(dir, b)))
	}
	hashed, err := releaseBuildID(dir)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(hashed, "exe-"), "a release is its binaries' hash: %s", hashed)

	require.NoError(t, os.WriteFile(filepath.Join(dir, keptBuildFile), []byte("8b63cb9e0a1f\n"), 0o644))
	kept, err := releaseBuildID(dir)
	require.NoError(t, err)
	assert.Equal(t, "8b63cb9e0a1f", kept)

	require.NoError(t, os.WriteFile(filepath.Join(dir, keptBuildFile), []byte("\n"), 0o644))
	_, err = releaseBuildID(dir)
	assert.ErrorContains(t, err, "holds no build id")
}
