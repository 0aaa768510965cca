package opscheck_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/sweeper"
	"github.com/lockernet/lockernet/worker"
)

const dockerDir = "../../../docker"

// promtool finds promtool, or fails saying how to get it (.ci/run installs it).
func promtool(t *testing.T) string {
	t.Helper()
	if os.Getenv("LOCKERNET_SKIP_PROMTOOL") == "1" {
		t.Skip("LOCKERNET_SKIP_PROMTOOL=1")
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("the Prometheus checks need promtool (apt-get install -y prometheus, as .ci/run does), "+
			"or set LOCKERNET_SKIP_PROMTOOL=1 to skip them: %v", err)
	}
	return p
}

// TestPrometheusConfig runs promtool over the scrape config, the alert rules and the rules'
// unit tests (docker/prometheus/alerts_test.yml).
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	// The config names each gateway's bearer secret file, which promtool opens: check a copy
	// beside stand-in secrets.
	dir := t.TempDir()
	for _, f := range []string{"prometheus.yml", "alerts.yml", "alerts_test.yml"} {
		b, err := os.ReadFile(filepath.Join(dockerDir, "prometheus", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "secrets"), 0o700))
	for _, f := range []string{"gateway-1.secret", "gateway-2.secret"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "secrets", f), []byte("stand-in\n"), 0o600))
	}
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"},
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		})
	}
}

// TestGrafanaDashboard checks that the dashboard is a Grafana dashboard a provisioning
// loads (uid, title, schema version, panels with ids, positions and a Prometheus data
// source) and that every panel queries metrics the processes export.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	known := exportedMetrics(t)
	b, err := os.ReadFile(filepath.Join(dockerDir, "grafana", "lockernet-overview.json"))
	require.NoError(t, err)
	var dash struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name, Type, Query string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int                       `json:"id"`
			Type       string                    `json:"type"`
			Title      string                    `json:"title"`
			GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
			Datasource *struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	require.NoError(t, dec.Decode(&dash), "the dashboard is JSON")
	assert.NotEmpty(t, dash.UID)
	assert.NotEmpty(t, dash.Title)
	assert.GreaterOrEqual(t, dash.SchemaVersion, 36, "a schema current Grafana reads without migrating")
	require.Len(t, dash.Templating.List, 1)
	assert.Equal(t, "datasource", dash.Templating.List[0].Type)
	assert.Equal(t, "prometheus", dash.Templating.List[0].Query)

	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		assert.False(t, ids[p.ID], "panel id %d is unique", p.ID)
		ids[p.ID] = true
		require.NotNil(t, p.GridPos, "panel %q has a position", p.Title)
		assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q fits the 24-column grid", p.Title)
		assert.NotEmpty(t, p.Title)
		if p.Type == "row" {
			continue
		}
		assert.Equal(t, "timeseries", p.Type)
		require.NotNil(t, p.Datasource, "panel %q has a data source", p.Title)
		assert.Equal(t, "prometheus", p.Datasource.Type)
		assert.Equal(t, "${datasource}", p.Datasource.UID)
		require.NotEmpty(t, p.Targets, "panel %q queries something", p.Title)
		for _, tg := range p.Targets {
			assert.NotEmpty(t, tg.RefID)
			names := metricNames(tg.Expr)
			assert.NotEmpty(t, names, "panel %q: %s names a metric", p.Title, tg.Expr)
			for _, n := range names {
				assert.True(t, known(n), "panel %q queries %s, which no process exports", p.Title, n)
			}
			queries++
		}
	}
	assert.Greater(t, queries, 10)
}

