// Package devstack is `make run`: the whole Locker Network Service on one machine in one
// foreground process group. It finds or provisions Postgres, migrates and seeds it, runs a
// real Temporal server in-process (SQLite file, Web UI) unless TEMPORAL_ADDRESS names a
// cluster, and starts the apiserver, a worker, two simulated gateways and the tower
// simulator as child processes talking real HTTP, each restarted if it dies, as the cluster
// shape's are. Their workers poll as this build of the worker deployment, which the stack
// makes current once they do (versioning.go). Ctrl-C stops everything within seconds.
// Everything it keeps lives in LOCKERNET_DATA_DIR, so running it again reuses the data.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/devtemporal"
	"github.com/lockernet/lockernet/internal/dev/pgcluster"
	"github.com/lockernet/lockernet/internal/httpserve"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Run starts the stack and blocks until ctx is done, then stops it all. A child that dies
// meanwhile is restarted (supervisor); one that dies during start-up fails Run.
func Run(ctx context.Context, s Settings, logger *slog.Logger, out io.Writer) error {
	started := time.Now()
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := checkPorts(s); err != nil {
		return err
	}

	// Profiles (pprof): one address per process, so the shared LOCKERNET_DEBUG_ADDR is not
	// passed on; LOCKERNET_API_DEBUG_ADDR and LOCKERNET_WORKER_DEBUG_ADDR place them, and the
	// dev stack's own (the embedded Temporal server) is on LOCKERNET_DEBUG_ADDR.
	if err := os.Unsetenv("LOCKERNET_DEBUG_ADDR"); err != nil {
		return err
	}
	go func() { _ = httpserve.ServeDebug(ctx, s.DebugAddr, logger) }()
	k, err := prepare(ctx, s, logger)
	if err != nil {
		return err
	}
	defer k.close(ctx, logger)

	temporalAddr := s.TemporalAddress
	uiURL := ""
	if !s.TemporalIsSet {
		host, port, err := splitHostPort(s.TemporalAddress)
		if err != nil {
			return fmt.Errorf("parse TEMPORAL_ADDRESS default: %w", err)
		}
		srv, err := devtemporal.Start(devtemporal.Options{
			DBPath: filepath.Join(s.DataDir, "temporal.db"), IP: host, Port: port, UIPort: s.TemporalUIPort,
			Namespace: s.TemporalNS, SearchAttributes: contract.SearchAttributeNames,
			LogFile: filepath.Join(s.DataDir, "temporal.log"),
		})
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Warn("stop temporal", "err", err)
			}
		}()
		temporalAddr = srv.Address()
		uiURL = fmt.Sprintf("http://%s:%d", host, s.TemporalUIPort)
	}
	k.env = append(k.env, "TEMPORAL_ADDRESS="+temporalAddr)
	// Every worker of the stack polls as this build; once they do, it is made current.
	build := ""
	if stackVersioning() {
		if build, err = stackBuildID(s, s.BinDir); err != nil {
			return err
		}
		k.env = append(k.env, versioningEnv(s, build)...)
	}
	tc, err := temporalclient.Dial(ctx, temporalAddr, s.TemporalNS, logger)
	if err != nil {
		return err
	}
	err = temporalclient.EnsureSearchAttributes(ctx, tc, s.TemporalNS)
	tc.Close()
	if err != nil {
		return err
	}
	if err := k.writeFiles("http://"+s.APIAddr, uiURL); err != nil {
		return err
	}

	// Children, each supervised as in the cluster shape: one that dies is restarted with
	// back-off, with the same arguments and environment (ports, data dir, secrets), and the
	// rest keep running.
	runDir := filepath.Join(s.DataDir, "run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	sup := &supervisor{binDir: s.BinDir, out: out, logger: logger, pidDir: runDir}
	defer sup.stop(10 * time.Second)
	children := []child{
		// The apiserver runs workers of its own: gateway cloud calls and the workflows its
		// outbox starts start eagerly (decisions 0012, 0016).
		{name: "apiserver", bin: "apiserver", env: []string{"LOCKERNET_API_ADDR=" + s.APIAddr, "LOCKERNET_PUBLIC_URL=" + s.PublicURL,
			"LOCKERNET_API_GATEWAY_WORKER=true", "LOCKERNET_API_WORKER=true", "LOCKERNET_DEBUG_ADDR=" + os.Getenv("LOCKERNET_API_DEBUG_ADDR"),
			"LOCKERNET_ADMIN_ADDR=" + s.APIAdminAddr},
			health: "http://" + s.APIAddr + "/healthz"},
		{name: "worker", bin: "worker", env: []string{"LOCKERNET_WORKER_ADDR=" + s.WorkerAddr,
			"LOCKERNET_DEBUG_ADDR=" + os.Getenv("LOCKERNET_WORKER_DEBUG_ADDR")}, health: "http://" + s.WorkerAddr + "/healthz"},
	}
	children = append(children, simChildren(s)...)
	// All start at once; then each is waited for.
	var services []*service
	for _, c := range children {
		sv, err := sup.start(ctx, c, k.env)
		if err != nil {
			return err
		}
		services = append(services, sv)
	}
	for _, sv := range services {
		if err := sv.waitHealthy(ctx, 90*time.Second); err != nil {
			return err
		}
	}
	if build != "" {
		if err := promoteBuild(ctx, s, temporalAddr, build, logger); err != nil {
			return err
		}
	}

	printSummary(out, s, k.creds, k.credsPath, time.Since(started))
	if s.OnReady != nil {
		s.OnReady()
	}
	<-ctx.Done()
	fmt.Fprintln(out, "\nstopping the Locker Network Service...")
	return nil
}

