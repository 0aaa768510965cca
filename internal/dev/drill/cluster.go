package drill

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/internal/dev/devstack"
	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

// clusterStack is the cluster shape of a drill's system: `bin/dev/devstack -cluster` (make
// run-cluster) on the drill's private PostgreSQL cluster, its data dir and free ports. The
// dev stack runs the official Temporal server on Postgres, two apiservers and two workers
// behind nginx, the simulated gateways and the tower simulator, and its supervisor restarts
// whichever of them dies; the drills kill them by the pids it records in <data dir>/run.
type clusterStack struct {
	stack        *proc // the dev stack itself
	dataDir      string
	temporalPort int
	temporalDB   string            // URL of Temporal's database <db>_temporal
	health       map[string]string // service name → URL answering below 500 once it is ready
}

// clusterServices are the dev stack's supervised children, by the names it gives them.
var clusterServices = []string{"temporal", "apiserver-1", "apiserver-2", "worker-1", "worker-2", "nginx", "gw-0001", "gw-0002", "towersim"}

// clusterSettings are what the cluster drills report as changed from make run-cluster's
// defaults, besides baseSettings.
var clusterSettings = []string{
	"Everything `make run-cluster` reads from the environment is set for a system of the drill's own: `DATABASE_URL` " +
		"(the private cluster), `LOCKERNET_DATA_DIR` (a temporary directory), every address and port (free ones), and " +
		"`LOCKERNET_GW1_LAYOUT`/`LOCKERNET_GW2_LAYOUT` (gateways with a locker for every open of the drills). Shards (4), " +
		"pool sizes, nginx's configuration (docker/nginx.conf) and the supervisor's back-off are the defaults.",
}

// newClusterSystem starts the cluster shape on a private Postgres and returns once the dev
// stack says it is up.
func newClusterSystem(ctx context.Context, o options) (sys *system, err error) {
	s := &system{opts: systemOptions{binDir: o.binDir, lockersPerGateway: o.clusterLockers, keep: o.keep}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.startPrivatePostgres(ctx, "lockernet-drill-cluster-"); err != nil {
		return nil, err
	}
	bins, err := findBinaries(o.binDir)
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"devstack", "towersim", "temporal-server", "temporal-sql-tool"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			return nil, fmt.Errorf("the cluster drills need %s in %s (make dev-build temporal-build)", b, bins)
		}
	}

	// Addresses: nginx (the API), the tower simulator, the gateways and their simulator
	// controls, and the apiservers and workers, whose admin listeners are at port + 100.
	addrs, err := devstack.FreeAddrPairs(11)
	if err != nil {
		return nil, err
	}
	tport, err := devstack.FreeTemporalPorts()
	if err != nil {
		return nil, err
	}
	c := &clusterStack{dataDir: filepath.Join(s.dir, "data"), temporalPort: tport, health: map[string]string{}}
	s.cluster = c
	if c.temporalDB, err = pgcluster.WithDatabase(s.pg.URL(), "lockernet_temporal"); err != nil {
		return nil, err
	}
	s.apiAddr = addrs[0]
	gwAddrs := [][2]string{{addrs[2], addrs[3]}, {addrs[4], addrs[5]}}
	apiservers, workers := addrs[6:8], addrs[8:10]
	env := []string{
		"DATABASE_URL=" + s.dbURL, "LOCKERNET_DATA_DIR=" + c.dataDir, "TEMPORAL_ADDRESS=", "TEMPORAL_NAMESPACE=default",
		"LOCKERNET_MASTER_KEY=", "LOCKERNET_MASTER_KEY_FILE=", "LOCKERNET_PUBLIC_URL=", "LOCKERNET_DEBUG_ADDR=",
		"LOCKERNET_LOG_FORMAT=", "LOCKERNET_LOG_LEVEL=info", "LOCKERNET_TASK_QUEUE=", "LOCKERNET_GATEWAY_TASK_QUEUE=",
		"LOCKERNET_API_ADDR=" + s.apiAddr, "LOCKERNET_TOWERSIM_ADDR=" + addrs[1],
		"LOCKERNET_APISERVER_ADDRS=" + strings.Join(apiservers, ","), "LOCKERNET_WORKER_ADDRS=" + strings.Join(workers, ","),
		"LOCKERNET_TEMPORAL_PORT=" + strconv.Itoa(tport), "LOCKERNET_TEMPORAL_UI_PORT=" + port(addrs[10]),
	}
	for i, serial := range []string{"GW-0001", "GW-0002"} {
		path, ids, err := writeDrillLayout(s.dir, serial, (i+1)*1000, o.clusterLockers)
		if err != nil {
			return nil, err
		}
		n := strconv.Itoa(i + 1)
		env = append(env, "LOCKERNET_GW"+n+"_ADDR="+gwAddrs[i][0], "LOCKERNET_GW"+n+"_SIM_ADDR="+gwAddrs[i][1], "LOCKERNET_GW"+n+"_LAYOUT="+path)
		s.gws = append(s.gws, &gatewayProc{serial: serial, url: "http://" + gwAddrs[i][0], simURL: "http://" + gwAddrs[i][1], lockers: ids})
		c.health[strings.ToLower(serial)] = "http://" + gwAddrs[i][0] + "/healthz"
	}
	for k, v := range baseEnv() {
		env = append(env, k+"="+v)
	}
	// GW-0002 on the simulator, not the Kerong driver: the cluster drills slow the controllers
	// to 10 s per command and send dozens of opens at once, and one Kerong bus carries one
	// command at a time, so about half of them cannot fit into the open's attempts on that bus
	// (a run on the driver: 0 extra actuations, 57 of 100 opens completed, the rest answered as
	// failed) while these drills require every open to complete. make run's GW-0002, and so the
	// make run drills, stay on the driver.
	env = append(env, "LOCKERNET_GW2_KERONG_EMULATOR=false")
	for i, a := range apiservers {
		c.health[fmt.Sprintf("apiserver-%d", i+1)] = "http://" + a + "/healthz"
	}
	for i, a := range workers {
		c.health[fmt.Sprintf("worker-%d", i+1)] = "http://" + a + "/healthz"
	}
	c.health["nginx"] = "http://" + s.apiAddr + "/healthz"
	c.health["towersim"] = "http://" + addrs[1] + "/sim/towers"
	c.health["temporal"] = fmt.Sprintf("http://127.0.0.1:%d/api/v1/system-info", tport+10)

	c.stack = &proc{name: "devstack -cluster", bin: filepath.Join(bins, "devstack"), args: []string{"-cluster"},
		env: env, logPath: filepath.Join(s.dir, "logs", "devstack.log")}
	if err := c.stack.spawn(); err != nil {
		return nil, err
	}
	if _, up := waitFor(ctx, 5*time.Minute, 250*time.Millisecond, func() bool {
		return !c.stack.running() || c.stack.logCount("(cluster shape) is up") > 0
	}); !up || !c.stack.running() {
		return nil, fmt.Errorf("the cluster shape did not come up (log %s):\n%s", c.stack.logPath, c.stack.logTail(30))
	}

	// The drill's own view: the demo credentials, Postgres, Temporal and the master key.
	creds, err := seed.ReadCredentials(filepath.Join(c.dataDir, seed.CredentialsFile))
	if err != nil || creds == nil {
		return nil, fmt.Errorf("read the cluster's credentials: %v", err)
	}
	s.creds = *creds
	for i, g := range s.gws {
		ref := creds.Gateways[i]
		if ref.Serial != g.serial {
			return nil, fmt.Errorf("credentials name gateway %s where %s was expected", ref.Serial, g.serial)
		}
		g.locationID, g.secret = ref.LocationID, ref.Secret
	}
	quiet := slog.New(slog.NewTextHandler(discardWriter{}, nil))
	if s.st, err = store.Open(ctx, s.dbURL, store.Options{MaxConns: 6, AppName: "lockernet-drill"}); err != nil {
		return nil, err
	}
	if s.ring, err = keyring.Load("", filepath.Join(c.dataDir, "master.key")); err != nil {
		return nil, err
	}
	if s.tc, err = temporalclient.Dial(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(tport)), "default", quiet); err != nil {
		return nil, err
	}
	return s, nil
}