// TestAlertRulesQueryExportedMetrics checks every alert rule's expression against the
// metrics the processes export, as for the dashboard (promtool checks only the syntax).
func TestAlertRulesQueryExportedMetrics(t *testing.T) {
	t.Parallel()
	known := exportedMetrics(t)
	b, err := os.ReadFile(filepath.Join(dockerDir, "prometheus", "alerts.yml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	runbook, err := os.ReadFile("../../../docs/runbook.md")
	require.NoError(t, err)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			for _, m := range metricNames(r.Expr) {
				assert.True(t, known(m), "alert %s queries %s, which no process exports", r.Alert, m)
			}
			// Each alert links the runbook section that says what to do.
			anchor := "#" + strings.ToLower(r.Alert)
			assert.Equal(t, "docs/runbook.md"+anchor, r.Annotations["runbook_url"], "alert %s", r.Alert)
			assert.True(t, strings.Contains(string(runbook), "\n### "+r.Alert+"\n"), "the runbook has a section \"### %s\"", r.Alert)
		}
	}
	assert.Greater(t, n, 5)
}

// exportedMetrics builds the registries the processes build (cmd/apiserver, cmd/worker, a
// gateway) and returns a check for a series name: a described metric, its histogram or
// summary series, the Temporal SDK's metrics (named in the SDK, created on first use), or
// Prometheus's own up.
func exportedMetrics(t *testing.T) func(string) bool {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := prometheus.NewRegistry()
	apiserver.New(apiserver.Deps{Registry: api})
	api.MustRegister((&store.Store{}).PoolCollector(), outbox.NewBacklogCollector(nil, logger))
	activities.NewGatewayMetrics(api)

	wk := prometheus.NewRegistry()
	wk.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(&store.Store{}).PoolCollector(), sweeper.NewLagCollector(nil, logger), activities.NewGatewaySeenCollector(nil, logger),
		activities.NewPickupCollector(nil, logger))
	activities.NewGatewayMetrics(wk)
	gatewayalerts.NewMetrics(wk)

	gw := gatewaytest.Start(t, gatewaytest.Options{})

	names := map[string]bool{"up": true, worker.WorkflowOutcomeMetric + "_total": true}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, reg := range []*prometheus.Registry{api, wk, gw.Server().Registry()} {
		ch := make(chan *prometheus.Desc, 256)
		go func() { reg.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fq.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	sdk := temporalSDKMetrics(t)
	return func(series string) bool {
		if names[series] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(series, suffix); ok && names[base] {
				return true
			}
		}
		// The SDK's metrics through its OpenTelemetry handler (worker/metrics.go): counters
		// get _total, timers are histograms in seconds.
		for _, suffix := range []string{"_total", "_seconds_bucket", "_seconds_sum", "_seconds_count", ""} {
			if base, ok := strings.CutSuffix(series, suffix); ok && sdk[base] {
				return true
			}
		}
		return false
	}
}

// temporalSDKMetrics reads the metric names the Temporal Go SDK defines, from its source in
// the module cache.
func temporalSDKMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk").Output()
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal", "common", "metrics", "constants.go"))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`TemporalMetricsPrefix \+ "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names["temporal_"+m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(TemporalRequest|TemporalLongRequest) \+ "(_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		base := map[string]string{"TemporalRequest": "temporal_request", "TemporalLongRequest": "temporal_long_request"}[m[1]]
		names[base+m[2]] = true
	}
	require.Contains(t, names, "temporal_workflow_task_schedule_to_start_latency", "the SDK's metric names were read")
	return names
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promFunctions = regexp.MustCompile(`^\s*\(`)
	promKeywords  = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "Inf", "NaN"}
)

// metricNames returns the metric names a PromQL expression selects: its identifiers that
// are not functions, aggregations, keywords, label lists, label matchers or durations.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		word := e[loc[0]:loc[1]]
		if promFunctions.MatchString(e[loc[1]:]) || slices.Contains(promKeywords, word) {
			continue
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the exponent or unit of a number (1e3)
		}
		if !slices.Contains(out, word) {
			out = append(out, word)
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job=~"lockernet-.*"} == 0`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(x_bucket{a="b"}[5m]))) > 1`, []string{"x_bucket"}},
		{`time() - max by (gateway) (g) > 120`, []string{"g"}},
		{`a / ignoring(state) b and on () c > 1e3`, []string{"a", "b", "c"}},
		{`deriv(max(items)[10m:1m]) >= 0`, []string{"items"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, metricNames(tt.expr), tt.expr)
	}
}