// child is a process of the stack: a sibling binary, its arguments and environment, and the
// URL that answers once it is ready.
type child struct {
	name, bin string
	args, env []string
	health    string
	logFile   string // if set, the child's output goes to this file instead of the terminal
	ownGroup  bool   // a process group of its own, killed whole when the child exits (needs logFile)
}

// simChildren are the simulated hardware, the same in both shapes: the two gateways and the
// tower simulator. GW-0002's banks are driven by the Kerong driver over a pseudo-terminal
// to the bus emulator, so its door opens exercise the real driver end to end.
func simChildren(s Settings) []child {
	var children []child
	for _, g := range s.Gateways {
		args := []string{"-simulated", "-id", g.Serial, "-addr", g.Addr, "-sim-addr", g.SimAddr, "-layout", g.Layout,
			"-secret-file", filepath.Join(s.DataDir, "gateways", g.Serial+".secret"),
			"-db", filepath.Join(s.DataDir, "gateways", g.Serial+".db")}
		if g.KerongEmulator {
			args = append(args, "-kerong-emulator")
		}
		children = append(children, child{name: strings.ToLower(g.Serial), bin: "gateway", args: args,
			health: "http://" + g.Addr + "/healthz"})
	}
	return append(children, child{name: "towersim", bin: "towersim",
		args:   []string{"serve", "-config", filepath.Join(s.DataDir, "towersim.json"), "-addr", s.TowerSimAddr},
		health: "http://" + s.TowerSimAddr + "/sim/towers"})
}

// prepared is what both shapes set up before any process starts: the data dir and master
// key, Postgres migrated and seeded with the demo data, the simulated gateways registered.
type prepared struct {
	s         Settings
	env       []string // every child's environment
	dbURL     string
	st        *store.Store
	cluster   *pgcluster.Cluster // a private Postgres the stack started, or nil
	creds     seed.Credentials
	towers    []seed.Tower
	credsPath string
}

