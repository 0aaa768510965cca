// Package devtemporal runs a real Temporal server inside the dev process, as
// `temporal server start-dev` does: the server of go.temporal.io/server on a SQLite file (so
// workflows and timers survive a restart) plus the embedded Web UI. Only the dev entrypoint
// imports it; the production binaries never link the Temporal server.
package devtemporal

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// Options configure the dev server.
type Options struct {
	// DBPath is the SQLite file; it is created (with the schema) if missing.
	DBPath    string
	IP        string // 127.0.0.1
	Port      int    // frontend gRPC, 7233
	UIPort    int    // Web UI, 8233; 0 disables the UI
	Namespace string
	// SearchAttributes are registered (Keyword) on the namespace when it is created.
	SearchAttributes []string
	// LogFile receives the server's own logs (warn and above).
	LogFile string
	// Stock runs the server on Temporal's own dynamic-config defaults instead of ours
	// (dynamicConfig); the bench's engine scenario measures both on the same server.
	Stock bool
	// Shards is the number of history shards (1 when 0); it is fixed when the file is created.
	Shards int
	// Sync is SQLite's synchronous pragma for both files: "full" (the default: a commit is
	// acknowledged once its WAL frames are on disk) or "normal" (acknowledged before the WAL's
	// fsync: an application crash loses nothing, a power loss or OS crash may roll back
	// acknowledged writes). Only the bench sets "normal", to show what durability costs.
	Sync string
	// CheckpointPages is SQLite's wal_autocheckpoint (0: SQLite's default, 1,000 pages): how
	// large the WAL grows before a commit copies it back into the database file. It does not
	// change what a commit waits for.
	CheckpointPages int
}

// Server is a running dev server.
type Server struct {
	srv  temporal.Server
	ui   *uiserver.Server
	addr string
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.addr }

// Start starts the server and, if UIPort is set, the Web UI. Ports are checked first so a
// busy one is a clear error.
func Start(opts Options) (*Server, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	for _, p := range []int{opts.Port, opts.UIPort} {
		if p == 0 {
			continue
		}
		if err := portFree(opts.IP, p); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(opts.IP, 8)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(opts.DBPath), 0o755); err != nil {
		return nil, fmt.Errorf("create temporal data dir: %w", err)
	}

	sqlCfg, visCfg, err := setupStores(&opts)
	if err != nil {
		return nil, err
	}
	frontend := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	srv, err := newServer(opts, serverConfig(opts, frontend, ports, sqlCfg, visCfg), frontend, ports)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	s := &Server{srv: srv, addr: frontend}
	if opts.UIPort != 0 {
		s.ui = StartUI(opts.IP, opts.UIPort, frontend, opts.Namespace)
	}
	return s, nil
}

// setupStores settles opts' SQLite settings and creates the schema in each file that does
// not exist yet, then the namespace with its search attributes.
func setupStores(opts *Options) (sqlCfg, visCfg *config.SQL, err error) {
	// Two SQLite files: workflows (history, mutable state, task queues) in DBPath and
	// visibility (the Web UI's lists and search attributes) beside it. SQLite has one writer per
	// file, and Temporal keeps one connection per file; with one file, every visibility record
	// (two per workflow, each updating some thirty indexes) queued in front of workflow starts
	// and completions. Apart, they write concurrently.
	if opts.Sync == "" {
		opts.Sync = "full"
	}
	if opts.Sync != "full" && opts.Sync != "normal" {
		return nil, nil, fmt.Errorf("temporal sqlite synchronous %q: full or normal", opts.Sync)
	}
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	sqlCfg = sqliteConfig(opts.DBPath, opts.Sync, opts.CheckpointPages)
	visCfg = sqliteConfig(VisibilityPath(opts.DBPath), opts.Sync, opts.CheckpointPages)
	for _, c := range []*config.SQL{sqlCfg, visCfg} {
		if _, err := os.Stat(c.DatabaseName); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(c); err != nil {
				return nil, nil, fmt.Errorf("create temporal schema in %s: %w", c.DatabaseName, err)
			}
		}
	}
	attrs := map[string]enumspb.IndexedValueType{}
	for _, a := range opts.SearchAttributes {
		attrs[a] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", opts.Namespace, false, attrs)
	if err != nil {
		return nil, nil, fmt.Errorf("namespace config: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, nil, fmt.Errorf("create namespace: %w", err)
	}

	return sqlCfg, visCfg, nil
}

// serverConfig is the server's configuration: the frontend on opts' address, the other
// services and the metrics on ports, the two SQLite stores.
func serverConfig(opts Options, frontend string, ports []int, sqlCfg, visCfg *config.SQL) *config.Config {
	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: opts.IP},
			Metrics: &metrics.Config{Prometheus: &metrics.PrometheusConfig{
				ListenAddress: net.JoinHostPort(opts.IP, strconv.Itoa(ports[6])), HandlerPath: "/metrics"}},
		},
		Persistence: config.Persistence{
			DefaultStore: "workflows", VisibilityStore: "visibility", NumHistoryShards: int32(opts.Shards),
			DataStores: map[string]config.DataStore{"workflows": {SQL: sqlCfg}, "visibility": {SQL: visCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace: false, FailoverVersionIncrement: 10,
			MasterClusterName: "active", CurrentClusterName: "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": {RPC: config.RPC{GRPCPort: opts.Port, MembershipPort: ports[0], BindOnIP: opts.IP}},
			"history":  {RPC: config.RPC{GRPCPort: ports[1], MembershipPort: ports[2], BindOnIP: opts.IP}},
			"matching": {RPC: config.RPC{GRPCPort: ports[3], MembershipPort: ports[4], BindOnIP: opts.IP}},
			"worker":   {RPC: config.RPC{GRPCPort: ports[5], MembershipPort: ports[7], BindOnIP: opts.IP}},
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontend},
	}

}

