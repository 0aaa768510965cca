package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/devtemporal"
	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/workflows/contract"
)

// systemOptions shape one drill's system.
type systemOptions struct {
	binDir string
	// lockersPerGateway sizes each simulated gateway (banks of 16), so every open of a
	// drill can have a locker of its own and a second actuation shows on that locker.
	lockersPerGateway int
	// env are settings for the apiserver and the worker (internal/config names).
	env map[string]string
	// gatewayArgs are extra flags of both gateways (their open policy).
	gatewayArgs []string
	keep        bool
}

// system is a whole Locker Network Service made of separate processes, private to a drill:
// a PostgreSQL cluster of its own, an embedded Temporal server on its own SQLite file, and
// the apiserver, the worker and two simulated gateways as child processes on free ports.
type system struct {
	opts   systemOptions
	dir    string // logs, layouts, secrets, Temporal's file
	pgDir  string
	pgPort int
	pg     *pgcluster.Cluster
	dbURL  string

	temporal *devtemporal.Server
	tc       client.Client
	st       *store.Store
	ring     *keyring.Keyring
	creds    seed.Credentials

	apiAddr string
	api     *proc
	worker  *proc
	gws     []*gatewayProc
	env     []string // every service process's environment

	// cluster is set when the system is the cluster shape (make run-cluster) instead of the
	// processes above; api and worker are then unset and the gateways are its children.
	cluster *clusterStack
	// pool and towerLockers are shared by the drills that run on one system in turn, so each
	// gets lockers none before it touched.
	pool         *lockerPool
	towerLockers int
}

// gatewayProc is one simulated gateway.
type gatewayProc struct {
	*proc
	serial     string
	locationID int64
	url        string // local API
	simURL     string // simulator control
	secret     string
	lockers    []int
}

