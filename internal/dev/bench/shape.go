package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/seed"
)

// shape is one way of running the service that the bench measures.
type shape struct {
	key, title, describe string
	order                int // the report's order
}

var (
	runShape = shape{key: "run", order: 0, title: "`make run`",
		describe: "embedded Temporal server (SQLite, one history shard) in the dev stack process, one apiserver, one worker"}
	clusterShape = shape{key: "cluster", order: 1, title: "cluster shape (`make run-cluster`)",
		describe: "the official Temporal server on PostgreSQL (4 history shards) as its own process, two apiservers behind nginx, two workers"}
)

// shapeReport is what the scenarios measured on one shape.
type shapeReport struct {
	shape shape
	// err is why the shape could not be measured at all; failed the scenarios that failed.
	err    string
	failed map[string]string
	ran    []string
	// serverErrors are the 5xx answers each scenario got, by status code.
	serverErrors map[string]map[int]int
	// notes say how the shape was set up (the cluster's database, ports).
	notes []string

	idle, loaded map[string]float64
	search       *searchResult
	flow         *flowResult
	temporal     *bareResult
	expiry       *expiryResult
	windows      *windowsResult
	proxy        *proxyResult
	proxyRates   *proxyRatesResult
	tracing      *tracingResult
	webhooks     *webhookResult
	webhookRates *webhookRatesResult
	// temporalDelivery is the temporal scenario with each workflow started as a webhook
	// delivery is (the temporal-delivery scenario).
	temporalDelivery *bareResult
	// temporalFlow is the tower flow's shape in Temporal alone (the temporal-flow scenario).
	temporalFlow *bareResult
}

// clusterOptions place the cluster shape the bench starts.
type clusterOptions struct {
	database string
	dataDir  string
	portBase int
	binDir   string
	startup  time.Duration
	// temporalDynamicConfig is the Temporal server's dynamic config file (empty: the shape's own).
	temporalDynamicConfig string
}

func clusterFlags(fs *flag.FlagSet, o *clusterOptions) {
	fs.StringVar(&o.database, "cluster-db", "", "database of the cluster shape, kept between runs [<DATABASE_URL's database>_bench_cluster]; "+
		"Temporal's, <db>_temporal and <db>_temporal_visibility, are made afresh each run")
	fs.StringVar(&o.dataDir, "cluster-data-dir", "", "data dir of the cluster shape [$LOCKERNET_DATA_DIR/bench-cluster]")
	fs.IntVar(&o.portBase, "cluster-port-base", 27000, "the cluster shape listens on ports from here up to here + 280 (API at + 80, Temporal at + 233)")
	fs.StringVar(&o.binDir, "cluster-bin-dir", "bin/dev", "where devstack and the binaries it starts are (make dev-build temporal-build)")
	fs.DurationVar(&o.startup, "cluster-startup", 5*time.Minute, "how long the cluster shape may take to come up")
	fs.StringVar(&o.temporalDynamicConfig, "cluster-temporal-dynamic-config", "", "the cluster's Temporal server's dynamic config file "+
		"[docker/temporal/dynamicconfig/lockernet.yaml]; docker/temporal/dynamicconfig/stock.yaml is Temporal's own defaults")
}

// clusterStack is a cluster shape the bench started.
type clusterStack struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
	cfg  config.Config
	// metrics are the apiservers' and workers' Prometheus endpoints.
	metrics map[string]string
	notes   []string
}

// measureCluster starts the cluster shape, measures it and stops it.
func measureCluster(ctx context.Context, base config.Config, o options) *shapeReport {
	cl, err := startCluster(ctx, base, o.cluster)
	if err != nil {
		logf("cluster: %v", err)
		return &shapeReport{shape: clusterShape, err: err.Error()}
	}
	sr := measureShape(ctx, clusterShape, cl.cfg, cl.metrics, o)
	sr.notes = cl.notes
	if err := cl.stop(); err != nil {
		logf("cluster: %v", err)
		sr.notes = append(sr.notes, "Stopping it: "+err.Error()+".")
	}
	return sr
}

