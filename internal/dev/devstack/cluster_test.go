package devstack

import (
	"bytes"
	"context"
	"encoding/json"
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
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
)

func TestNginxConfigIsComposesWithThisMachinesAddresses(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join("..", "..", "..", "docker", "nginx.conf"))
	require.NoError(t, err)
	conf, err := nginxConfig(string(compose), []string{"127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"}, "127.0.0.1:9100", "/data/nginx", false)
	require.NoError(t, err)

	assert.Contains(t, conf, "server 127.0.0.1:9101 max_fails=1 fail_timeout=5s;\n        server 127.0.0.1:9102 max_fails=1 fail_timeout=5s;\n        server 127.0.0.1:9103 max_fails=1 fail_timeout=5s;\n")
	assert.NotContains(t, conf, "apiserver-1:", "container names do not resolve here")
	assert.Contains(t, conf, "listen 127.0.0.1:9100;")
	assert.Contains(t, conf, "pid /data/nginx/nginx.pid;")
	assert.Contains(t, conf, "proxy_temp_path /data/nginx/tmp/proxy;")
	assert.NotContains(t, conf, "user root;")
	// Every proxy setting is compose's own.
	for _, line := range []string{"proxy_next_upstream error timeout;", "proxy_read_timeout 75s;", "proxy_buffering off;", "client_max_body_size 1m;", "keepalive 32;",
		// The client's address reaches the apiservers (on loopback, trusted by default).
		"proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;", "proxy_set_header X-Real-IP $remote_addr;"} {
		assert.Contains(t, conf, line)
	}

	_, err = nginxConfig("events {}\nhttp {\n}\n", []string{"127.0.0.1:9101"}, "127.0.0.1:9100", "/d", false)
	assert.ErrorContains(t, err, "upstream", "a proxy file without the upstream lines is an error, not a proxy to nowhere")
}

func TestDefaultPoolsFitThisMachinesPostgres(t *testing.T) {
	for _, name := range []string{"LOCKERNET_APISERVER_ADDRS", "LOCKERNET_WORKER_ADDRS", "LOCKERNET_TEMPORAL_SQL_MAX_CONNS",
		"LOCKERNET_TEMPORAL_VIS_MAX_CONNS", "LOCKERNET_APISERVER_DB_MAX_CONNS", "LOCKERNET_WORKER_DB_MAX_CONNS", "TEMPORAL_ADDRESS"} {
		t.Setenv(name, "")
	}
	cs, err := LoadClusterSettings()
	require.NoError(t, err)
	assert.Len(t, cs.APIServers, 2)
	assert.Len(t, cs.Workers, 2)
	assert.Equal(t, 4, cs.TemporalShards)
	// docs/scaling.md: 4 × (6 + 2) + 2 × (12 + 1) + 2 × 8 + 2 = 76, under 100 less 3 reserved.
	assert.Equal(t, 76, cs.Pools.Total(len(cs.APIServers), len(cs.Workers), true))
	assert.Equal(t, 44, cs.Pools.Total(len(cs.APIServers), len(cs.Workers), false), "an existing Temporal cluster brings its own budget")

	t.Setenv("LOCKERNET_WORKER_DB_MAX_CONNS", "0")
	_, err = LoadClusterSettings()
	assert.ErrorContains(t, err, "LOCKERNET_WORKER_DB_MAX_CONNS")
}

func TestBusyClusterPortNamesItsSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().String()
	ports := freeAddrs(t, 9)
	for i, name := range []string{"LOCKERNET_API_ADDR", "LOCKERNET_TOWERSIM_ADDR", "LOCKERNET_GW1_ADDR", "LOCKERNET_GW1_SIM_ADDR",
		"LOCKERNET_GW2_ADDR", "LOCKERNET_GW2_SIM_ADDR"} {
		t.Setenv(name, ports[i])
	}
	t.Setenv("TEMPORAL_ADDRESS", "temporal.internal:7233") // an external cluster: no Temporal ports here
	t.Setenv("LOCKERNET_WORKER_ADDRS", ports[6]+","+ports[7])
	t.Setenv("LOCKERNET_APISERVER_ADDRS", ports[8]+","+busy)
	cs, err := LoadClusterSettings()
	require.NoError(t, err)
	err = checkClusterPorts(cs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), busy)
	assert.Contains(t, err.Error(), "LOCKERNET_APISERVER_ADDRS")
}

