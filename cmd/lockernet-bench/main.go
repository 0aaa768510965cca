// Command lockernet-bench drives a running Locker Network Service (the `make run` stack by
// default) and measures it: the tower flow under sustained load, expiry fidelity, location
// search over 100,000 locations, the gateway cloud API against the gateway's own local API,
// webhook deliveries to a local receiver, and the memory of the apiserver and the worker. It prints the figures and writes
// docs/benchmarks.md.
//
//	lockernet-bench [-scenarios footprint,proxy,tracing,search,flow,expiry,webhooks] [-out docs/benchmarks.md]
//
// The scenarios run in that order, whatever order -scenarios names them in.
//
// It reads the stack's credentials from $LOCKERNET_DATA_DIR/demo-credentials.json and works
// in an organization of its own ("Bench Load"), created on first run through DATABASE_URL and
// the master key, so the demo data is left as it was.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

type bench struct {
	temporal client.Client // nil when Temporal could not be reached
	api      *api
	store    *store.Store
	pool     *pgxpool.Pool
	data     dataset
	creds    *seed.Credentials
	cfg      config.Config
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lockernet-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	scenarios       map[string]bool
	out             string
	flowRate        float64
	flowDuration    time.Duration
	expiryN         int
	searchLocations int
	searchN         int
	proxyRate       float64
	proxyDuration   time.Duration
	webhookRate     float64
	webhookDuration time.Duration
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lockernet-bench", flag.ContinueOnError)
	scen := fs.String("scenarios", "footprint,proxy,tracing,search,flow,expiry,webhooks", "comma-separated scenarios to run")
	var o options
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "where to write the report (empty: print only)")
	fs.Float64Var(&o.flowRate, "flow-rate", 300, "tower flows per second")
	fs.DurationVar(&o.flowDuration, "flow-duration", 20*time.Second, "how long the flow load runs")
	fs.IntVar(&o.expiryN, "expiry-n", 10000, "reservations expiring together")
	fs.IntVar(&o.searchLocations, "search-locations", 100000, "generated locations to search")
	fs.IntVar(&o.searchN, "search-n", 2000, "searches of each kind")
	fs.Float64Var(&o.proxyRate, "proxy-rate", 50, "requests per second of the gateway proxy comparison")
	fs.DurationVar(&o.proxyDuration, "proxy-duration", 20*time.Second, "how long each proxy measurement runs")
	fs.Float64Var(&o.webhookRate, "webhook-rate", 50, "webhook test events recorded per second")
	fs.DurationVar(&o.webhookDuration, "webhook-duration", 20*time.Second, "how long webhook events are recorded")
	tracingOpts := tracingFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(*scen, ",") {
		o.scenarios[strings.TrimSpace(s)] = true
	}

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	creds, err := seed.ReadCredentials(filepath.Join(cfg.DataDir, seed.CredentialsFile))
	if err != nil || creds == nil {
		return fmt.Errorf("read %s (is make run up?): %v", filepath.Join(cfg.DataDir, seed.CredentialsFile), err)
	}
	keyFile := cfg.MasterKeyFile
	if cfg.MasterKey == "" && keyFile == "" {
		keyFile = filepath.Join(cfg.DataDir, "master.key")
	}
	ring, err := keyring.Load(cfg.MasterKey, keyFile)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: 8, AppName: "lockernet-bench"})
	if err != nil {
		return err
	}
	defer st.Close()
	logf("preparing the bench data (first run: %d search locations)", o.searchLocations)
	ds, err := prepare(ctx, st, ring, o.searchLocations)
	if err != nil {
		return err
	}
	b := &bench{api: newAPI(creds.APIURL, benchClientID, ds.clientSecret), store: st, pool: st.Pool(), data: ds, creds: creds, cfg: cfg}
	if tc, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNS,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}); err == nil {
		b.temporal = tc
		defer tc.Close()
	}
	rep := &report{started: time.Now(), args: args, options: o}

	// The apiserver's metrics are on its internal listener (make run: 127.0.0.1:8090).
	adminAddr := cfg.AdminAddr
	if adminAddr == "" {
		adminAddr = "127.0.0.1:8090"
	}
	metrics := map[string]string{"apiserver": "http://" + adminAddr + "/metrics", "worker": "http://" + cfg.WorkerAddr + "/metrics"}
	if o.scenarios["footprint"] {
		rep.idle = map[string]float64{}
		for name, u := range metrics {
			if v, err := rss(ctx, b.api, u); err == nil {
				rep.idle[name] = v
			}
		}
	}
	// The gateway proxy first: flow and expiry leave the embedded Temporal server busy with
	// thousands of workflows for minutes, which would measure that backlog instead.
	if o.scenarios["proxy"] {
		logf("proxy: %.0f requests/s for %s", o.proxyRate, o.proxyDuration)
		r, err := runProxy(ctx, b, o.proxyRate, o.proxyDuration)
		if err != nil {
			return err
		}
		rep.proxy = &r
	}
	if o.scenarios["tracing"] {
		logf("tracing: %.0f requests/s for %s, tracing off and on", o.proxyRate, o.proxyDuration)
		r, err := runTracing(ctx, b, o.proxyRate, o.proxyDuration, *tracingOpts)
		if err != nil {
			return err
		}
		rep.tracing = &r
	}
	if o.scenarios["search"] {
		logf("search: %d in-area and %d closest searches over %d locations", o.searchN, o.searchN, o.searchLocations)
		r, err := runSearch(ctx, b, o.searchN, o.searchLocations)
		if err != nil {
			return err
		}
		rep.search = &r
	}
	if o.scenarios["flow"] {
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("flow: %.0f flows/s for %s", o.flowRate, o.flowDuration)
		peak := map[string]float64{}
		sctx, cancel := context.WithCancel(ctx)
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
					for name, u := range metrics {
						if v, err := rss(sctx, b.api, u); err == nil && v > peak[name] {
							peak[name] = v
						}
					}
				}
			}
		}()
		r, err := runFlow(ctx, b, o.flowRate, o.flowDuration)
		cancel()
		if err != nil {
			return err
		}
		rep.flow, rep.loaded = &r, peak
	}
	if o.scenarios["expiry"] {
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("expiry: %d reservations expiring together", o.expiryN)
		r, err := runExpiry(ctx, b, o.expiryN)
		if err != nil {
			return err
		}
		rep.expiry = &r
	}
	if o.scenarios["webhooks"] {
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("webhooks: %.0f events/s for %s", o.webhookRate, o.webhookDuration)
		r, err := runWebhooks(ctx, b, o.webhookRate, o.webhookDuration)
		if err != nil {
			return err
		}
		rep.webhooks = &r
	}
	if err := resetBench(ctx, b.pool, ds.orgID); err != nil {
		return err
	}
	text := rep.markdown()
	fmt.Println(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// taskBacklog is the approximate number of tasks queued in Temporal on the workers' task
// queues (0 when it cannot be read).
func (b *bench) taskBacklog(ctx context.Context) int64 {
	if b.temporal == nil {
		return 0
	}
	var total int64
	for _, q := range []string{b.cfg.TaskQueue, b.cfg.GatewayTaskQueue} {
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			d, err := b.temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: b.cfg.TemporalNS, TaskQueue: &taskqueuepb.TaskQueue{Name: q}, TaskQueueType: typ, ReportStats: true})
			if err == nil && d.GetStats() != nil {
				total += d.GetStats().GetApproximateBacklogCount()
			}
		}
	}
	return total
}
