// Package bench is the load tool of the Locker Network Service (make bench,
// internal/dev/cmd/lockernet-bench): it measures the service in both of its shapes, the
// running `make run` stack and the cluster shape of `make run-cluster`, which it starts itself
// (bin/dev/devstack -cluster, on a database, data dir and ports of its own) and stops
// afterwards. On each it measures the gateway cloud API against the gateway's own local API,
// the cost of tracing, location search over 100,000 locations, Temporal's own capacity (a
// bare workflow started eagerly), the tower flow rate the system sustains, expiry fidelity,
// webhook deliveries to a local receiver, and the memory of the apiservers and workers; it
// counts every 5xx answer. Run prints one report with a section per shape and writes
// docs/benchmarks.md.
//
// The scenarios run in a fixed order (scenarioOrder), whatever order -scenarios names them in.
//
// It reads the stack's credentials from $LOCKERNET_DATA_DIR/demo-credentials.json and works
// in an organization of its own ("Bench Load"), created on first run through DATABASE_URL and
// the master key, so the demo data is left as it was.
//
// The files go by job: run.go (settings, Run, the scenarios in turn), shape.go (the two
// shapes), data.go (the bench data), client.go (the bench's API client), one file per
// scenario, stats.go (latency summaries) and report.go (the report).
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	"github.com/lockernet/lockernet/workflows/contract"
)

type bench struct {
	shape    shape
	temporal client.Client // nil when Temporal could not be reached
	api      *api
	store    *store.Store
	pool     *pgxpool.Pool
	data     dataset
	creds    *seed.Credentials
	cfg      config.Config
	// metrics are the Prometheus endpoints of the shape's apiservers and workers, by process.
	metrics map[string]string
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

type options struct {
	shapes          map[string]bool
	scenarios       map[string]bool
	out             string
	step            time.Duration
	flowRates       []float64
	temporalRates   []float64
	proxyRates      []float64
	webhookRates    []float64
	refine          float64
	expiryN         int
	windowsN        int
	searchLocations int
	searchN         int
	proxyRate       float64
	proxyDuration   time.Duration
	webhookRate     float64
	webhookDuration time.Duration
	tracing         *tracingOptions
	cluster         clusterOptions
	engine          []string
	engineRates     []float64
	engineProfiles  string
}

// scenarioOrder is the order the scenarios run in on each shape: the gateway proxy first,
// since flow and expiry leave thousands of workflows behind for minutes, which would be
// measured instead; Temporal's own capacity last, because it drives the server past its
// knee, and a server past its knee works off internal queues (history transfer and
// visibility tasks) for minutes after its task queues look empty — a first run with it
// before the tower flow measured that backlog as the flow's. Measured last, it may share
// the server with timers the flow and expiry scenarios left, so its figure is a lower bound.
var scenarioOrder = []string{"footprint", "proxy", "tracing", "search", "flow", "expiry", "windows", "webhooks", "webhook-rates", "proxy-rates", "temporal", "temporal-delivery", "temporal-flow"}

// Settings are what the command line chose (RegisterFlags names them all).
type Settings struct {
	// Args are the command's arguments, for the report.
	Args []string

	shapes, scenarios, flowRates, temporalRates, proxyRates, webhookRates string
	engine, engineRates, engineServe                                      string
	o                                                                     options
}

// RegisterFlags defines the command's flags on fs, each filling s.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.shapes, "shapes", "run,cluster", "shapes to measure: run (the running make run stack), cluster (a make run-cluster shape the bench starts and stops)")
	fs.StringVar(&s.scenarios, "scenarios", strings.Join(scenarioOrder, ","), "comma-separated scenarios to run on each shape")
	o := &s.o
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "where to write the report (empty: print only)")
	fs.DurationVar(&o.step, "step", time.Minute, "how long each offered rate of the flow and temporal scenarios runs (the sustained criterion needs ≥ 60s)")
	fs.StringVar(&s.flowRates, "flow-rates", "10,25,50,100,150,200,300", "tower flows per second offered, one step each, until one is not sustained")
	fs.StringVar(&s.temporalRates, "temporal-rates", "25,50,100,150,200,300", "bare workflow starts per second offered, one step each, until Temporal falls behind")
	fs.StringVar(&s.webhookRates, "webhook-rates", "25,50,75,100,150", "webhook events per second offered by the webhook-rates scenario, one step each, until one is not sustained")
	fs.StringVar(&s.proxyRates, "proxy-rates", "25,50,75,100,150,200", "gateway cloud API reads per second offered, one step each, until one is not sustained")
	fs.Float64Var(&o.refine, "refine", 0.1, "after the first flow or temporal rate not held, halve the gap between the highest rate held and the lowest not held until they are within this fraction of each other (0: stop at the first not held)")
	fs.IntVar(&o.expiryN, "expiry-n", 10000, "reservations expiring together")
	fs.IntVar(&o.windowsN, "windows-n", 10000, "pickup windows running out together")
	fs.IntVar(&o.searchLocations, "search-locations", 100000, "generated locations to search")
	fs.IntVar(&o.searchN, "search-n", 2000, "searches of each kind")
	fs.Float64Var(&o.proxyRate, "proxy-rate", 50, "requests per second of the gateway proxy comparison")
	fs.DurationVar(&o.proxyDuration, "proxy-duration", 20*time.Second, "how long each proxy measurement runs")
	fs.Float64Var(&o.webhookRate, "webhook-rate", 50, "webhook test events recorded per second")
	fs.DurationVar(&o.webhookDuration, "webhook-duration", 20*time.Second, "how long webhook events are recorded")
	o.tracing = tracingFlags(fs)
	clusterFlags(fs, &o.cluster)
	fs.StringVar(&s.engine, "engine", "", "before the shapes, measure Temporal's own dev server with these settings variants, each on a fresh server of its own "+
		"(stock, ours, ours-4-shards, ours-checkpoint-10k, ours-sync-normal; empty: none); with -shapes \"\" only this")
	fs.StringVar(&s.engineRates, "engine-rates", "30,45,60,90,120", "bare workflow starts per second offered to each engine variant")
	fs.StringVar(&o.engineProfiles, "engine-profiles", "bin/dev/engine-profiles", "where the engine variants' CPU profiles are written")
	fs.StringVar(&s.engineServe, "engine-serve", "", "(internal) run one engine variant's server: name,dir,port,pprofport")
}

