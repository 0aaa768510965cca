package devstack

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/lockernet/lockernet/internal/config"
)

// Settings of the dev stack beyond internal/config, with their defaults.
type Settings struct {
	config.Config
	TemporalPort   int    // LOCKERNET_TEMPORAL_PORT, 7233: the embedded server's frontend (TEMPORAL_ADDRESS unset)
	TemporalUIPort int    // LOCKERNET_TEMPORAL_UI_PORT, 8233
	TowerSimAddr   string // LOCKERNET_TOWERSIM_ADDR, 127.0.0.1:8070
	APIAdminAddr   string // LOCKERNET_ADMIN_ADDR, 127.0.0.1:8090: the apiserver's /metrics
	PrivatePGPort  int    // LOCKERNET_PG_PORT, 55433 (only for a private cluster)
	BinDir         string // where the sibling binaries are: the dev stack's own directory (bin/dev)
	Gateways       []GatewaySettings
	// OnReady, if set, is called once everything answers (tests).
	OnReady func()
}

// GatewaySettings place one simulated gateway.
type GatewaySettings struct {
	Serial string
	// Layout is the gateway's -layout: a preset or a layout JSON file (LOCKERNET_GW1_LAYOUT /
	// LOCKERNET_GW2_LAYOUT) [two-banks, one-bank]; the drills give each gateway more lockers.
	Layout  string
	Addr    string // LOCKERNET_GW1_ADDR / LOCKERNET_GW2_ADDR
	SimAddr string // LOCKERNET_GW1_SIM_ADDR / LOCKERNET_GW2_SIM_ADDR
	// KerongEmulator drives the gateway's banks through the Kerong driver over a
	// pseudo-terminal to the bus emulator (-kerong-emulator): GW-0002, unless
	// LOCKERNET_GW2_KERONG_EMULATOR=false puts it on the simulator.
	KerongEmulator bool
}

// LoadSettings reads the settings from the environment.
func LoadSettings() (Settings, error) {
	cfg, err := config.Load()
	if err != nil {
		return Settings{}, err
	}
	if os.Getenv("LOCKERNET_LOG_FORMAT") == "" {
		cfg.LogFormat = "text"
	}
	s := Settings{Config: cfg,
		TemporalPort:   envInt("LOCKERNET_TEMPORAL_PORT", 7233),
		TemporalUIPort: envInt("LOCKERNET_TEMPORAL_UI_PORT", 8233),
		TowerSimAddr:   envStr("LOCKERNET_TOWERSIM_ADDR", "127.0.0.1:8070"),
		APIAdminAddr:   envStr("LOCKERNET_ADMIN_ADDR", "127.0.0.1:8090"),
		PrivatePGPort:  envInt("LOCKERNET_PG_PORT", 55433),
		Gateways: []GatewaySettings{
			{Serial: "GW-0001", Layout: envStr("LOCKERNET_GW1_LAYOUT", "two-banks"), Addr: envStr("LOCKERNET_GW1_ADDR", "127.0.0.1:8101"), SimAddr: envStr("LOCKERNET_GW1_SIM_ADDR", "127.0.0.1:8201")},
			{Serial: "GW-0002", Layout: envStr("LOCKERNET_GW2_LAYOUT", "one-bank"), Addr: envStr("LOCKERNET_GW2_ADDR", "127.0.0.1:8102"), SimAddr: envStr("LOCKERNET_GW2_SIM_ADDR", "127.0.0.1:8202"),
				KerongEmulator: envStr("LOCKERNET_GW2_KERONG_EMULATOR", "true") == "true"},
		},
	}
	if !cfg.TemporalIsSet {
		// No cluster named: the embedded server listens here, and every child dials it.
		s.TemporalAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.TemporalPort))
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return Settings{}, fmt.Errorf("resolve LOCKERNET_DATA_DIR: %w", err)
	}
	s.DataDir = dir
	return s, nil
}

// checkPorts fails fast, naming the setting, when a port the stack needs is taken.
func checkPorts(s Settings) error {
	type want struct{ addr, setting string }
	wants := []want{{s.APIAddr, "LOCKERNET_API_ADDR"}, {s.WorkerAddr, "LOCKERNET_WORKER_ADDR"}, {s.TowerSimAddr, "LOCKERNET_TOWERSIM_ADDR"}}
	for i, g := range s.Gateways {
		n := strconv.Itoa(i + 1)
		wants = append(wants, want{g.Addr, "LOCKERNET_GW" + n + "_ADDR"}, want{g.SimAddr, "LOCKERNET_GW" + n + "_SIM_ADDR"})
	}
	if !s.TemporalIsSet {
		host, _, _ := splitHostPort(s.TemporalAddress)
		wants = append(wants, want{s.TemporalAddress, "LOCKERNET_TEMPORAL_PORT (embedded server)"},
			want{net.JoinHostPort(host, strconv.Itoa(s.TemporalUIPort)), "LOCKERNET_TEMPORAL_UI_PORT"})
	}
	for _, w := range wants {
		ln, err := net.Listen("tcp", w.addr)
		if err != nil {
			return fmt.Errorf("port %s is in use (set %s to move it, or stop what holds it): %w", w.addr, w.setting, err)
		}
		ln.Close()
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
