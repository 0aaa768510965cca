package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/telemetry/otlptest"
)

// TestCloudOpenIsOneTrace runs the production apiserver, worker and gateway binaries as
// processes, exporting to an OTLP/HTTP receiver in this test, and opens a locker through
// the gateway cloud API. The spans the three processes export must form one trace: the
// apiserver's request, the workflow start, the workflow run and its send activity in the
// worker, the worker's call to the gateway and the gateway's own request span, each the
// child of the one before, with Postgres statements under the request and the activity,
// and the trace id in the request's log lines of the apiserver and the gateway.
func TestCloudOpenIsOneTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service binaries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildBinaries(t, "apiserver", "worker", "gateway")

	recv, err := otlptest.Start(false)
	require.NoError(t, err)
	t.Cleanup(recv.Close)

	db := testenv.NewSeeded(ctx, t, store.Options{MaxConns: 2})
	dbURL, st, ring, res := db.URL, db.Store, db.Ring, db.Demo
	ts, _ := testenv.Temporal(t)

	otel := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL,
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"LOCKERNET_LOG_FORMAT=json",
	}
	// The gateway: a real process, continuing the cloud's trace.
	gwSecret := credential.NewSecret()
	gwAddr := testenv.FreeAddr(t)
	gwLog := startProc(t, filepath.Join(bin, "gateway"), []string{"-simulated", "-id", "GW-0001", "-addr", gwAddr, "-layout", "two-banks",
		"-secret", gwSecret, "-db", filepath.Join(t.TempDir(), "gw.db"), "-controller-latency", "1ms"}, otel)
	waitHTTP(t, "http://"+gwAddr+"/healthz")
	_, err = st.UpsertGateway(ctx, store.NewGateway{Serial: "GW-0001", LocationID: res.GatewayLocationID["GW-0001"],
		BaseURL: "http://" + gwAddr, SecretSealed: ring.Seal(keyring.GatewaySecretPurpose("GW-0001"), []byte(gwSecret))})
	require.NoError(t, err)

	// The cloud: the apiserver starts the workflow; a separate worker process runs it, so
	// the trace crosses Temporal between two processes.
	common := append([]string{
		"DATABASE_URL=" + dbURL, "LOCKERNET_MASTER_KEY=" + hex.EncodeToString(db.Key),
		"TEMPORAL_ADDRESS=" + ts.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + ts.GetDefaultNamespace(),
		"LOCKERNET_TASK_QUEUE=trace-test", "LOCKERNET_GATEWAY_TASK_QUEUE=trace-test-gateway",
		"LOCKERNET_DB_MAX_CONNS=4", "LOCKERNET_GATEWAY_SYNC_INTERVAL=1h",
	}, otel...)
	apiAddr := testenv.FreeAddr(t)
	apiLog := startProc(t, filepath.Join(bin, "apiserver"), nil, append([]string{"LOCKERNET_API_ADDR=" + apiAddr,
		"LOCKERNET_API_GATEWAY_WORKER=false"}, common...))
	startProc(t, filepath.Join(bin, "worker"), nil, append([]string{"LOCKERNET_WORKER_ADDR=" + testenv.FreeAddr(t)}, common...))
	waitHTTP(t, "http://"+apiAddr+"/healthz")

	open := fmt.Sprintf("http://%s/api/customer/v1/locations/%d/lockers/101/open", apiAddr, res.GatewayLocationID["GW-0001"])
	resp := testenv.DoWithHeaders(t, http.MethodPost, open, map[string]string{"X-API-Key": res.Credentials.GatewayAPIKey,
		"Prefer": "wait=30"}, nil)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)

	const route = "POST /api/customer/v1/locations/{locationId}/lockers/{lockerId}/open"
	var trace []otlptest.Span
	var root otlptest.Span
	if !assert.Eventually(t, func() bool {
		trace, root = nil, otlptest.Span{}
		spans := recv.Spans()
		for _, s := range spans {
			if s.Service == "lockernet-apiserver" && s.Kind == "SPAN_KIND_SERVER" && strings.HasPrefix(s.Name, "POST /api/customer/v1/") {
				root = s
			}
		}
		if root.TraceID == "" {
			return false
		}
		for _, s := range spans {
			if s.TraceID == root.TraceID {
				trace = append(trace, s)
			}
		}
		return find(trace, "lockernet-gateway", "POST /lockers/{lockerId}/open") != nil &&
			find(trace, "lockernet-worker", "RunWorkflow:GatewayRequest") != nil
	}, time.Minute, 100*time.Millisecond) {
		t.Fatalf("no complete trace of the open; spans received: %v", names(recv.Spans()))
	}

	assert.Equal(t, route, root.Name)
	assert.Empty(t, root.ParentSpanID, "the request span is the trace's root")
	byID := map[string]otlptest.Span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	for _, s := range trace {
		if s.SpanID != root.SpanID {
			assert.Contains(t, byID, s.ParentSpanID, "span %s/%s has its parent in the trace", s.Service, s.Name)
		}
	}
	// The chain, each the descendant of the one before.
	chain := []struct{ service, name string }{
		{"lockernet-apiserver", route},
		{"lockernet-apiserver", "StartWorkflow:GatewayRequest"},
		{"lockernet-worker", "RunWorkflow:GatewayRequest"},
		{"lockernet-worker", "StartActivity:SendGatewayRequest"},
		{"lockernet-worker", "RunActivity:SendGatewayRequest"},
		{"lockernet-worker", "gateway POST"},
		{"lockernet-gateway", "POST /lockers/{lockerId}/open"},
	}
	var prev *otlptest.Span
	for _, c := range chain {
		s := find(trace, c.service, c.name)
		if !assert.NotNil(t, s, "span %s/%s in the trace; have %v", c.service, c.name, names(trace)) {
			continue
		}
		if prev != nil {
			assert.True(t, descends(byID, *s, prev.SpanID), "%s/%s descends from %s/%s", c.service, c.name, prev.Service, prev.Name)
		}
		prev = s
	}
	gwServer := find(trace, "lockernet-gateway", "POST /lockers/{lockerId}/open")
	gwClient := find(trace, "lockernet-worker", "gateway POST")
	if gwServer != nil && gwClient != nil {
		assert.Equal(t, gwClient.SpanID, gwServer.ParentSpanID, "the gateway continues the worker's traceparent")
	}
	// Postgres statements: the request's own (key check, storing the request) and the
	// activity's (recording the send).
	sendRun := find(trace, "lockernet-worker", "RunActivity:SendGatewayRequest")
	var apiSQL, actSQL int
	for _, s := range trace {
		if s.Attributes["db.system.name"] != "postgresql" {
			continue
		}
		switch {
		case s.Service == "lockernet-apiserver" && descends(byID, s, root.SpanID):
			apiSQL++
		case sendRun != nil && descends(byID, s, sendRun.SpanID):
			actSQL++
		}
	}
	assert.Positive(t, apiSQL, "postgres spans under the apiserver request")
	assert.Positive(t, actSQL, "postgres spans under the send activity")

	// Every log line of the request carries its trace id.
	assert.Contains(t, logTraceIDs(apiLog, "http request"), root.TraceID, "the apiserver's request log line")
	assert.Contains(t, logTraceIDs(gwLog, "request"), root.TraceID, "the gateway's request log line")
}