func prepare(ctx context.Context, s Settings, logger *slog.Logger) (k *prepared, err error) {
	k = &prepared{s: s, env: []string{
		"LOCKERNET_DATA_DIR=" + s.DataDir,
		"LOCKERNET_LOG_FORMAT=" + s.LogFormat,
		"LOCKERNET_TASK_QUEUE=" + s.TaskQueue,
		"TEMPORAL_NAMESPACE=" + s.TemporalNS,
	}}
	defer func() {
		if err != nil {
			k.close(ctx, logger)
		}
	}()
	if s.MasterKey == "" && s.MasterKeyFile == "" {
		s.MasterKeyFile = filepath.Join(s.DataDir, "master.key")
		if _, err := keyring.EnsureKeyFile(s.MasterKeyFile); err != nil {
			return k, err
		}
		k.env = append(k.env, "LOCKERNET_MASTER_KEY_FILE="+s.MasterKeyFile)
	}
	ring, err := keyring.Load(s.MasterKey, s.MasterKeyFile)
	if err != nil {
		return k, err
	}

	if k.dbURL, k.cluster, err = postgres(ctx, s, logger); err != nil {
		return k, err
	}
	k.env = append(k.env, "DATABASE_URL="+k.dbURL)

	if k.st, err = store.Open(ctx, k.dbURL, store.Options{MaxConns: stackPoolSize, AppName: "devstack"}); err != nil {
		return k, err
	}
	if err := k.st.Migrate(ctx, logger); err != nil {
		return k, err
	}
	k.credsPath = filepath.Join(s.DataDir, seed.CredentialsFile)
	previous, err := seed.ReadCredentials(k.credsPath)
	if err != nil {
		return k, err
	}
	res, err := seed.DemoWith(ctx, k.st, ring, previous, seed.DemoOptions{TowerIDPrefix: s.TowerIDPrefix})
	if err != nil {
		return k, fmt.Errorf("seed demo data: %w", err)
	}
	k.creds, k.towers = res.Credentials, res.Towers
	if err := seed.EnsureDemoPickupPolicy(ctx, k.st, res.Credentials.OrganizationID); err != nil {
		return k, fmt.Errorf("demo pickup policy: %w", err)
	}
	k.creds.TowerSimURL = "http://" + s.TowerSimAddr
	for _, g := range s.Gateways {
		secret, err := gatewaySecret(s.DataDir, g.Serial)
		if err != nil {
			return k, err
		}
		// The cloud calls the gateway with its secret, sealed under the master key.
		if _, err := k.st.UpsertGateway(ctx, store.NewGateway{Serial: g.Serial, LocationID: res.GatewayLocationID[g.Serial],
			BaseURL: "http://" + g.Addr, SecretSealed: ring.Seal(keyring.GatewaySecretPurpose(g.Serial), []byte(secret))}); err != nil {
			return k, fmt.Errorf("register gateway %s: %w", g.Serial, err)
		}
		k.creds.Gateways = append(k.creds.Gateways, seed.GatewayRef{Serial: g.Serial, LocationID: res.GatewayLocationID[g.Serial],
			URL: "http://" + g.Addr, Secret: secret, SimURL: "http://" + g.SimAddr})
	}
	return k, nil
}

// stackPoolSize is the dev stack's own pool (migrations, seed, gateway registration).
const stackPoolSize = 2

// writeFiles writes the tower simulator's provisioning and the credentials file, with the
// API's public address and the Temporal UI's.
func (k *prepared) writeFiles(apiURL, uiURL string) error {
	k.creds.APIURL = apiURL
	k.creds.TemporalUIURL = uiURL
	if err := writeTowerSimConfig(k.s, k.creds, k.towers); err != nil {
		return err
	}
	return seed.WriteCredentials(k.credsPath, k.creds)
}

func (k *prepared) close(ctx context.Context, logger *slog.Logger) {
	if k.st != nil {
		k.st.Close()
	}
	if k.cluster != nil {
		if err := k.cluster.Stop(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("stop private postgres", "err", err)
		}
	}
}

func postgres(ctx context.Context, s Settings, logger *slog.Logger) (string, *pgcluster.Cluster, error) {
	if s.DatabaseURLIsSet {
		return s.DatabaseURL, nil, nil
	}
	if pgcluster.Reachable(ctx, pgcluster.LocalURL, 2*time.Second) {
		if err := pgcluster.CreateDatabase(ctx, pgcluster.LocalURL, "lockernet"); err != nil {
			return "", nil, err
		}
		return config.DefaultDatabaseURL, nil, nil
	}
	logger.Info("no postgres on 127.0.0.1:5432; starting a private cluster", "dir", filepath.Join(s.DataDir, "postgres"), "port", s.PrivatePGPort)
	c, err := pgcluster.EnsureRunning(ctx, filepath.Join(s.DataDir, "postgres"), s.PrivatePGPort)
	if err != nil {
		return "", nil, err
	}
	if err := pgcluster.CreateDatabase(ctx, c.URL(), "lockernet"); err != nil {
		return "", nil, err
	}
	u, err := pgcluster.WithDatabase(c.URL(), "lockernet")
	return u, c, err
}

func gatewaySecret(dataDir, serial string) (string, error) {
	path := filepath.Join(dataDir, "gateways", serial+".secret")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 64 { // 32 random bytes in hex, as the gateway requires
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read gateway secret: %w", err)
	}
	secret := credential.NewSecret()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create gateway dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write gateway secret: %w", err)
	}
	return secret, nil
}

func probe(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}