// pid is the running pid of a supervised child, from the dev stack's pid file.
func (c *clusterStack) pid(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "run", name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("read the pid of %s: %w", name, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// kill sends SIGKILL to a supervised child and returns its pid.
func (c *clusterStack) kill(name string) (int, error) {
	pid, err := c.pid(name)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
	}
	logf("  %s (pid %d) killed", name, pid)
	return pid, nil
}

// waitRestarted waits until the supervisor has started name again (a pid other than old)
// and it answers its health URL; it returns when it answered.
func (c *clusterStack) waitRestarted(ctx context.Context, name string, old int, limit time.Duration) (time.Time, error) {
	at, ok := waitFor(ctx, limit, 100*time.Millisecond, func() bool {
		pid, err := c.pid(name)
		return err == nil && pid != old && probe(ctx, c.health[name])
	})
	if !ok {
		return time.Time{}, fmt.Errorf("%s was not restarted and healthy within %s", name, limit)
	}
	return at, nil
}

// restarts counts the supervisor's restarts of each child so far, from its log.
func (c *clusterStack) restarts() map[string]int {
	out := map[string]int{}
	f, err := os.Open(c.stack.logPath)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "process died; restarting it") {
			continue
		}
		for _, name := range clusterServices {
			if strings.Contains(line, " name="+name+" ") {
				out[name]++
			}
		}
	}
	return out
}

// restartsSince renders the restarts since before (a restarts() snapshot).
func (c *clusterStack) restartsSince(before map[string]int) map[string]int {
	out := map[string]int{}
	for name, n := range c.restarts() {
		if d := n - before[name]; d > 0 {
			out[name] = d
		}
	}
	return out
}

// down names the children that are not running and healthy, and the dev stack itself if
// it has stopped.
func (c *clusterStack) down(ctx context.Context) []string {
	if !c.stack.running() {
		return []string{"the dev stack (" + c.stack.logPath + ")"}
	}
	var out []string
	for _, name := range clusterServices {
		pid, err := c.pid(name)
		if err != nil || syscall.Kill(pid, 0) != nil || !probe(ctx, c.health[name]) {
			out = append(out, name)
		}
	}
	return out
}

// stop stops the dev stack (Ctrl-C: it stops every child) and waits for it.
func (c *clusterStack) stop() {
	if c.stack != nil {
		c.stack.stop(90 * time.Second)
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
