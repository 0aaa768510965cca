package devstack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ClusterSettings are `make run-cluster`'s settings beyond make run's (Settings): the
// production shape of docker/compose.yaml as processes on this machine.
type ClusterSettings struct {
	Settings
	// APIServers are the apiservers' own addresses behind nginx (LOCKERNET_APISERVER_ADDRS,
	// comma-separated) [127.0.0.1:8091,127.0.0.1:8092]; nginx listens on LOCKERNET_API_ADDR.
	APIServers []string
	// Workers are the workers' health and metrics addresses (LOCKERNET_WORKER_ADDRS)
	// [LOCKERNET_WORKER_ADDR and the port after it].
	Workers []string
	// TemporalShards is the Temporal server's history shard count (LOCKERNET_TEMPORAL_SHARDS)
	// [4]. It is fixed when Temporal's database is first created.
	TemporalShards int
	// TemporalDynamicConfig is the Temporal server's dynamic config file
	// (LOCKERNET_TEMPORAL_DYNAMIC_CONFIG) [docker/temporal/dynamicconfig/lockernet.yaml];
	// docker/temporal/dynamicconfig/stock.yaml is Temporal's own defaults (the bench compares them).
	TemporalDynamicConfig string
	Pools                 Pools
	// RepoDir holds docker/ (the dynamic config, the schema script and the nginx.conf compose
	// mounts) (LOCKERNET_REPO_DIR) [the checkout bin/dev was built in, else the working dir].
	RepoDir string
	// SchemaDir is Temporal's PostgreSQL schema of the pinned server version
	// (LOCKERNET_TEMPORAL_SCHEMA_DIR) [bin/dev/temporal-schema/postgresql/v12].
	SchemaDir string
}

// Pools are the Postgres connection pools of the cluster shape: each is an upper bound, and
// their sum stays under the server's max_connections (docs/scaling.md).
type Pools struct {
	// TemporalSQL and TemporalVisibility are the Temporal server's maxConns of its two
	// stores (LOCKERNET_TEMPORAL_SQL_MAX_CONNS [6], LOCKERNET_TEMPORAL_VIS_MAX_CONNS [2]).
	// Each of the server's four services (frontend, history, matching, worker) opens its own
	// pools, so the server holds up to 4 × (TemporalSQL + TemporalVisibility).
	TemporalSQL, TemporalVisibility int
	// APIServer and Worker are LOCKERNET_DB_MAX_CONNS of each apiserver and each worker
	// (LOCKERNET_APISERVER_DB_MAX_CONNS [12], LOCKERNET_WORKER_DB_MAX_CONNS [8]); an
	// apiserver holds one connection more, its LISTEN connection.
	APIServer, Worker int
}

// apiserverListenConns is the connection each apiserver takes out of its pool for good to
// LISTEN for gateway-request outcomes; the pool opens another in its place.
const apiserverListenConns = 1

// temporalServices is how many services the one Temporal server process runs, each with
// its own connection pools.
const temporalServices = 4

// Total is the most connections the shape can open: Temporal's pools, every apiserver's
// and worker's, and the dev stack's own.
func (p Pools) Total(apiservers, workers int, temporal bool) int {
	n := apiservers*(p.APIServer+apiserverListenConns) + workers*p.Worker + stackPoolSize
	if temporal {
		n += temporalServices * (p.TemporalSQL + p.TemporalVisibility)
	}
	return n
}

// LoadClusterSettings reads the cluster shape's settings from the environment.
func LoadClusterSettings() (ClusterSettings, error) {
	s, err := LoadSettings()
	if err != nil {
		return ClusterSettings{}, err
	}
	cs := ClusterSettings{Settings: s}
	cs.APIServers = envList("LOCKERNET_APISERVER_ADDRS", "127.0.0.1:8091,127.0.0.1:8092")
	host, port, err := splitHostPort(s.WorkerAddr)
	if err != nil {
		return ClusterSettings{}, fmt.Errorf("parse LOCKERNET_WORKER_ADDR: %w", err)
	}
	cs.Workers = envList("LOCKERNET_WORKER_ADDRS", s.WorkerAddr+","+net.JoinHostPort(host, strconv.Itoa(port+1)))
	ints := []struct {
		name string
		def  int
		dst  *int
	}{
		{"LOCKERNET_TEMPORAL_SHARDS", 4, &cs.TemporalShards},
		{"LOCKERNET_TEMPORAL_SQL_MAX_CONNS", 6, &cs.Pools.TemporalSQL},
		{"LOCKERNET_TEMPORAL_VIS_MAX_CONNS", 2, &cs.Pools.TemporalVisibility},
		{"LOCKERNET_APISERVER_DB_MAX_CONNS", 12, &cs.Pools.APIServer},
		{"LOCKERNET_WORKER_DB_MAX_CONNS", 8, &cs.Pools.Worker},
	}
	for _, v := range ints {
		*v.dst = v.def
		if raw := os.Getenv(v.name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				return ClusterSettings{}, fmt.Errorf("parse %s: must be a positive integer", v.name)
			}
			*v.dst = n
		}
	}
	if len(cs.APIServers) == 0 || len(cs.Workers) == 0 {
		return ClusterSettings{}, errors.New("LOCKERNET_APISERVER_ADDRS and LOCKERNET_WORKER_ADDRS need at least one address each")
	}
	for _, list := range [][]string{cs.APIServers, cs.Workers} {
		for _, a := range list {
			if _, _, err := splitHostPort(a); err != nil {
				return ClusterSettings{}, fmt.Errorf("parse LOCKERNET_APISERVER_ADDRS / LOCKERNET_WORKER_ADDRS: %q: %w", a, err)
			}
		}
	}
	if !cs.TemporalIsSet {
		if _, p, _ := splitHostPort(cs.TemporalAddress); p+10 > maxTemporalPort {
			// Temporal keeps its membership ports in a smallint column; above it, the server
			// dies at start with "out of range for type smallint".
			return ClusterSettings{}, fmt.Errorf("parse LOCKERNET_TEMPORAL_PORT: the Temporal server uses it and the ten ports after it, all at most %d", maxTemporalPort)
		}
	}
	cs.RepoDir = os.Getenv("LOCKERNET_REPO_DIR")
	cs.SchemaDir = os.Getenv("LOCKERNET_TEMPORAL_SCHEMA_DIR")
	cs.TemporalDynamicConfig = os.Getenv("LOCKERNET_TEMPORAL_DYNAMIC_CONFIG")
	return cs, nil
}