// Run measures the chosen shapes, prints the report and writes it to -out.
func Run(ctx context.Context, s Settings) error {
	if s.engineServe != "" {
		return serveEngine(s.engineServe)
	}
	o, args := s.o, s.Args
	o.shapes, o.scenarios = csvSet(s.shapes), csvSet(s.scenarios)
	for s := range o.shapes {
		if s != runShape.key && s != clusterShape.key {
			return fmt.Errorf("-shapes: %q is not run or cluster", s)
		}
	}
	var err error
	if o.flowRates, err = rates(s.flowRates); err != nil {
		return fmt.Errorf("-flow-rates: %w", err)
	}
	if o.temporalRates, err = rates(s.temporalRates); err != nil {
		return fmt.Errorf("-temporal-rates: %w", err)
	}
	if o.proxyRates, err = rates(s.proxyRates); err != nil {
		return fmt.Errorf("-proxy-rates: %w", err)
	}
	if o.webhookRates, err = rates(s.webhookRates); err != nil {
		return fmt.Errorf("-webhook-rates: %w", err)
	}
	if o.engineRates, err = rates(s.engineRates); err != nil {
		return fmt.Errorf("-engine-rates: %w", err)
	}
	for _, v := range strings.Split(s.engine, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if _, ok := engineVariantNamed(v); !ok {
			return fmt.Errorf("-engine: no variant %q", v)
		}
		o.engine = append(o.engine, v)
	}
	if o.step <= 0 {
		return errors.New("-step must be positive")
	}
	if o.refine < 0 || o.refine >= 1 {
		return errors.New("-refine must be in [0, 1)")
	}

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if !cfg.TemporalIsSet && os.Getenv("LOCKERNET_TEMPORAL_PORT") != "" {
		// make run's embedded server moved off its default port, as the dev stack reads it.
		cfg.TemporalAddress = "127.0.0.1:" + os.Getenv("LOCKERNET_TEMPORAL_PORT")
	}
	rep := &report{started: time.Now(), args: args, options: o}
	// Temporal alone first, on servers of its own, while nothing else runs.
	if len(o.engine) > 0 {
		if rep.engine, err = runEngine(ctx, o.engine, o.engineRates, o.refine, o.step, o.engineProfiles); err != nil {
			return err
		}
	}
	runMetrics := map[string]string{"apiserver": "http://" + runAdminAddr(cfg) + "/metrics", "worker": "http://" + cfg.WorkerAddr + "/metrics"}
	if o.shapes[runShape.key] {
		// Checked first, so a missing make run stack is found before the cluster's minutes.
		if _, err := readCredentials(cfg); err != nil {
			return err
		}
	}
	// The cluster shape is measured first and stopped before make run's turn: the workflows
	// a shape's flow leaves behind fire their timers for ten minutes after it, and make run's
	// would run on the same cores while the cluster is measured (make run stays up, idle,
	// meanwhile; the cluster is gone once its turn is over).
	if o.shapes[clusterShape.key] {
		rep.shapes = append(rep.shapes, measureCluster(ctx, cfg, o))
	}
	if o.shapes[runShape.key] {
		rep.shapes = append(rep.shapes, measureShape(ctx, runShape, cfg, runMetrics, o))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(rep.shapes, func(a, b *shapeReport) int { return a.shape.order - b.shape.order })
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

func csvSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out[v] = true
		}
	}
	return out
}