// startCluster runs `devstack -cluster` in a process group of its own, on its own database,
// data dir and ports, and waits until it answers through nginx.
func startCluster(ctx context.Context, base config.Config, o clusterOptions) (*clusterStack, error) {
	if o.portBase < 1024 || o.portBase+280 > 32767 {
		return nil, fmt.Errorf("-cluster-port-base %d: the shape needs ports %d..%d, within 1024..32767 (Temporal keeps its ports in a smallint)",
			o.portBase, o.portBase, o.portBase+280)
	}
	db := o.database
	if db == "" {
		db = databaseName(base.DatabaseURL) + "_bench_cluster"
	}
	dbURL, err := pgcluster.WithDatabase(base.DatabaseURL, db)
	if err != nil {
		return nil, err
	}
	// Kept between runs, like make run's: the bench data (100,000 search locations) is made once.
	if err := pgcluster.CreateDatabase(ctx, base.DatabaseURL, db); err != nil {
		return nil, fmt.Errorf("create the cluster shape's database: %w", err)
	}
	// Temporal's are not: an earlier run's workflows (tower holds, 10,000 expiring
	// reservations, bare workflows past the server's knee) would keep the server busy and be
	// measured as this run's. devstack creates them afresh with Temporal's schema tool.
	if err := dropDatabases(ctx, base.DatabaseURL, db+"_temporal", db+"_temporal_visibility"); err != nil {
		return nil, fmt.Errorf("drop the cluster shape's Temporal databases of an earlier run: %w", err)
	}
	dir := o.dataDir
	if dir == "" {
		dir = filepath.Join(base.DataDir, "bench-cluster")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	bin := filepath.Join(o.binDir, "devstack")
	for _, need := range []string{bin, filepath.Join(o.binDir, "temporal-server")} {
		if _, err := os.Stat(need); err != nil {
			return nil, fmt.Errorf("the cluster shape needs %s (make dev-build temporal-build): %w", need, err)
		}
	}
	p := func(off int) string { return "127.0.0.1:" + strconv.Itoa(o.portBase+off) }
	set := map[string]string{
		"DATABASE_URL": dbURL, "LOCKERNET_DATA_DIR": dir,
		"LOCKERNET_API_ADDR": p(80), "LOCKERNET_PUBLIC_URL": "http://" + p(80), "LOCKERNET_ADMIN_ADDR": p(90),
		"LOCKERNET_TOWERSIM_ADDR": p(70), "LOCKERNET_WORKER_ADDR": p(81),
		"LOCKERNET_GW1_ADDR": p(101), "LOCKERNET_GW1_SIM_ADDR": p(201), "LOCKERNET_GW2_ADDR": p(102), "LOCKERNET_GW2_SIM_ADDR": p(202),
		"LOCKERNET_APISERVER_ADDRS": p(91) + "," + p(92), "LOCKERNET_WORKER_ADDRS": p(81) + "," + p(82),
		"LOCKERNET_TEMPORAL_PORT": strconv.Itoa(o.portBase + 233), "LOCKERNET_TEMPORAL_UI_PORT": strconv.Itoa(o.portBase + 280),
		"LOCKERNET_LOG_LEVEL": "warn",
	}
	if o.temporalDynamicConfig != "" {
		set["LOCKERNET_TEMPORAL_DYNAMIC_CONFIG"] = o.temporalDynamicConfig
		logf("cluster: Temporal's dynamic config from %s", o.temporalDynamicConfig)
	}
	// The make run stack's own settings must not leak into the cluster: no Temporal address
	// (the shape starts its own server), no debug listener.
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; ours || k == "TEMPORAL_ADDRESS" || k == "LOCKERNET_DEBUG_ADDR" || strings.HasPrefix(k, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	logPath := filepath.Join(dir, "devstack.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-cluster")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	logf("cluster: starting %s -cluster on %s (database %s, data dir %s; log %s)", bin, p(80), db, dir, logPath)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	cl := &clusterStack{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(cl.done) }()

	cfg := base
	cfg.DatabaseURL, cfg.DataDir = dbURL, dir
	cfg.TemporalAddress, cfg.TemporalIsSet = p(233), true
	cfg.APIAddr, cfg.PublicURL, cfg.AdminAddr, cfg.WorkerAddr = p(80), "http://"+p(80), p(90), p(81)
	cl.cfg = cfg
	cl.metrics = map[string]string{
		"apiserver-1": "http://" + p(191) + "/metrics", "apiserver-2": "http://" + p(192) + "/metrics",
		"worker-1": "http://" + p(81) + "/metrics", "worker-2": "http://" + p(82) + "/metrics",
	}
	if err := cl.waitReady(ctx, o.startup); err != nil {
		_ = cl.stop()
		logf("cluster: the end of %s:\n%s", logPath, tail(logPath, 3000))
		return nil, fmt.Errorf("the cluster shape did not come up: %w (its log: %s)", err, logPath)
	}
	logf("cluster: up in %s", time.Since(t0).Round(100*time.Millisecond))
	cl.notes = append(cl.notes, fmt.Sprintf("Started by the bench as `bin/dev/devstack -cluster` on database `%s` (Temporal in `%s_temporal`), "+
		"nginx on %s, Temporal on %s; up in %s; stopped after its scenarios.", db, db, p(80), p(233), time.Since(t0).Round(100*time.Millisecond)))
	if o.temporalDynamicConfig != "" {
		cl.notes = append(cl.notes, fmt.Sprintf("Temporal's dynamic config: `%s` (not the shape's own).", o.temporalDynamicConfig))
	}
	return cl, nil
}

// waitReady waits until the credentials name nginx and nginx's /readyz answers 200.
func (cl *clusterStack) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if creds, err := seed.ReadCredentials(filepath.Join(cl.cfg.DataDir, seed.CredentialsFile)); err == nil && creds != nil &&
			creds.APIURL == cl.cfg.PublicURL {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cl.cfg.PublicURL+"/readyz", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		select {
		case <-cl.done:
			return fmt.Errorf("devstack exited during start-up")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", limit)
		}
	}
}

// stop sends SIGINT to the shape's process group (Ctrl-C, which stops every child cleanly)
// and waits; SIGKILL to the group if it has not stopped within a minute.
func (cl *clusterStack) stop() error {
	pgid := cl.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case <-cl.done:
		return nil
	case <-time.After(time.Minute):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-cl.done
		return fmt.Errorf("the cluster shape did not stop within a minute of SIGINT; killed it")
	}
}

// databaseName is the database a connection string names.
func databaseName(databaseURL string) string {
	if u, err := url.Parse(databaseURL); err == nil && strings.Trim(u.Path, "/") != "" {
		return strings.Trim(u.Path, "/")
	}
	return "lockernet"
}

// tail is the last n bytes of a file, for an error message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// dropDatabases drops the named databases, if they exist, on the server of adminURL.
func dropDatabases(ctx context.Context, adminURL string, names ...string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, n := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return nil
}