// temporalPorts are the Temporal server's ports, from its frontend port P: frontend P,
// history P+1, matching P+2, worker P+3, the four membership ports P+4..P+7 and the
// frontend's HTTP API P+10 (7233..7240 and 7243 by default).
type temporalPorts struct {
	frontend, history, matching, worker        int
	mFrontend, mHistory, mMatching, mWorker, h int
}

// maxTemporalPort is the highest port the Temporal server can record for its membership
// (cluster_membership.rpc_port is a smallint).
const maxTemporalPort = 32767

func newTemporalPorts(p int) temporalPorts {
	return temporalPorts{frontend: p, history: p + 1, matching: p + 2, worker: p + 3,
		mFrontend: p + 4, mHistory: p + 5, mMatching: p + 6, mWorker: p + 7, h: p + 10}
}

func (t temporalPorts) all() []int {
	return []int{t.frontend, t.history, t.matching, t.worker, t.mFrontend, t.mHistory, t.mMatching, t.mWorker, t.h}
}

// adminAddr is the internal listener (metrics, pprof) of the instance serving on addr:
// the same host, port + 100.
func adminAddr(addr string) string {
	host, port, _ := splitHostPort(addr)
	return net.JoinHostPort(host, strconv.Itoa(port+100))
}

// checkClusterPorts fails fast, naming the setting, when a port the shape needs is taken.
func checkClusterPorts(cs ClusterSettings) error {
	type want struct{ addr, setting string }
	wants := []want{{cs.APIAddr, "LOCKERNET_API_ADDR (nginx)"}, {cs.TowerSimAddr, "LOCKERNET_TOWERSIM_ADDR"}}
	for i, g := range cs.Gateways {
		n := strconv.Itoa(i + 1)
		wants = append(wants, want{g.Addr, "LOCKERNET_GW" + n + "_ADDR"}, want{g.SimAddr, "LOCKERNET_GW" + n + "_SIM_ADDR"})
	}
	for _, a := range cs.APIServers {
		wants = append(wants, want{a, "LOCKERNET_APISERVER_ADDRS"}, want{adminAddr(a), "LOCKERNET_APISERVER_ADDRS (admin listener: port + 100)"})
	}
	for _, a := range cs.Workers {
		wants = append(wants, want{a, "LOCKERNET_WORKER_ADDRS"}, want{adminAddr(a), "LOCKERNET_WORKER_ADDRS (admin listener: port + 100)"})
	}
	if !cs.TemporalIsSet {
		host, port, _ := splitHostPort(cs.TemporalAddress)
		for _, p := range newTemporalPorts(port).all() {
			wants = append(wants, want{net.JoinHostPort(host, strconv.Itoa(p)), "LOCKERNET_TEMPORAL_PORT (the Temporal server uses it and the ports up to +10)"})
		}
		wants = append(wants, want{net.JoinHostPort(host, strconv.Itoa(cs.TemporalUIPort)), "LOCKERNET_TEMPORAL_UI_PORT"})
	}
	seen := map[string]string{}
	for _, w := range wants {
		if prev, ok := seen[w.addr]; ok {
			return fmt.Errorf("port %s is given twice (%s and %s)", w.addr, prev, w.setting)
		}
		seen[w.addr] = w.setting
		ln, err := net.Listen("tcp", w.addr)
		if err != nil {
			return fmt.Errorf("port %s is in use (set %s to move it, or stop what holds it): %w", w.addr, w.setting, err)
		}
		ln.Close()
	}
	return nil
}

// RunCluster is `make run-cluster`: the production shape of docker/compose.yaml as separate
// processes. Postgres is found or provisioned as in make run; Temporal's databases
// <db>_temporal and <db>_temporal_visibility are created and upgraded by
// docker/temporal/setup-schema.sh with Temporal's own SQL tool; the official Temporal server
// runs as its own process with the dynamic config compose mounts; its Web UI is served by
// this process; N apiservers and M workers run behind nginx (configured from
// docker/nginx.conf); the gateways and the tower simulator as in make run. Every long-running
// child is supervised: if it dies it is restarted and the rest keeps running. It blocks
// until ctx is done, then stops everything.

func envList(name, def string) []string {
	raw := os.Getenv(name)
	if raw == "" {
		raw = def
	}
	var out []string
	for _, f := range strings.Split(raw, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
