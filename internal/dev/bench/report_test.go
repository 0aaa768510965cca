package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRatesIncreaseAndArePositive(t *testing.T) {
	got, err := rates("50, 100,150")
	require.NoError(t, err)
	assert.Equal(t, []float64{50, 100, 150}, got)
	for _, bad := range []string{"", "50,50", "100,50", "0", "-5", "fast"} {
		_, err := rates(bad)
		assert.Error(t, err, bad)
	}
}

// Every flow of the highest step gets a fresh locker: the dataset grows with the step.
func TestFlowLockersCoverTheHighestStep(t *testing.T) {
	o := options{flowRates: []float64{50, 300}, step: time.Minute, expiryN: 10000}
	assert.Equal(t, 180, flowLocationsFor(o), "300/s × 60 s = 18,000 lockers, 100 a tower")
	o.step = 5 * time.Second
	assert.Equal(t, 100, flowLocationsFor(o), "never fewer than the expiry's 10,000")
}

// The report counts every 5xx answer by status code, per scenario.
func TestServerErrorsAreCounted(t *testing.T) {
	codes := []int{200, 503, 500, 503, 404}
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[i%len(codes)])
		i++
	}))
	t.Cleanup(srv.Close)
	a := newAPI(srv.URL, "c", "s")
	before := a.statusCounts()
	for range codes {
		_, err := a.do(context.Background(), http.MethodGet, srv.URL, nil, nil)
		require.NoError(t, err)
	}
	got := a.serverErrorsSince(before)
	assert.Equal(t, map[int]int{500: 1, 503: 2}, got)
	assert.Equal(t, "**3** (1 × 500, 2 × 503)", statusList(got))
	assert.Equal(t, "0", statusList(nil))
}

func TestReportSaysWhatWasNotSustained(t *testing.T) {
	step := func(rate float64, held bool, why ...string) flowStep {
		return flowStep{Rate: rate, Duration: time.Minute, Held: held, Sustained: held, Why: why,
			Flow: summary{Name: "flow", Count: int(rate * 60)}}
	}
	run := &shapeReport{shape: runShape, ran: []string{"flow", "temporal"},
		serverErrors: map[string]map[int]int{"flow": {503: 4}},
		failed:       map[string]string{},
		flow: &flowResult{Step: time.Minute, Sustained: 50,
			Steps: []flowStep{step(50, true), step(100, false, "outbox lag p99 3200.00 ms > 1 s")}},
		temporal: &bareResult{Step: time.Minute, Sustained: 0,
			Steps: []bareStep{{Rate: 50, Duration: time.Minute, Held: false, Why: []string{"40 starts refused"}, Start: summary{P50: 13 * time.Millisecond}}}},
	}
	short := &shapeReport{shape: clusterShape, ran: []string{"flow"}, serverErrors: map[string]map[int]int{}, failed: map[string]string{"webhooks": "receiver gone"},
		flow: &flowResult{Step: 5 * time.Second, Steps: []flowStep{{Rate: 50, Duration: 5 * time.Second, Held: true,
			Why: []string{"but for 5s only, under the 1m0s the criterion needs"}}}}}
	rep := &report{started: time.Now(), shapes: []*shapeReport{run, short}}
	md := rep.markdown()

	assert.Contains(t, md, "| tower flow sustained (reservation + drop-off token: two workflow starts each) | **50 flows/s** (100 workflow starts/s) | **none** of the 5s steps (50/s) |")
	assert.Contains(t, md, "100 flows/s: outbox lag p99 3200.00 ms > 1 s")
	assert.Contains(t, md, "**not sustained**: outbox lag p99 3200.00 ms > 1 s")
	assert.Contains(t, md, "held, but for 5s only", "a short step is never called sustained")
	assert.Contains(t, md, "| bare eager start p50 at 50/s | 13.00 ms |")
	assert.Contains(t, md, "| 5xx answers, all scenarios | **4** | 0 |")
	assert.Contains(t, md, "| flow | **4** (4 × 503) |")
	assert.Contains(t, md, "**The webhooks scenario failed**: receiver gone")
	assert.Less(t, strings.Index(md, "## `make run`"), strings.Index(md, "## cluster shape"), "one section per shape, make run first")
}

