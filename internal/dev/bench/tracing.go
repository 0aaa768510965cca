package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/telemetry/otlptest"
)

// The tracing scenario measures what OpenTelemetry tracing costs on the gateway proxy path:
// the same cloud locker read and open, through an apiserver and a gateway of its own
// (started from bin/dev against the running stack's Postgres and Temporal), once with
// tracing off and once with every request traced (always_on) and exported over OTLP/HTTP
// to a receiver in this process, alternating the two for -tracing-rounds rounds.
const (
	tracingGateway  = "GW-BENCH-TRACE"
	tracingLocation = "Bench Tracing"
	tracingQueue    = "lockernet-bench-tracing"
)

// tracingResult is the comparison the report prints.
type tracingResult struct {
	Rate     float64
	Duration time.Duration
	Rounds   int
	// Summaries by configuration ("off", "on") and operation ("read", "open").
	Off, On map[string]summary
	// CPU is the CPU time the apiserver and the gateway used per request, by configuration.
	CPU map[string]map[string]time.Duration
	// Spans and export bytes received while tracing was on.
	ExportRequests int
	ExportBytes    int64
}

type tracingConfig struct {
	name string
	env  []string
}

// tracingOptions are the scenario's flags.
type tracingOptions struct {
	rounds int
	binDir string
}

func tracingFlags(fs *flag.FlagSet) *tracingOptions {
	o := &tracingOptions{}
	fs.IntVar(&o.rounds, "tracing-rounds", 2, "rounds of tracing off then on (each -proxy-duration per operation)")
	fs.StringVar(&o.binDir, "bin-dir", "bin/dev", "where the tracing scenario finds the apiserver and gateway binaries")
	return o
}

func runTracing(ctx context.Context, b *bench, rate float64, d time.Duration, o tracingOptions) (tracingResult, error) {
	rounds, binDir := o.rounds, o.binDir
	for _, bin := range []string{"apiserver", "gateway"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			return tracingResult{}, fmt.Errorf("the tracing scenario runs %s/%s (make dev-build): %w", binDir, bin, err)
		}
	}
	// The processes it starts use the stack's database, Temporal and master key.
	keyFile := b.cfg.MasterKeyFile
	if b.cfg.MasterKey == "" && keyFile == "" {
		keyFile = filepath.Join(b.cfg.DataDir, "master.key")
	}
	ring, err := keyring.Load(b.cfg.MasterKey, keyFile)
	if err != nil {
		return tracingResult{}, err
	}
	stack := []string{"DATABASE_URL=" + b.cfg.DatabaseURL, "TEMPORAL_ADDRESS=" + b.cfg.TemporalAddress,
		"TEMPORAL_NAMESPACE=" + b.cfg.TemporalNS, "LOCKERNET_MASTER_KEY=" + b.cfg.MasterKey}
	if keyFile != "" {
		if keyFile, err = filepath.Abs(keyFile); err != nil {
			return tracingResult{}, err
		}
		stack = append(stack, "LOCKERNET_MASTER_KEY_FILE="+keyFile)
	}
	recv, err := otlptest.Start(true)
	if err != nil {
		return tracingResult{}, err
	}
	defer recv.Close()
	loc, err := tracingLocationID(ctx, b)
	if err != nil {
		return tracingResult{}, err
	}
	key, k, err := b.store.IssueGatewayKey(ctx, b.data.orgID, "load tool tracing", ptr(1_000_000))
	if err != nil {
		return tracingResult{}, fmt.Errorf("issue a bench gateway key: %w", err)
	}
	defer func() { _, _ = b.store.RevokeGatewayKey(context.WithoutCancel(ctx), k.ID) }()
	// Disabled afterwards, so the stack's gateway sync stops checking a gateway that is gone.
	defer func() {
		_, _ = b.pool.Exec(context.WithoutCancel(ctx), `UPDATE gateways SET disabled_at = now() WHERE serial = $1`, tracingGateway)
	}()

	configs := []tracingConfig{
		{name: "off", env: stack},
		{name: "on", env: append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_TRACES_SAMPLER=always_on"}, stack...)},
	}
	res := tracingResult{Rate: rate, Duration: d, Rounds: rounds, Off: map[string]summary{}, On: map[string]summary{},
		CPU: map[string]map[string]time.Duration{"off": {}, "on": {}}}
	samples := map[string]map[string]*sample{}
	counts := map[string]int{}
	for _, c := range configs {
		samples[c.name] = map[string]*sample{
			"read": newSample("locker read, tracing " + c.name),
			"open": newSample("locker open, tracing " + c.name),
		}
	}
	for round := 1; round <= rounds; round++ {
		for _, c := range configs {
			logf("tracing: round %d/%d, tracing %s", round, rounds, c.name)
			cpu, n, err := tracingPhase(ctx, b, ring, c, loc, key, rate, d, binDir, samples[c.name])
			if err != nil {
				return tracingResult{}, err
			}
			counts[c.name] += n
			for proc, t := range cpu {
				res.CPU[c.name][proc] += t
			}
		}
	}
	for _, c := range configs {
		dst := res.Off
		if c.name == "on" {
			dst = res.On
		}
		for op, s := range samples[c.name] {
			if dst[op] = s.summary(); dst[op].Count == 0 {
				return tracingResult{}, fmt.Errorf("tracing %s: every %s failed", c.name, op)
			}
		}
		for proc, t := range res.CPU[c.name] {
			if counts[c.name] > 0 {
				res.CPU[c.name][proc] = t / time.Duration(counts[c.name])
			}
		}
	}
	res.ExportRequests, res.ExportBytes = recv.Counts()
	if res.ExportRequests == 0 {
		return res, errors.New("tracing on exported nothing to the receiver")
	}
	return res, nil
}

