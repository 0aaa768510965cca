package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/dev/devtemporal"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

func RunCluster(ctx context.Context, cs ClusterSettings, logger *slog.Logger, out io.Writer) error {
	started := time.Now()
	s := cs.Settings
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := checkClusterPorts(cs); err != nil {
		return err
	}
	binDir, err := binDirOr(s.BinDir)
	if err != nil {
		return err
	}
	repo, err := repoDir(cs.RepoDir, binDir)
	if err != nil {
		return err
	}
	nginxBin, err := findNginx()
	if err != nil {
		return err
	}
	// pprof and the admin listeners have one address per process, set below.
	if err := os.Unsetenv("LOCKERNET_DEBUG_ADDR"); err != nil {
		return err
	}

	k, err := prepare(ctx, s, logger)
	if err != nil {
		return err
	}
	defer k.close(ctx, logger)
	if err := checkBudget(ctx, k, cs, logger); err != nil {
		return err
	}

	runDir := filepath.Join(s.DataDir, "run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	sup := &supervisor{binDir: binDir, out: out, logger: logger, pidDir: runDir}
	defer sup.stop(10 * time.Second)
	launch := func(c child, timeout time.Duration) error { return sup.launch(ctx, c, k.env, timeout) }

	uiURL := ""
	if !cs.TemporalIsSet {
		tc, err := temporalChild(ctx, cs, k.dbURL, binDir, repo, logger)
		if err != nil {
			return err
		}
		if err := launch(tc, 2*time.Minute); err != nil {
			return err
		}
		host, _, _ := splitHostPort(s.TemporalAddress)
		ui := devtemporal.StartUI(host, s.TemporalUIPort, s.TemporalAddress, s.TemporalNS)
		defer ui.Stop()
		uiURL = fmt.Sprintf("http://%s:%d", host, s.TemporalUIPort)
	}
	k.env = append(k.env, "TEMPORAL_ADDRESS="+s.TemporalAddress)
	// Every apiserver's and worker's workers poll as this build; once they do, it is made current.
	build := ""
	if stackVersioning() {
		if build, err = stackBuildID(s, binDir); err != nil {
			return err
		}
		k.env = append(k.env, versioningEnv(s, build)...)
	}
	if err := temporalNamespace(ctx, s, logger); err != nil {
		return err
	}
	if err := k.writeFiles("http://"+s.APIAddr, uiURL); err != nil {
		return err
	}

	// The service processes.
	for _, c := range serviceChildren(cs) {
		if err := launch(c, 90*time.Second); err != nil {
			return err
		}
	}
	if build != "" {
		if err := promoteBuild(ctx, s, s.TemporalAddress, build, logger); err != nil {
			return err
		}
	}
	nc, err := nginxChild(cs, repo, nginxBin)
	if err != nil {
		return err
	}
	if err := launch(nc, 30*time.Second); err != nil {
		return err
	}
	for _, c := range simChildren(s) {
		if err := launch(c, 90*time.Second); err != nil {
			return err
		}
	}

	// `make deploy-cluster` rolls the workers and apiservers to a new build (deploy.go).
	serveControl(ctx, &roller{ctx: ctx, cs: cs, repo: repo, nginxBin: nginxBin, sup: sup, logger: logger, build: build}, runDir)

	printClusterSummary(out, cs, k, uiURL, time.Since(started))
	if cs.OnReady != nil {
		cs.OnReady()
	}
	<-ctx.Done()
	fmt.Fprintln(out, "\nstopping the Locker Network Service...")
	return nil
}

// serviceChildren are the cluster's apiservers and workers: the migrations ran before (compose's
// migrate step), so they skip them; each has its own pool size, health and admin addresses.
func serviceChildren(cs ClusterSettings) []child {
	s := cs.Settings
	var children []child
	for i, a := range cs.APIServers {
		children = append(children, child{name: fmt.Sprintf("apiserver-%d", i+1), bin: "apiserver",
			env: []string{"LOCKERNET_API_ADDR=" + a, "LOCKERNET_PUBLIC_URL=" + s.PublicURL, "LOCKERNET_AUTO_MIGRATE=false",
				"LOCKERNET_API_GATEWAY_WORKER=true", "LOCKERNET_API_WORKER=true", "LOCKERNET_DB_MAX_CONNS=" + strconv.Itoa(cs.Pools.APIServer),
				"LOCKERNET_ADMIN_ADDR=" + adminAddr(a)},
			health: "http://" + a + "/healthz"})
	}
	for i, a := range cs.Workers {
		children = append(children, child{name: fmt.Sprintf("worker-%d", i+1), bin: "worker",
			env: []string{"LOCKERNET_WORKER_ADDR=" + a, "LOCKERNET_DB_MAX_CONNS=" + strconv.Itoa(cs.Pools.Worker),
				"LOCKERNET_ADMIN_ADDR=" + adminAddr(a)},
			health: "http://" + a + "/healthz"})
	}
	return children
}

// temporalChild prepares the Temporal server: its two databases and their schema (the
// compose file's script, with the tool and schema files of the pinned server version), then
// the official server with the embedded configuration template the temporalio/server image
// uses, set through the same variables compose sets.
func temporalChild(ctx context.Context, cs ClusterSettings, dbURL, binDir, repo string, logger *slog.Logger) (child, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return child{}, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	if host == "" || db == "" {
		return child{}, fmt.Errorf("DATABASE_URL needs a host and a database name for Temporal's databases")
	}
	// Checked before anything is created: a wrong path names its setting at once.
	dynamicConfig := cs.TemporalDynamicConfig
	if dynamicConfig == "" {
		dynamicConfig = filepath.Join(repo, "docker", "temporal", "dynamicconfig", "lockernet.yaml")
	}
	if dynamicConfig, err = filepath.Abs(dynamicConfig); err != nil {
		return child{}, err
	}
	if _, err := os.Stat(dynamicConfig); err != nil {
		return child{}, fmt.Errorf("LOCKERNET_TEMPORAL_DYNAMIC_CONFIG: %w", err)
	}
	user := u.User.Username()
	password, _ := u.User.Password()
	schemaDir := cs.SchemaDir
	if schemaDir == "" {
		schemaDir = filepath.Join(binDir, "temporal-schema", "postgresql", "v12")
	}
	tool, err := binary(binDir, "temporal-sql-tool")
	if err != nil {
		return child{}, err
	}
	server, err := binary(binDir, "temporal-server")
	if err != nil {
		return child{}, err
	}
	logPath := filepath.Join(cs.DataDir, "temporal-schema.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return child{}, fmt.Errorf("create %s: %w", logPath, err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(repo, "docker", "temporal", "setup-schema.sh"))
	cmd.Env = append(os.Environ(), "TEMPORAL_SQL_TOOL="+tool, "TEMPORAL_SCHEMA_DIR="+schemaDir,
		"SQL_HOST="+host, "SQL_PORT="+port, "SQL_USER="+user, "SQL_PASSWORD="+password,
		"TEMPORAL_DB="+db+"_temporal", "TEMPORAL_VISIBILITY_DB="+db+"_temporal_visibility")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return child{}, fmt.Errorf("create Temporal's schema (docker/temporal/setup-schema.sh; its output is in %s): %w", logPath, err)
	}
	logger.Info("temporal schema ready", "databases", db+"_temporal, "+db+"_temporal_visibility", "took", time.Since(t0).Round(time.Millisecond))

	bind, fport, _ := splitHostPort(cs.TemporalAddress)
	tp := newTemporalPorts(fport)
	itoa := strconv.Itoa
	return child{name: "temporal", bin: server, args: []string{"--allow-no-auth", "start"},
		env: []string{
			"DB=postgres12", "POSTGRES_SEEDS=" + host, "DB_PORT=" + port, "POSTGRES_USER=" + user, "POSTGRES_PWD=" + password,
			"DBNAME=" + db + "_temporal", "VISIBILITY_DBNAME=" + db + "_temporal_visibility",
			"NUM_HISTORY_SHARDS=" + itoa(cs.TemporalShards),
			"SQL_MAX_CONNS=" + itoa(cs.Pools.TemporalSQL), "SQL_MAX_IDLE_CONNS=" + itoa(cs.Pools.TemporalSQL),
			"SQL_VIS_MAX_CONNS=" + itoa(cs.Pools.TemporalVisibility), "SQL_VIS_MAX_IDLE_CONNS=" + itoa(cs.Pools.TemporalVisibility),
			"BIND_ON_IP=" + bind, "FRONTEND_GRPC_PORT=" + itoa(tp.frontend), "FRONTEND_HTTP_PORT=" + itoa(tp.h),
			"HISTORY_GRPC_PORT=" + itoa(tp.history), "MATCHING_GRPC_PORT=" + itoa(tp.matching), "WORKER_GRPC_PORT=" + itoa(tp.worker),
			"FRONTEND_MEMBERSHIP_PORT=" + itoa(tp.mFrontend), "HISTORY_MEMBERSHIP_PORT=" + itoa(tp.mHistory),
			"MATCHING_MEMBERSHIP_PORT=" + itoa(tp.mMatching), "WORKER_MEMBERSHIP_PORT=" + itoa(tp.mWorker),
			"DYNAMIC_CONFIG_FILE_PATH=" + dynamicConfig,
			"LOG_LEVEL=warn",
		},
		health:  fmt.Sprintf("http://%s/api/v1/system-info", net.JoinHostPort(bind, itoa(tp.h))),
		logFile: filepath.Join(cs.DataDir, "temporal.log")}, nil
}

// temporalNamespace registers the namespace (compose's create-namespace step) and the
// workflows' search attributes (compose's `migrate -temporal`).
func temporalNamespace(ctx context.Context, s Settings, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tc, err := temporalclient.Dial(ctx, s.TemporalAddress, s.TemporalNS, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := temporalclient.EnsureNamespace(ctx, tc, s.TemporalNS, 72*time.Hour); err != nil {
		return err
	}
	return temporalclient.EnsureSearchAttributes(ctx, tc, s.TemporalNS)
}

// checkBudget refuses to start a shape whose pools could exhaust Postgres: the sum of the
// pools must fit in max_connections less the superuser reserve.
func checkBudget(ctx context.Context, k *prepared, cs ClusterSettings, logger *slog.Logger) error {
	var maxConns, reserved int
	err := k.st.Pool().QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int`).
		Scan(&maxConns, &reserved)
	if err != nil {
		return fmt.Errorf("read max_connections: %w", err)
	}
	total := cs.Pools.Total(len(cs.APIServers), len(cs.Workers), !cs.TemporalIsSet)
	if total > maxConns-reserved {
		return fmt.Errorf("connection budget: the pools add up to %d connections, Postgres allows %d (max_connections %d less %d reserved); "+
			"lower LOCKERNET_APISERVER_DB_MAX_CONNS, LOCKERNET_WORKER_DB_MAX_CONNS or LOCKERNET_TEMPORAL_SQL_MAX_CONNS (docs/scaling.md)",
			total, maxConns-reserved, maxConns, reserved)
	}
	logger.Info("connection budget", "pools_total", total, "max_connections", maxConns, "reserved", reserved)
	return nil
}

// repoDir finds the checkout holding docker/: the setting, else the one bin/dev was built
// in (bin/dev/../..), else the working directory.
func repoDir(setting, binDir string) (string, error) {
	candidates := []string{setting}
	if setting == "" {
		wd, _ := os.Getwd()
		candidates = []string{filepath.Join(binDir, "..", ".."), wd}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "docker", "compose.yaml")); err == nil {
			return filepath.Abs(c)
		}
	}
	return "", fmt.Errorf("docker/compose.yaml not found in %v (set LOCKERNET_REPO_DIR to the checkout)", candidates)
}

func findNginx() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found: install it (Debian/Ubuntu: apt-get install -y nginx) to run the cluster shape")
}

func printClusterSummary(out io.Writer, cs ClusterSettings, k *prepared, uiURL string, took time.Duration) {
	c := k.creds
	fmt.Fprintf(out, `
Locker Network Service (cluster shape) is up (%s).

  API (nginx)      %s   (OpenAPI docs: %s/docs)
  apiservers       %s
  workers          %s (health: /readyz)
  Temporal         %s; Web UI %s
  Tower simulator  %s
  Gateways         %s (sim %s), %s (sim %s)
  Postgres pools   at most %d connections (docs/scaling.md)
  Credentials      %s
  Data dir         %s (Temporal's log in temporal.log, nginx's in nginx/, pids in run/)

Get a token:
  curl -s -u %s:%s -d grant_type=client_credentials %s/oauth/token

A crashed apiserver, worker, nginx, Temporal server, gateway or simulator is restarted.
Roll the workers and apiservers to a new build, one at a time: make deploy-cluster.
Press Ctrl-C to stop.
`, took.Round(100*time.Millisecond), c.APIURL, c.APIURL, strings.Join(cs.APIServers, ", "), strings.Join(cs.Workers, ", "),
		temporalSummary(cs), orNone(uiURL, cs.TemporalAddress), c.TowerSimURL,
		c.Gateways[0].URL, c.Gateways[0].SimURL, c.Gateways[1].URL, c.Gateways[1].SimURL,
		cs.Pools.Total(len(cs.APIServers), len(cs.Workers), !cs.TemporalIsSet),
		k.credsPath, cs.DataDir, c.ServiceProvider.ClientID, c.ServiceProvider.ClientSecret, c.APIURL)
}

func temporalSummary(cs ClusterSettings) string {
	if cs.TemporalIsSet {
		return cs.TemporalAddress + " (an existing cluster)"
	}
	return fmt.Sprintf("%s, %d history shards, on Postgres", cs.TemporalAddress, cs.TemporalShards)
}