// rates parses an increasing list of positive rates ("50,100,150").
func rates(s string) ([]float64, error) {
	var out []float64
	for _, v := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", v)
		}
		if len(out) > 0 && f <= out[len(out)-1] {
			return nil, fmt.Errorf("rates must increase: %v then %v", out[len(out)-1], f)
		}
		out = append(out, f)
	}
	return out, nil
}

// runAdminAddr is the make run apiserver's internal listener (make run: 127.0.0.1:8090).
func runAdminAddr(cfg config.Config) string {
	if cfg.AdminAddr != "" {
		return cfg.AdminAddr
	}
	return "127.0.0.1:8090"
}

func readCredentials(cfg config.Config) (*seed.Credentials, error) {
	path := filepath.Join(cfg.DataDir, seed.CredentialsFile)
	creds, err := seed.ReadCredentials(path)
	if err != nil || creds == nil {
		return nil, fmt.Errorf("read %s (is make run up?): %v", path, err)
	}
	return creds, nil
}

// measureShape runs the scenarios against one running shape. A scenario that fails is
// reported as failed, and the others still run.
func measureShape(ctx context.Context, sh shape, cfg config.Config, metrics map[string]string, o options) *shapeReport {
	sr := &shapeReport{shape: sh, serverErrors: map[string]map[int]int{}, failed: map[string]string{}}
	b, closeBench, err := openBench(ctx, sh, cfg, metrics, o)
	if err != nil {
		sr.err = err.Error()
		logf("%s: %v", sh.key, err)
		return sr
	}
	defer closeBench()
	for _, name := range scenarioOrder {
		if !o.scenarios[name] || ctx.Err() != nil {
			continue
		}
		before := b.api.statusCounts()
		if err := runScenario(ctx, b, name, o, sr); err != nil {
			sr.failed[name] = err.Error()
			logf("%s: %s failed: %v", sh.key, name, err)
		}
		sr.ran = append(sr.ran, name)
		sr.serverErrors[name] = b.api.serverErrorsSince(before)
	}
	if err := resetBench(context.WithoutCancel(ctx), b.pool, b.data.orgID); err != nil {
		logf("%s: %v", sh.key, err)
	}
	return sr
}