func find(spans []otlptest.Span, service, name string) *otlptest.Span {
	for i := range spans {
		if spans[i].Service == service && spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

func descends(byID map[string]otlptest.Span, s otlptest.Span, ancestor string) bool {
	for seen := 0; s.ParentSpanID != "" && seen < 100; seen++ {
		if s.ParentSpanID == ancestor {
			return true
		}
		p, ok := byID[s.ParentSpanID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}

func names(spans []otlptest.Span) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Service+"/"+s.Name)
	}
	return out
}

// logTraceIDs returns the trace_id of every JSON log line with message msg.
func logTraceIDs(log *syncbuf.Buffer, msg string) []string {
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(log.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			TraceID string `json:"trace_id"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg && line.TraceID != "" {
			ids = append(ids, line.TraceID)
		}
	}
	return ids
}

// buildBinaries builds the named commands into a temporary directory.
func buildBinaries(t *testing.T, cmds ...string) string {
	t.Helper()
	dir := t.TempDir()
	// The simcontrol build: the gateway runs simulated controllers (the production build
	// drives real lock controllers only).
	args := []string{"build", "-tags", "simcontrol", "-o", dir + string(os.PathSeparator)}
	for _, c := range cmds {
		args = append(args, "github.com/lockernet/lockernet/cmd/"+c)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

// startProc runs a binary until the test ends (SIGTERM, then a kill) and keeps its output,
// which the test log shows when the test fails.
func startProc(t *testing.T, bin string, args, env []string) *syncbuf.Buffer {
	t.Helper()
	out := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.Tail(8000))
		}
	})
	return out
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 100*time.Millisecond, "%s answers 200", url)
}