// TestClusterShape starts the production shape as `make run-cluster` does, runs a tower
// flow through nginx, kills one apiserver and sees the supervisor restart it while the other
// keeps answering.
func TestClusterShape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal server, nginx and every service")
	}
	if _, err := findNginx(); err != nil {
		t.Skip(err)
	}
	cs, out := startClusterShape(t, buildClusterBinaries(t))
	dbURL := os.Getenv("DATABASE_URL") // the test database startClusterShape made
	creds, err := seed.ReadCredentials(filepath.Join(cs.DataDir, seed.CredentialsFile))
	require.NoError(t, err)
	api := "http://" + cs.APIAddr
	require.Equal(t, api, creds.APIURL, "the credentials name nginx, the one public address")

	// A reservation, a drop-off token and the door opened at the simulated tower: through
	// nginx to both apiservers, Temporal on Postgres and a worker.
	token := clientToken(t, api, *creds)
	tower := creds.Towers[0].ID
	lockers := do(t, http.MethodGet, api+"/api/v1/towers/"+tower+"/lockers", token, nil)
	require.Equal(t, http.StatusOK, lockers.status, lockers.body)
	var ls []struct{ ID int64 }
	require.NoError(t, json.Unmarshal([]byte(lockers.body), &ls))
	require.GreaterOrEqual(t, len(ls), 3)
	lockerPath := fmt.Sprintf("%s/api/v1/towers/%s/lockers/%d/", api, tower, ls[0].ID)
	res := do(t, http.MethodPost, lockerPath+"reservations", token, map[string]any{"duration": 300})
	require.Equal(t, http.StatusCreated, res.status, res.body)
	drop := do(t, http.MethodPost, lockerPath+"dropoff-locker-tokens", token, map[string]any{"duration": 120, "client_info": "cluster test"})
	require.Equal(t, http.StatusCreated, drop.status, drop.body)
	var tok struct {
		Payload     string `json:"payload"`
		PayloadAuth string `json:"payload_auth"`
	}
	require.NoError(t, json.Unmarshal([]byte(drop.body), &tok))
	require.NotEmpty(t, tok.Payload)
	open := do(t, http.MethodPost, creds.TowerSimURL+"/sim/towers/"+tower+"/open", "",
		map[string]any{"payload": tok.Payload, "payload_auth": tok.PayloadAuth, "close_with_item": true})
	require.Equal(t, http.StatusOK, open.status, open.body)
	assert.Contains(t, open.body, `"opened":true`)

	var workflows int
	temporalURL, err := pgcluster.WithDatabase(dbURL, dbName(t, dbURL)+"_temporal")
	require.NoError(t, err)
	queryOne(t, temporalURL, `SELECT count(*) FROM executions`, &workflows)
	assert.GreaterOrEqual(t, workflows, 2, "the reservation's and the token's workflows are in <db>_temporal")

	// Kill apiserver-1: nginx sends every request to apiserver-2 meanwhile, and the
	// supervisor starts apiserver-1 again.
	pidFile := filepath.Join(cs.DataDir, "run", "apiserver-1.pid")
	pid := readPid(t, pidFile)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	var statuses []int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		statuses = append(statuses, do(t, http.MethodGet, api+"/api/v1/towers/"+tower+"/lockers", token, nil).status)
		time.Sleep(50 * time.Millisecond)
	}
	for i, s := range statuses {
		assert.Equal(t, http.StatusOK, s, "request %d of %d after the kill", i+1, len(statuses))
	}
	require.Eventually(t, func() bool {
		p, err := os.ReadFile(pidFile)
		if err != nil || strings.TrimSpace(string(p)) == strconv.Itoa(pid) {
			return false
		}
		return probe(context.Background(), "http://"+cs.APIServers[0]+"/healthz")
	}, 30*time.Second, 200*time.Millisecond, "apiserver-1 is restarted and answers on its own address")
	assert.Contains(t, out.String(), "name=apiserver-1", "the supervisor says which child died")
	assert.Contains(t, out.String(), `err="signal: killed"`)

	// Both answer again: a new hold on another locker goes through.
	res = do(t, http.MethodPost, fmt.Sprintf("%s/api/v1/towers/%s/lockers/%d/reservations", api, tower, ls[1].ID), token, map[string]any{"duration": 60})
	assert.Equal(t, http.StatusCreated, res.status, res.body)

	// Kill the Temporal server: a hold made while it is down is answered (the outbox keeps
	// the workflow start), and its workflow starts once the supervisor has restarted it.
	temporalPid := readPid(t, filepath.Join(cs.DataDir, "run", "temporal.pid"))
	require.NoError(t, syscall.Kill(temporalPid, syscall.SIGKILL))
	res = do(t, http.MethodPost, fmt.Sprintf("%s/api/v1/towers/%s/lockers/%d/reservations", api, tower, ls[2].ID), token, map[string]any{"duration": 60})
	require.Equal(t, http.StatusCreated, res.status, res.body)
	var hold struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(res.body), &hold))
	require.Eventually(t, func() bool {
		var n int
		queryOne(t, temporalURL, fmt.Sprintf(`SELECT count(*) FROM current_executions WHERE workflow_id = 'reservation/%s'`, hold.ID), &n)
		return n == 1
	}, 60*time.Second, 500*time.Millisecond, "the hold's workflow starts on the restarted Temporal server")
	assert.NotEqual(t, strconv.Itoa(temporalPid), strings.TrimSpace(readFile(t, filepath.Join(cs.DataDir, "run", "temporal.pid"))))

	// The whole shape holds no more connections than its budget.
	var conns int
	db := dbName(t, dbURL)
	queryOne(t, testenv.AdminURL(t), fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()
		AND datname IN ('%s', '%s_temporal', '%s_temporal_visibility')`, db, db, db), &conns)
	assert.LessOrEqual(t, conns, cs.Pools.Total(len(cs.APIServers), len(cs.Workers), true))
	t.Logf("connections of the shape: %d (budget %d)", conns, cs.Pools.Total(len(cs.APIServers), len(cs.Workers), true))
}

type response struct {
	status int
	body   string
}

func do(t *testing.T, method, url, token string, body any) response {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{status: 0, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b)}
}

func clientToken(t *testing.T, api string, c seed.Credentials) string {
	t.Helper()
	return testenv.ClientToken(t, api+"/oauth/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"service_provider"}},
		func(req *http.Request) { req.SetBasicAuth(c.ServiceProvider.ClientID, c.ServiceProvider.ClientSecret) })
}

// buildClusterBinaries builds what make dev-build and make temporal-build put in bin/dev
// (the build cache makes it quick after the first time).
func buildClusterBinaries(t *testing.T) string {
	return buildBinaries(t, true)
}

// buildBinaries builds the children of make run's shape into a directory of their own, and
// with temporal the Temporal server and its SQL tool as well.
func buildBinaries(t *testing.T, temporal bool) string {
	t.Helper()
	dir := t.TempDir()
	builds := [][]string{
		{"build", "-o", dir + "/", "./cmd/apiserver", "./cmd/worker", "./cmd/towersim"},
		{"build", "-tags", "simcontrol", "-o", filepath.Join(dir, "gateway"), "./cmd/gateway"},
	}
	if temporal {
		builds = append(builds,
			[]string{"build", "-o", filepath.Join(dir, "temporal-server"), "go.temporal.io/server/cmd/server"},
			[]string{"build", "-o", filepath.Join(dir, "temporal-sql-tool"), "go.temporal.io/server/cmd/tools/sql"})
	}
	for _, args := range builds {
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join("..", "..", "..")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
	}
	return dir
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	return cfg.Database
}

// dropTemporalDatabases removes <db>_temporal and <db>_temporal_visibility when the test ends.
func dropTemporalDatabases(t *testing.T, dbURL string) {
	name := dbName(t, dbURL)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testenv.AdminURL(t))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		for _, db := range []string{name + "_temporal", name + "_temporal_visibility"} {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
		}
	})
}

func queryOne(t *testing.T, url, sql string, dst any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(dst))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}

// freeAddrs returns n free 127.0.0.1 addresses whose port + 100 is free too (FreeAddrPairs).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	out, err := FreeAddrPairs(n)
	require.NoError(t, err)
	return out
}

// freeTemporalPorts finds a free block of ports for the Temporal server (FreeTemporalPorts).
func freeTemporalPorts(t *testing.T) int {
	t.Helper()
	p, err := FreeTemporalPorts()
	require.NoError(t, err)
	return p
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func TestSupervisorRestartsADeadChildUntilStopped(t *testing.T) {
	dir := t.TempDir()
	out := &syncbuf.Buffer{}
	// The child dies at once, every time, as a crashing process would.
	sv := &service{child: child{name: "crasher", args: []string{"-c", "exit 3"}}, bin: "/bin/sh",
		out: out, logger: slog.New(slog.NewTextHandler(out, nil)), pidDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sv.supervise(ctx)
	require.NoError(t, sv.waitStarted())
	require.Eventually(t, func() bool { return sv.Restarts() >= 2 }, 10*time.Second, 50*time.Millisecond,
		"restarted after 1 s, then after 2 s")
	assert.Contains(t, out.String(), "name=crasher")
	assert.Contains(t, out.String(), `err="exit status 3"`)
	assert.FileExists(t, filepath.Join(dir, "crasher.pid"))

	sv.stop(time.Second)
	n := sv.Restarts()
	time.Sleep(2500 * time.Millisecond)
	assert.Equal(t, n, sv.Restarts(), "no restart after stop")
	assert.NoFileExists(t, filepath.Join(dir, "crasher.pid"))
}

// Both shapes keep their children under one supervisor: a killed child is restarted while
// its sibling keeps its process, and stop ends both and removes their pid files.
func TestSupervisorRestartsOnlyTheChildThatDied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := &syncbuf.Buffer{}
	sp := &supervisor{out: out, logger: slog.New(slog.NewTextHandler(out, nil)), pidDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, name := range []string{"steady", "victim"} {
		sv, err := sp.start(ctx, child{name: name, bin: "/bin/sleep", args: []string{"600"}}, []string{"LOCKERNET_X=1"})
		require.NoError(t, err)
		require.NoError(t, sv.waitHealthy(ctx, time.Minute))
	}
	steady := readPid(t, filepath.Join(dir, "steady.pid"))
	victim := readPid(t, filepath.Join(dir, "victim.pid"))

	require.NoError(t, syscall.Kill(victim, syscall.SIGKILL))
	var restarted int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "victim.pid"))
		if err != nil {
			return false
		}
		restarted, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return restarted != 0 && restarted != victim && syscall.Kill(restarted, 0) == nil
	}, 10*time.Second, 50*time.Millisecond, "the victim runs again")
	assert.Equal(t, steady, readPid(t, filepath.Join(dir, "steady.pid")), "the sibling kept its process")
	assert.NoError(t, syscall.Kill(steady, 0))
	assert.Contains(t, out.String(), "name=victim")
	assert.Contains(t, out.String(), `err="signal: killed"`)
	assert.Contains(t, out.String(), "restarts=1")
	assert.NotContains(t, out.String(), "name=steady")

	sp.stop(time.Second)
	for _, pid := range []int{steady, restarted} {
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "stopped")
	}
	assert.NoFileExists(t, filepath.Join(dir, "steady.pid"))
	assert.NoFileExists(t, filepath.Join(dir, "victim.pid"))
}

// A dynamic config file that is not there is refused before anything is created, naming its
// setting.
func TestMissingTemporalDynamicConfigNamesItsSetting(t *testing.T) {
	t.Parallel()
	cs := ClusterSettings{TemporalDynamicConfig: filepath.Join(t.TempDir(), "no-such.yaml")}
	_, err := temporalChild(context.Background(), cs, "postgres://postgres@127.0.0.1:5432/lockernet_x", t.TempDir(), t.TempDir(), slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LOCKERNET_TEMPORAL_DYNAMIC_CONFIG")
}