// openBench connects to a running shape and prepares the bench data in it.
func openBench(ctx context.Context, sh shape, cfg config.Config, metrics map[string]string, o options) (*bench, func(), error) {
	creds, err := readCredentials(cfg)
	if err != nil {
		return nil, nil, err
	}
	keyFile := cfg.MasterKeyFile
	if cfg.MasterKey == "" && keyFile == "" {
		keyFile = filepath.Join(cfg.DataDir, "master.key")
	}
	ring, err := keyring.Load(cfg.MasterKey, keyFile)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: 8, AppName: "lockernet-bench"})
	if err != nil {
		return nil, nil, err
	}
	logf("%s: preparing the bench data (first run: %d search locations)", sh.key, o.searchLocations)
	ds, err := prepare(ctx, st, ring, o.searchLocations, flowLocationsFor(o))
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	// Writing the data (100,000 locations on a first run) leaves dirty pages that a later
	// checkpoint would flush in the middle of a measurement, slowing every commit there:
	// flush them now. (Needs a superuser, as in development; without one, nothing is done.)
	if _, err := st.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
		logf("%s: CHECKPOINT after preparing the data: %v (measuring anyway)", sh.key, err)
	}
	b := &bench{shape: sh, api: newAPI(creds.APIURL, benchClientID, ds.clientSecret), store: st, pool: st.Pool(), data: ds,
		creds: creds, cfg: cfg, metrics: metrics}
	if tc, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNS,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}); err == nil {
		b.temporal = tc
	}
	return b, func() {
		if b.temporal != nil {
			b.temporal.Close()
		}
		st.Close()
	}, nil
}

// runScenario runs one scenario on the shape and keeps its result in sr.
func runScenario(ctx context.Context, b *bench, name string, o options, sr *shapeReport) error {
	switch name {
	case "footprint":
		sr.idle = map[string]float64{}
		for proc, u := range b.metrics {
			if v, err := rss(ctx, b.api, u); err == nil {
				sr.idle[proc] = v
			}
		}
	case "proxy":
		logf("%s: proxy: %.0f requests/s for %s", b.shape.key, o.proxyRate, o.proxyDuration)
		r, err := runProxy(ctx, b, o.proxyRate, o.proxyDuration)
		if err != nil {
			return err
		}
		sr.proxy = &r
	case "proxy-rates":
		waitForQuiet(ctx, b, 10*time.Minute)
		r, err := runProxyRates(ctx, b, o.proxyRates, o.step)
		if err := keepSteps(&sr.proxyRates, r, len(r.Steps), err); err != nil {
			return err
		}
	case "tracing":
		logf("%s: tracing: %.0f requests/s for %s, tracing off and on", b.shape.key, o.proxyRate, o.proxyDuration)
		r, err := runTracing(ctx, b, o.proxyRate, o.proxyDuration, *o.tracing)
		if err != nil {
			return err
		}
		sr.tracing = &r
	case "search":
		logf("%s: search: %d in-area and %d closest searches over %d locations", b.shape.key, o.searchN, o.searchN, o.searchLocations)
		r, err := runSearch(ctx, b, o.searchN, o.searchLocations)
		if err != nil {
			return err
		}
		sr.search = &r
	case "temporal":
		waitForQuiet(ctx, b, 10*time.Minute)
		r, err := runBare(ctx, b, newLadder(o.temporalRates, o.refine), o.step)
		if err := keepSteps(&sr.temporal, r, len(r.Steps), err); err != nil {
			return err
		}
	case "temporal-delivery":
		r, err := runShaped(ctx, b, shapeDelivery, newLadder(o.temporalRates, o.refine), o.step)
		if err := keepSteps(&sr.temporalDelivery, r, len(r.Steps), err); err != nil {
			return err
		}
	case "temporal-flow":
		r, err := runShaped(ctx, b, shapeFlow, newLadder(o.flowRates, o.refine), o.step)
		if err := keepSteps(&sr.temporalFlow, r, len(r.Steps), err); err != nil {
			return err
		}
	case "webhook-rates":
		r, err := runWebhookRates(ctx, b, newLadder(o.webhookRates, o.refine), o.step)
		if err := keepSteps(&sr.webhookRates, r, len(r.Steps), err); err != nil {
			return err
		}
	case "flow":
		waitForQuiet(ctx, b, 10*time.Minute)
		sctx, cancel := context.WithCancel(ctx)
		peak := map[string]float64{}
		var mu sync.Mutex
		go samplePeakRSS(sctx, b, peak, &mu)
		r, err := runFlowSteps(ctx, b, newLadder(o.flowRates, o.refine), o.step)
		cancel()
		mu.Lock()
		sr.flow, sr.loaded = &r, maps.Clone(peak)
		mu.Unlock()
		if err != nil {
			return err
		}
	case "expiry":
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("%s: expiry: %d reservations expiring together", b.shape.key, o.expiryN)
		r, err := runExpiry(ctx, b, o.expiryN)
		if err != nil {
			return err
		}
		sr.expiry = &r
	case "windows":
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("%s: pickup windows: %d running out together", b.shape.key, o.windowsN)
		r, err := runWindows(ctx, b, o.windowsN)
		if err != nil {
			return err
		}
		sr.windows = &r
	case "webhooks":
		waitForQuiet(ctx, b, 10*time.Minute)
		logf("%s: webhooks: %.0f events/s for %s", b.shape.key, o.webhookRate, o.webhookDuration)
		r, err := runWebhooks(ctx, b, o.webhookRate, o.webhookDuration)
		if err != nil {
			return err
		}
		sr.webhooks = &r
	}
	return nil
}