func newSystem(ctx context.Context, opts systemOptions) (sys *system, err error) {
	s := &system{opts: opts}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.startPrivatePostgres(ctx, "lockernet-drill-"); err != nil {
		return nil, err
	}

	keyFile := filepath.Join(s.dir, "master.key")
	if _, err := keyring.EnsureKeyFile(keyFile); err != nil {
		return nil, err
	}
	if s.ring, err = keyring.Load("", keyFile); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(discardWriter{}, nil))
	if s.st, err = store.Open(ctx, s.dbURL, store.Options{MaxConns: 6, AppName: "lockernet-drill"}); err != nil {
		return nil, err
	}
	if err := s.st.Migrate(ctx, quiet); err != nil {
		return nil, err
	}
	res, err := seed.Demo(ctx, s.st, s.ring, nil)
	if err != nil {
		return nil, fmt.Errorf("seed demo data: %w", err)
	}
	s.creds = res.Credentials

	// Temporal: the embedded dev server on a free port, no Web UI.
	tport, err := pgcluster.FreePort()
	if err != nil {
		return nil, err
	}
	if s.temporal, err = devtemporal.Start(devtemporal.Options{
		DBPath: filepath.Join(s.dir, "temporal.db"), IP: "127.0.0.1", Port: tport, Namespace: "default",
		SearchAttributes: contract.SearchAttributeNames, LogFile: filepath.Join(s.dir, "logs", "temporal.log"),
	}); err != nil {
		return nil, err
	}
	if s.tc, err = temporalclient.Dial(ctx, s.temporal.Address(), "default", quiet); err != nil {
		return nil, err
	}
	if err := temporalclient.EnsureSearchAttributes(ctx, s.tc, "default"); err != nil {
		return nil, err
	}

	bins, err := findBinaries(opts.binDir)
	if err != nil {
		return nil, err
	}
	addr := func() (string, error) {
		p, err := pgcluster.FreePort()
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), err
	}
	if s.apiAddr, err = addr(); err != nil {
		return nil, err
	}
	workerAddr, err := addr()
	if err != nil {
		return nil, err
	}
	s.env = []string{
		"LOCKERNET_DATA_DIR=" + filepath.Join(s.dir, "data"),
		"LOCKERNET_MASTER_KEY=", "LOCKERNET_MASTER_KEY_FILE=" + keyFile,
		"DATABASE_URL=" + s.dbURL,
		"TEMPORAL_ADDRESS=" + s.temporal.Address(), "TEMPORAL_NAMESPACE=default",
		"LOCKERNET_TASK_QUEUE=lockernet", "LOCKERNET_GATEWAY_TASK_QUEUE=",
		"LOCKERNET_API_GATEWAY_WORKER=false",
		"LOCKERNET_LOG_FORMAT=json", "LOCKERNET_LOG_LEVEL=info",
		"LOCKERNET_API_ADDR=" + s.apiAddr, "LOCKERNET_PUBLIC_URL=http://" + s.apiAddr,
		"LOCKERNET_WORKER_ADDR=" + workerAddr,
	}
	keys := make([]string, 0, len(opts.env))
	for k := range opts.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.env = append(s.env, k+"="+opts.env[k])
	}
	logPath := func(name string) string { return filepath.Join(s.dir, "logs", name+".log") }
	s.api = &proc{name: "apiserver", bin: filepath.Join(bins, "apiserver"), env: s.env,
		health: "http://" + s.apiAddr + "/healthz", logPath: logPath("apiserver")}
	s.worker = &proc{name: "worker", bin: filepath.Join(bins, "worker"), env: s.env,
		health: "http://" + workerAddr + "/healthz", logPath: logPath("worker")}

	for i, serial := range []string{"GW-0001", "GW-0002"} {
		g, err := s.prepareGateway(ctx, i+1, serial, res.GatewayLocationID[serial], filepath.Join(bins, "gateway"), addr)
		if err != nil {
			return nil, err
		}
		s.gws = append(s.gws, g)
	}

	for _, p := range s.procs() {
		if err := p.start(ctx, 90*time.Second); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startPrivatePostgres makes the system's directory (dirPattern names it; logs in logs/)
// and starts its PostgreSQL: a private cluster in a directory of its own (it is handed to
// the postgres user when running as root), on a free port, with the database lockernet.
func (s *system) startPrivatePostgres(ctx context.Context, dirPattern string) (err error) {
	if s.dir, err = os.MkdirTemp("", dirPattern); err != nil {
		return fmt.Errorf("create drill dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "logs"), 0o700); err != nil {
		return err
	}
	if s.pgDir, err = os.MkdirTemp("", "lockernet-drill-pg-"); err != nil {
		return fmt.Errorf("create postgres dir: %w", err)
	}
	if s.pgPort, err = pgcluster.FreePort(); err != nil {
		return err
	}
	if s.pg, err = pgcluster.EnsureRunning(ctx, s.pgDir, s.pgPort); err != nil {
		return err
	}
	if err := pgcluster.CreateDatabase(ctx, s.pg.URL(), "lockernet"); err != nil {
		return err
	}
	s.dbURL, err = pgcluster.WithDatabase(s.pg.URL(), "lockernet")
	return err
}

// prepareGateway writes the layout and secret of gateway n, registers it with the cloud
// (its secret sealed under the master key, as make run does) and prepares its process.
func (s *system) prepareGateway(ctx context.Context, n int, serial string, locationID int64, bin string,
	addr func() (string, error)) (*gatewayProc, error) {
	a, err := addr()
	if err != nil {
		return nil, err
	}
	simA, err := addr()
	if err != nil {
		return nil, err
	}
	layoutPath, ids, err := writeDrillLayout(s.dir, serial, n*1000, s.opts.lockersPerGateway)
	if err != nil {
		return nil, err
	}
	secret := credential.NewSecret()
	secretPath := filepath.Join(s.dir, serial+".secret")
	if err := os.WriteFile(secretPath, []byte(secret+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write gateway secret: %w", err)
	}
	if _, err := s.st.UpsertGateway(ctx, store.NewGateway{Serial: serial, LocationID: locationID, BaseURL: "http://" + a,
		SecretSealed: s.ring.Seal(keyring.GatewaySecretPurpose(serial), []byte(secret))}); err != nil {
		return nil, fmt.Errorf("register gateway %s: %w", serial, err)
	}
	args := append([]string{"-simulated", "-id", serial, "-addr", a, "-sim-addr", simA, "-layout", layoutPath,
		"-secret-file", secretPath, "-db", filepath.Join(s.dir, serial+".db")}, s.opts.gatewayArgs...)
	return &gatewayProc{
		proc: &proc{name: serial, bin: bin, args: args, env: s.env, health: "http://" + a + "/healthz",
			logPath: filepath.Join(s.dir, "logs", serial+".log")},
		serial: serial, locationID: locationID, url: "http://" + a, simURL: "http://" + simA, secret: secret, lockers: ids,
	}, nil
}

// drillLayout is a gateway of count lockers in banks of 16, one simulated controller per
// bank; locker ids start after base.
// writeDrillLayout writes the drill's layout of the gateway serial (see drillLayout)
// to dir, and returns the file's path and the gateway's locker ids.
func writeDrillLayout(dir, serial string, base, count int) (string, []int, error) {
	layout, ids := drillLayout(serial, base, count)
	path := filepath.Join(dir, serial+"-layout.json")
	b, err := json.MarshalIndent(layout, "", "  ")
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", nil, fmt.Errorf("write gateway layout: %w", err)
	}
	return path, ids, nil
}

func drillLayout(serial string, base, count int) (gateway.Layout, []int) {
	desc := func(s string) *string { return &s }
	l := gateway.Layout{
		GatewayID: serial,
		LockerTypes: []gateway.LockerTypeSpec{
			{ID: 1, Name: "small", Description: desc("Letters and small parcels"), WidthMm: 400, HeightMm: 100, DepthMm: 500},
			{ID: 2, Name: "medium", Description: desc("Mid-size parcels"), WidthMm: 400, HeightMm: 250, DepthMm: 500},
		},
		BankTypes: []gateway.BankTypeSpec{{ID: 1, Name: "Drill column"}},
	}
	var ids []int
	for bank := 1; len(ids) < count; bank++ {
		ctl := fmt.Sprintf("CTL-%d", bank)
		b := gateway.BankSpec{ID: bank, BankTypeID: 1,
			Controller: gateway.ControllerSpec{ID: ctl, Kind: "simulated", Address: "sim://" + ctl}}
		for ch := 1; ch <= 16 && len(ids) < count; ch++ {
			id := base + len(ids) + 1
			typ := 1
			if ch > 10 {
				typ = 2
			}
			b.Lockers = append(b.Lockers, gateway.LockerSpec{LockerID: id, Name: fmt.Sprintf("%c%02d", 'A'+bank-1, ch),
				Channel: ch, LockerTypeID: typ, IsLowLocker: ch > 12})
			ids = append(ids, id)
		}
		l.Banks = append(l.Banks, b)
	}
	return l, ids
}

func (s *system) procs() []*proc {
	if s.cluster != nil {
		return []*proc{s.cluster.stack}
	}
	ps := []*proc{s.api, s.worker}
	for _, g := range s.gws {
		ps = append(ps, g.proc)
	}
	return ps
}

// notRunning names the processes that are not running (none, when all are up).
func (s *system) notRunning() []string {
	if s.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s.cluster.down(ctx)
	}
	var out []string
	for _, p := range s.procs() {
		if p != nil && !p.running() {
			out = append(out, p.name)
		}
	}
	return out
}

// close stops everything the system started and removes its directories.
func (s *system) close() {
	for _, p := range []*proc{s.api, s.worker} {
		if p != nil {
			p.stop(10 * time.Second)
		}
	}
	for _, g := range s.gws {
		if g.proc != nil {
			g.stop(10 * time.Second)
		}
	}
	if s.cluster != nil {
		s.cluster.stop()
	}
	if s.tc != nil {
		s.tc.Close()
	}
	if s.temporal != nil {
		if err := s.temporal.Stop(); err != nil {
			logf("stop temporal: %v", err)
		}
	}
	if s.st != nil {
		s.st.Close()
	}
	if s.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := s.pg.Stop(ctx); err != nil {
			logf("stop private postgres: %v", err)
		}
		cancel()
	}
	if s.opts.keep {
		logf("kept %s and %s", s.dir, s.pgDir)
		return
	}
	for _, d := range []string{s.dir, s.pgDir} {
		if d != "" {
			if err := os.RemoveAll(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				logf("remove %s: %v", d, err)
			}
		}
	}
}

