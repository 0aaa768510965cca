package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/seed"
)

// proxyResult compares the gateway cloud API with the gateway's own local API.
type proxyResult struct {
	Rate                     float64
	Duration                 time.Duration
	Gateway                  string
	DirectRead, CloudRead    summary
	DirectOpen, CloudOpen    summary
	ReadAdded50, ReadAdded99 time.Duration
	OpenAdded50, OpenAdded99 time.Duration
	// Phases are the apiserver's own phases of the cloud calls (Server-Timing), by operation.
	Phases map[string][]summary
	// Floors are the round trips a cloud call adds, each alone at the same rate on the same
	// machine: an HTTP exchange with the apiserver that does no work, a Postgres round trip,
	// and a Postgres commit that waits for its WAL flush.
	Floors []summary
	// FloorFor is how long each floor was measured.
	FloorFor time.Duration
	// Bare is a bare workflow started eagerly on the same Temporal server at the same rate
	// for as long, right after the cloud calls (the engine's floor under every cloud call:
	// each is a workflow, decision 0012); zero Count when it could not be measured.
	Bare summary
	// Shape is the engine's floor of a gateway request's own shape on the same server at the
	// same rate: a workflow started eagerly, timed until its one regular activity runs
	// (measureActivityShape); zero Count when it could not be measured.
	Shape summary
}

// The added-latency targets (decision 0018's issue: a gateway request at the cost of one bare
// workflow): at most the bare eager start plus this much, at p50 and at p99.
const (
	addedOverBare50 = 4 * time.Millisecond
	addedOverBare99 = 15 * time.Millisecond
)

// met reports whether an operation's added latency is within the targets over the bare start.
func (p *proxyResult) met(added50, added99 time.Duration) bool {
	return p.Bare.Count > 0 && added50 <= p.Bare.P50+addedOverBare50 && added99 <= p.Bare.P99+addedOverBare99
}

// The floors' names, in the order they are measured.
const (
	floorHTTP   = "HTTP exchange with the apiserver (GET /healthz)"
	floorPG     = "Postgres round trip (SELECT 1)"
	floorCommit = "Postgres commit with its WAL flush (one WAL record)"
)

// phaseNames are the Server-Timing phases of a proxied call, in the order they happen.
var phaseNames = []string{"auth", "store", "start", "wait", "query"}

// runProxy sends the same locker read and locker open at rate a second for d, first straight
// to the gateway's local API (the floor), then through the gateway cloud API, and reports
// what the cloud adds. It issues itself a gateway key with a high rate limit (and revokes
// it), so the 120/min default does not shape the figures.
func runProxy(ctx context.Context, b *bench, rate float64, d time.Duration) (proxyResult, error) {
	if len(b.creds.Gateways) == 0 {
		return proxyResult{}, fmt.Errorf("no gateways in the credentials file")
	}
	gw := b.creds.Gateways[0]
	key, k, err := b.store.IssueGatewayKey(ctx, b.creds.OrganizationID, "load tool", ptr(1_000_000))
	if err != nil {
		return proxyResult{}, fmt.Errorf("issue a bench gateway key: %w", err)
	}
	defer func() { _, _ = b.store.RevokeGatewayKey(context.WithoutCancel(ctx), k.ID) }()
	locker, err := firstLocker(ctx, b, gw)
	if err != nil {
		return proxyResult{}, err
	}
	res := proxyResult{Rate: rate, Duration: d, Gateway: gw.Serial}
	direct := map[string]string{"Authorization": "Bearer " + gw.Secret}
	cloud := map[string]string{"X-API-Key": key}
	cloudBase := fmt.Sprintf("%s/api/customer/v1/locations/%d/lockers/%d", b.creds.APIURL, gw.LocationID, locker)
	directBase := fmt.Sprintf("%s/lockers/%d", gw.URL, locker)
	res.Phases = map[string][]summary{}
	measure := func(name, method, url string, headers map[string]string, want int) summary {
		s := newSample(name)
		phases := map[string]*sample{}
		for _, p := range phaseNames {
			phases[p] = newSample(p)
		}
		loadclient.OpenLoop(ctx, rate, d, 256, func(ctx context.Context, _ int, scheduled time.Time) {
			r, err := b.api.do(ctx, method, url, headers, nil)
			if err != nil || r.status != want {
				s.fail()
				return
			}
			s.add(time.Since(scheduled))
			for p, v := range serverPhases(r.header.Get("Server-Timing")) {
				if ps, ok := phases[p]; ok {
					ps.add(v)
				}
			}
		})
		for _, p := range phaseNames {
			if sum := phases[p].summary(); sum.Count > 0 {
				res.Phases[name] = append(res.Phases[name], sum)
			}
		}
		return s.summary()
	}
	logf("proxy: locker %d of %s, %.0f requests/s for %s each", locker, gw.Serial, rate, d)
	// Warm up first: the apiserver's pooled connections (to Postgres, to the gateway) and the
	// new key's rows are made on the first calls, which would otherwise land in the first
	// operation's tail. Untimed, at the same rate, for a tenth of a measurement.
	loadclient.OpenLoop(ctx, rate, d/10, 256, func(ctx context.Context, _ int, _ time.Time) {
		_, _ = b.api.do(ctx, http.MethodGet, cloudBase, cloud, nil)
	})
	res.DirectRead = measure("locker read, gateway local API", http.MethodGet, directBase, direct, http.StatusOK)
	res.CloudRead = measure("locker read, gateway cloud API", http.MethodGet, cloudBase, cloud, http.StatusOK)
	res.DirectOpen = measure("locker open, gateway local API", http.MethodPost, directBase+"/open", direct, http.StatusOK)
	res.CloudOpen = measure("locker open, gateway cloud API", http.MethodPost, cloudBase+"/open", cloud, http.StatusOK)
	res.FloorFor = d / 5
	res.Floors = measureFloors(ctx, b, rate, res.FloorFor)
	if bare, err := runBare(ctx, b, newLadder([]float64{rate}, 0), d); err != nil {
		logf("proxy: bare eager start beside it: %v", err)
	} else if len(bare.Steps) > 0 {
		res.Bare = bare.Steps[0].Start
		res.Bare.Name = fmt.Sprintf("bare eager workflow start, same server, %.0f/s", rate)
	}
	if shape, err := measureActivityShape(ctx, b.cfg.TemporalAddress, b.cfg.TemporalNS, rate, d); err != nil {
		logf("proxy: activity-shape floor beside it: %v", err)
	} else {
		res.Shape = shape
	}
	res.ReadAdded50, res.ReadAdded99 = res.CloudRead.P50-res.DirectRead.P50, res.CloudRead.P99-res.DirectRead.P99
	res.OpenAdded50, res.OpenAdded99 = res.CloudOpen.P50-res.DirectOpen.P50, res.CloudOpen.P99-res.DirectOpen.P99
	return res, nil
}