// runShaped is the temporal scenario on the shape's server with the workflows started in
// the given shape (shapeDelivery, shapeFlow), from a quiet system.
func runShaped(ctx context.Context, b *bench, shape string, l *ladder, d time.Duration) (bareResult, error) {
	waitForQuiet(ctx, b, 10*time.Minute)
	return runBareOn(ctx, bareTarget{key: b.shape.key, address: b.cfg.TemporalAddress, namespace: b.cfg.TemporalNS,
		quiet: func(ctx context.Context) { waitForQuiet(ctx, b, 10*time.Minute) }, shape: shape}, l, d)
}

// samplePeakRSS keeps, every second until ctx is done, the highest resident memory each
// process of the shape reached.
func samplePeakRSS(ctx context.Context, b *bench, peak map[string]float64, mu *sync.Mutex) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for proc, u := range b.metrics {
				if v, err := rss(ctx, b.api, u); err == nil {
					mu.Lock()
					peak[proc] = max(peak[proc], v)
					mu.Unlock()
				}
			}
		}
	}
}

// taskBacklog is the approximate number of tasks queued in Temporal on the workers' task
// queues (0 when it cannot be read).
func (b *bench) taskBacklog(ctx context.Context) int64 {
	if b.temporal == nil {
		return 0
	}
	var total int64
	for _, q := range []string{b.cfg.TaskQueue, b.cfg.GatewayTaskQueue, bareQueue, shapeQueue} {
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

// shortLivedQuery selects the running workflows that a step leaves behind and that end in
// seconds when the system keeps up: gateway requests and the bench's own.
const shortLivedQuery = `ExecutionStatus = 'Running' AND WorkflowType IN ('` + contract.GatewayRequestWorkflowName +
	`', 'BenchBare', 'BenchActivityShape', 'BenchDeliveryShape')`

// shortLivedRunning counts them (0 when Temporal cannot say).
func (b *bench) shortLivedRunning(ctx context.Context) int64 {
	if b.temporal == nil {
		return 0
	}
	r, err := b.temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: b.cfg.TemporalNS, Query: shortLivedQuery})
	if err != nil {
		return 0
	}
	return r.GetCount()
}

// keepSteps keeps a ladder scenario's result r in *dst when it has a step to report (one
// that failed part-way still reports the steps it ran), and passes its error on.
func keepSteps[T any](dst **T, r T, steps int, err error) error {
	if steps > 0 {
		*dst = &r
	}
	return err
}