// The proxy scenario's report puts the round trips a cloud call adds beside its figures.
func TestProxyReportShowsTheFloors(t *testing.T) {
	p := &proxyResult{Rate: 50, Duration: time.Minute, Gateway: "GW-0001", FloorFor: 12 * time.Second,
		Floors: []summary{{Name: floorHTTP, Count: 600, P50: 600 * time.Microsecond}, {Name: floorPG, Count: 600, P50: 500 * time.Microsecond},
			{Name: floorCommit, Count: 600, Errors: 1, P50: 900 * time.Microsecond}}}
	var b strings.Builder
	p.markdown(func(format string, a ...any) { b.WriteString(fmt.Sprintf(format, a...) + "\n") }, nil)
	md := b.String()
	assert.Contains(t, md, "each alone at 50/s for 12s on the same machine")
	assert.Contains(t, md, "| "+floorHTTP+" | 600 | 0 | 0.60 ms |")
	assert.Contains(t, md, "| "+floorCommit+" | 600 | 1 | 0.90 ms |")
}

// With the activity-shape floor measured, the report shows it beside the bare start and
// what the cloud adds beyond it.
func TestProxyReportShowsTheActivityShapeFloor(t *testing.T) {
	p := &proxyResult{Rate: 10, Duration: time.Minute, Gateway: "GW-0001",
		Bare:        summary{Name: "bare", Count: 600, P50: 4 * time.Millisecond, P99: 9 * time.Millisecond},
		Shape:       summary{Name: "shape", Count: 600, P50: 9 * time.Millisecond, P99: 20 * time.Millisecond},
		ReadAdded50: 12 * time.Millisecond, ReadAdded99: 30 * time.Millisecond, OpenAdded50: 14 * time.Millisecond, OpenAdded99: 31 * time.Millisecond}
	var b strings.Builder
	p.markdown(func(format string, a ...any) { b.WriteString(fmt.Sprintf(format, a...) + "\n") }, nil)
	md := b.String()
	assert.Contains(t, md, "| shape | 600 | 0 | 9.00 ms |")
	assert.Contains(t, md, "beyond the activity-shape floor (what is the service's own, not the engine's): read p50 3.00 ms, p99 10.00 ms; open p50 5.00 ms, p99 11.00 ms.")
	assert.Contains(t, md, "read **missed**")
}

// The engine section sets ours against stock from the same run, marks a variant that is not
// durable, and shows the profiles at the knee.
func TestEngineReportComparesOursWithStock(t *testing.T) {
	held := func(rate float64) bareStep {
		return bareStep{Rate: rate, Duration: time.Minute, Held: true, Kept: true}
	}
	lost := func(rate float64) bareStep {
		return bareStep{Rate: rate, Duration: time.Minute, Why: []string{"behind"}}
	}
	stock, _ := engineVariantNamed("stock")
	ours, _ := engineVariantNamed("ours")
	normal, _ := engineVariantNamed("ours-sync-normal")
	e := &engineResult{Runs: []engineRun{
		{Variant: stock, Bare: bareResult{Step: time.Minute, Steps: []bareStep{held(30), lost(45)}, Sustained: 30}},
		{Variant: ours, Bare: bareResult{Step: time.Minute, Steps: []bareStep{held(30), held(45), lost(60)}, Sustained: 45},
			Profiles: []engineProfile{{Rate: 45, File: "/x/ours-045.pprof", Top: "flat flat% sum% cum cum%"}}},
		{Variant: normal, Err: "the server at 127.0.0.1:1 did not answer"},
	}}
	var b strings.Builder
	e.markdown(func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }, time.Minute)
	text := b.String()
	assert.Contains(t, text, "**1.50×** (target ≥ 1.5×: met)")
	assert.Contains(t, text, "| ours-sync-normal |")
	assert.Contains(t, text, "**not durable**")
	assert.Contains(t, text, "0 (the server at 127.0.0.1:1 did not answer)")
	assert.Contains(t, text, "CPU profile of the server process at 45/s (`go tool pprof -top ours-045.pprof`)")
	for _, name := range []string{"stock", "ours", "ours-4-shards", "ours-checkpoint-10k", "ours-sync-normal"} {
		v, ok := engineVariantNamed(name)
		assert.True(t, ok, name)
		assert.Equal(t, name != "ours-sync-normal", v.Durable, name)
	}
}