// newServer creates the server of cfg with its logger, authorization, dynamic config and
// static membership.
func newServer(opts Options, cfg *config.Config, frontend string, ports []int) (temporal.Server, error) {
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: "warn", OutputFile: opts.LogFile, Format: "json"}))
	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("claim mapper: %w", err)
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicConfig(opts.Stock)),
		// Static membership: the services' ports change between runs, and ringpop would
		// spend its join timeout on the previous run's hosts recorded in the SQLite file.
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(frontend),
			primitives.HistoryService:  static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(ports[1]))),
			primitives.MatchingService: static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(ports[3]))),
			primitives.WorkerService:   static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(ports[5]))),
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("create temporal server: %w", err)
	}
	return srv, nil
}

// StartUI serves the Temporal Web UI (ui-server) on ip:port for the frontend at
// frontendAddr, in this process; Stop the returned server to end it. The caller checks the
// port first: the UI's own listener failing is only logged by ui-server.
func StartUI(ip string, port int, frontendAddr, namespace string) *uiserver.Server {
	ui := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host: ip, Port: port, TemporalGRPCAddress: frontendAddr, EnableUI: true,
		DefaultNamespace: namespace, HideLogs: true, DisableNewsFetch: true,
		CORS: uiconfig.CORS{CookieInsecure: true},
	}))
	go func() { _ = ui.Start() }()
	return ui
}

// VisibilityPath is the SQLite file of the server's visibility store, beside dbPath.
func VisibilityPath(dbPath string) string {
	ext := filepath.Ext(dbPath)
	return strings.TrimSuffix(dbPath, ext) + "-visibility" + ext
}

func sqliteConfig(path, sync string, checkpointPages int) *config.SQL {
	c := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		// WAL lets readers proceed while the single writer commits. synchronous=full: with WAL,
		// "normal" acknowledges a commit before its frames reach the disk (durable across a
		// process crash, not a power loss or OS crash), which the service never relies on.
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": sync, "busy_timeout": "10000"},
		// One connection per file: SQLite has a single writer, and a second connection
		// upgrading a read to a write gets SQLITE_BUSY regardless of busy_timeout.
		MaxConns:     1,
		MaxIdleConns: 1,
	}
	if checkpointPages > 0 {
		c.ConnectAttributes["wal_autocheckpoint"] = strconv.Itoa(checkpointPages)
	}
	return c
}

// Stop stops the UI and the server.
func (s *Server) Stop() error {
	if s.ui != nil {
		s.ui.Stop()
	}
	return s.srv.Stop()
}

// dynamicConfig mirrors `temporal server start-dev`, plus a higher transfer-queue poll rate:
// on one shard the default (20/s) makes every new workflow wait ~50 ms for its first task.
// stock: none of it, Temporal's own defaults.
func dynamicConfig(stock bool) dynamicconfig.StaticClient {
	if stock {
		return dynamicconfig.StaticClient{}
	}
	v := func(x any) []dynamicconfig.ConstrainedValue { return []dynamicconfig.ConstrainedValue{{Value: x}} }
	return dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key():            v(true),
		dynamicconfig.MakeKey("frontend.persistenceMaxQPS"):                    v(10000),
		dynamicconfig.MakeKey("history.persistenceMaxQPS"):                     v(45000),
		dynamicconfig.MakeKey("history.transferProcessorMaxPollRPS"):           v(2000),
		dynamicconfig.MakeKey("history.timerProcessorMaxPollRPS"):              v(2000),
		dynamicconfig.MakeKey("frontend.namespaceRPS.visibility"):              v(1000),
		dynamicconfig.MakeKey("system.enableEagerWorkflowStart"):               v(true),
		dynamicconfig.MakeKey("history.cacheHostLevelMaxSize"):                 v(8096),
		dynamicconfig.MakeKey("frontend.maxNamespaceVisibilityRPSPerInstance"): v(100),
	}
}

func portFree(ip string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on %s is in use: %w", port, ip, err)
	}
	return ln.Close()
}

func freePorts(ip string, n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