// lockers is the system's pool of gateway lockers, shared by the drills that use it.
func (s *system) lockers() *lockerPool {
	if s.pool == nil {
		s.pool = newLockerPool(s)
	}
	return s.pool
}

// freshTowerLockers returns n tower lockers no drill on this system has used.
func (s *system) freshTowerLockers(ctx context.Context, n int) ([]towerLocker, error) {
	all, err := addDrillTowers(ctx, s, s.towerLockers+n)
	if err != nil {
		return nil, err
	}
	out := all[s.towerLockers:]
	s.towerLockers += n
	return out, nil
}

// stopPostgres stops the drill's private cluster (fast shutdown: every session is cut).
func (s *system) stopPostgres(ctx context.Context) error {
	return s.pg.Stop(ctx)
}

// startPostgres starts the cluster again and returns once it answers.
func (s *system) startPostgres(ctx context.Context) error {
	c, err := pgcluster.EnsureRunning(ctx, s.pgDir, s.pgPort)
	if err != nil {
		return err
	}
	s.pg = c
	return nil
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// pgOutage is when a drill's Postgres went down and came back (pgOutage.run).
type pgOutage struct {
	stop0   time.Time // stop issued
	stopped time.Time // stopped
	start0  time.Time // start issued
	up      time.Time // answering again
	err     error
}

// restartPostgres stops the system's Postgres after `after`, leaves it down for `down` and
// starts it again, recording when.
func (s *system) restartPostgres(ctx context.Context, after, down time.Duration) (o pgOutage) {
	time.Sleep(after)
	logf("  stopping postgres")
	o.stop0 = time.Now()
	if err := s.stopPostgres(ctx); err != nil {
		o.err = fmt.Errorf("stop postgres: %w", err)
		return o
	}
	o.stopped = time.Now()
	time.Sleep(down)
	logf("  starting postgres")
	o.start0 = time.Now()
	if err := s.startPostgres(ctx); err != nil {
		o.err = fmt.Errorf("start postgres again: %w", err)
		return o
	}
	o.up = time.Now()
	return o
}