// tracingPhase starts a gateway and an apiserver with the configuration's environment,
// measures the read and the open at rate for d each, and stops them. It returns the CPU
// time each process used and how many requests were sent.
func tracingPhase(ctx context.Context, b *bench, ring *keyring.Keyring, c tracingConfig, loc int64, key string, rate float64, d time.Duration,
	binDir string, samples map[string]*sample) (map[string]time.Duration, int, error) {
	dir, err := os.MkdirTemp("", "lockernet-bench-tracing-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	env := baseEnv(c.env)
	secret := credential.NewSecret()
	gwAddr, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	gw, err := startChild(ctx, filepath.Join(binDir, "gateway"), []string{"-simulated", "-id", tracingGateway, "-addr", gwAddr,
		"-layout", "one-bank", "-secret", secret, "-db", filepath.Join(dir, "gateway.db"), "-log-level", "warn"},
		env, "http://"+gwAddr+"/healthz")
	if err != nil {
		return nil, 0, err
	}
	defer gw.stop()
	locker, err := firstLocker(ctx, b, seed.GatewayRef{Serial: tracingGateway, URL: "http://" + gwAddr, Secret: secret})
	if err != nil {
		return nil, 0, err
	}
	if _, err := b.store.UpsertGateway(ctx, store.NewGateway{Serial: tracingGateway, LocationID: loc, BaseURL: "http://" + gwAddr,
		SecretSealed: ring.Seal(keyring.GatewaySecretPurpose(tracingGateway), []byte(secret))}); err != nil {
		return nil, 0, fmt.Errorf("register the tracing gateway: %w", err)
	}
	apiAddr, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	api, err := startChild(ctx, filepath.Join(binDir, "apiserver"), nil, append(env,
		"LOCKERNET_API_ADDR="+apiAddr, "LOCKERNET_API_GATEWAY_WORKER=true", "LOCKERNET_GATEWAY_TASK_QUEUE="+tracingQueue,
		"LOCKERNET_AUTO_MIGRATE=false", "LOCKERNET_DB_MAX_CONNS=8", "LOCKERNET_DEBUG_ADDR=", "LOCKERNET_ADMIN_ADDR=", "LOCKERNET_LOG_LEVEL=warn"),
		"http://"+apiAddr+"/readyz")
	if err != nil {
		return nil, 0, err
	}
	defer api.stop()

	base := fmt.Sprintf("http://%s/api/customer/v1/locations/%d/lockers/%d", apiAddr, loc, locker)
	h := map[string]string{"X-API-Key": key}
	// A few calls first, so connections, caches and the worker's sticky workflows are warm.
	for range 5 {
		if _, err := b.api.do(ctx, http.MethodGet, base, h, nil); err != nil {
			return nil, 0, fmt.Errorf("warm up the tracing apiserver: %w", err)
		}
	}
	cpuBefore := map[string]time.Duration{"apiserver": api.cpu(), "gateway": gw.cpu()}
	sent := 0
	for _, op := range []struct{ name, method, url string }{
		{"read", http.MethodGet, base},
		{"open", http.MethodPost, base + "/open"},
	} {
		s := samples[op.name]
		n, _ := loadclient.OpenLoop(ctx, rate, d, 256, func(ctx context.Context, _ int, scheduled time.Time) {
			r, err := b.api.do(ctx, op.method, op.url, h, nil)
			if err != nil || r.status != http.StatusOK {
				s.fail()
				return
			}
			s.add(time.Since(scheduled))
		})
		sent += n
	}
	cpu := map[string]time.Duration{"apiserver": api.cpu() - cpuBefore["apiserver"], "gateway": gw.cpu() - cpuBefore["gateway"]}
	return cpu, sent, ctx.Err()
}

// tracingLocationID returns (creating it once) the bench organization's location of the
// tracing gateway.
func tracingLocationID(ctx context.Context, b *bench) (int64, error) {
	id, err := b.store.UpsertLocation(ctx, store.NewLocation{OrganizationID: b.data.orgID, Name: tracingLocation,
		Lat: 34.0, Lon: -118.3, Address1: "1 Trace St", City: "Benchville", State: "CA", Zip: "90000", Country: "US"})
	if err != nil {
		return 0, fmt.Errorf("create the tracing location: %w", err)
	}
	return id, nil
}

// baseEnv is this process's environment without any OTEL_ setting (tracing off means off),
// plus extra.
func baseEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(ctx context.Context, bin string, args, env []string, health string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("%s exited before it was ready", bin)
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("%s not ready at %s within a minute", bin, health)
		}
	}
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// cpu is the user and system CPU time the process has used so far (from /proc).
func (c *child) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tracingMarkdown writes the tracing section of the report.
func (r *tracingResult) markdown(w writer) {
	w("### Tracing overhead on the gateway proxy")
	w("")
	w("The gateway cloud API's locker read and locker open at %.0f requests/s for %s each, through an apiserver (with its own "+
		"gateway-request worker: each request's workflow starts eagerly and runs its send there) and a one-bank gateway started for this scenario, with OpenTelemetry tracing off "+
		"and on (every request sampled, OTLP/HTTP export to a receiver in the load tool), alternating for %d round(s). "+
		"Latency from the scheduled start (open loop).", r.Rate, r.Duration, r.Rounds)
	w("")
	w(summaryHeader)
	for _, op := range []string{"read", "open"} {
		w(r.Off[op].row())
		w(r.On[op].row())
	}
	w("")
	w("| operation | p50 added by tracing | p99 added by tracing |")
	w("|---|---|---|")
	for _, op := range []string{"read", "open"} {
		w("| locker %s | %s | %s |", op, ms(r.On[op].P50-r.Off[op].P50), ms(r.On[op].P99-r.Off[op].P99))
	}
	w("")
	w("CPU per request: apiserver %s off, %s on; gateway %s off, %s on. Export: %d OTLP requests, %.1f KiB.",
		ms(r.CPU["off"]["apiserver"]), ms(r.CPU["on"]["apiserver"]), ms(r.CPU["off"]["gateway"]), ms(r.CPU["on"]["gateway"]),
		r.ExportRequests, float64(r.ExportBytes)/1024)
	w("")
}