// measureFloors measures, at rate a second for d each, the round trips a proxied call makes
// beyond the gateway's own: one HTTP exchange (with the apiserver, doing no work), one
// Postgres round trip and one commit that waits for its flush. On a machine whose cores sit
// idle between calls each includes waking the process at the other end.
func measureFloors(ctx context.Context, b *bench, rate float64, d time.Duration) []summary {
	one := func(name string, call func(ctx context.Context) error) summary {
		s := newSample(name)
		loadclient.OpenLoop(ctx, rate, d, 256, func(ctx context.Context, _ int, _ time.Time) {
			began := time.Now() // the round trip alone, not the load generator's lateness
			if err := call(ctx); err != nil {
				s.fail()
				return
			}
			s.add(time.Since(began))
		})
		return s.summary()
	}
	health := b.api.base + "/healthz"
	return []summary{
		one(floorHTTP, func(ctx context.Context) error {
			r, err := b.api.do(ctx, http.MethodGet, health, nil, nil)
			if err == nil && r.status != http.StatusOK {
				err = fmt.Errorf("status %d", r.status)
			}
			return err
		}),
		one(floorPG, func(ctx context.Context) error {
			var one int
			return b.pool.QueryRow(ctx, "SELECT 1").Scan(&one)
		}),
		one(floorCommit, func(ctx context.Context) error {
			// A transaction that writes one WAL record and nothing to any table: its commit
			// waits for the flush (synchronous_commit on, the server's default). A commit
			// that wrote no WAL of its own, such as SELECT txid_current(), would not.
			_, err := b.pool.Exec(ctx, "SELECT pg_logical_emit_message(true, 'lockernet-bench', '')")
			return err
		}),
	}
}

func firstLocker(ctx context.Context, b *bench, gw seed.GatewayRef) (int, error) {
	r, err := b.api.do(ctx, http.MethodGet, gw.URL+"/lockers", map[string]string{"Authorization": "Bearer " + gw.Secret}, nil)
	if err != nil || r.status != http.StatusOK {
		return 0, fmt.Errorf("list the lockers of %s: %v (status %d)", gw.Serial, err, r.status)
	}
	var lockers []struct {
		LockerID int `json:"lockerId"`
	}
	if err := jsonUnmarshal(r.body, &lockers); err != nil || len(lockers) == 0 {
		return 0, fmt.Errorf("list the lockers of %s: %v", gw.Serial, err)
	}
	return lockers[0].LockerID, nil
}

func ptr[T any](v T) *T { return &v }
