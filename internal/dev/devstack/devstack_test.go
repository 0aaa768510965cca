package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

func TestEmbeddedTemporalPort(t *testing.T) {
	tests := []struct {
		name         string
		address      string // TEMPORAL_ADDRESS
		port         string // LOCKERNET_TEMPORAL_PORT
		wantAddr     string
		wantEmbedded bool
	}{
		{name: "default", wantAddr: "127.0.0.1:7233", wantEmbedded: true},
		{name: "moved", port: "9233", wantAddr: "127.0.0.1:9233", wantEmbedded: true},
		{name: "external cluster wins", address: "temporal.internal:7233", port: "9233", wantAddr: "temporal.internal:7233"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TEMPORAL_ADDRESS", tt.address)
			t.Setenv("LOCKERNET_TEMPORAL_PORT", tt.port)
			s, err := LoadSettings()
			require.NoError(t, err)
			assert.Equal(t, tt.wantAddr, s.TemporalAddress)
			assert.Equal(t, tt.wantEmbedded, !s.TemporalIsSet)
		})
	}
}

func TestBusyEmbeddedTemporalPortNamesItsSetting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port

	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("LOCKERNET_TEMPORAL_PORT", strconv.Itoa(busy))
	for _, name := range []string{"LOCKERNET_API_ADDR", "LOCKERNET_WORKER_ADDR", "LOCKERNET_TOWERSIM_ADDR",
		"LOCKERNET_GW1_ADDR", "LOCKERNET_GW1_SIM_ADDR", "LOCKERNET_GW2_ADDR", "LOCKERNET_GW2_SIM_ADDR"} {
		t.Setenv(name, "127.0.0.1:0") // any free port, so only the busy one can fail
	}
	t.Setenv("LOCKERNET_TEMPORAL_UI_PORT", "0")
	s, err := LoadSettings()
	require.NoError(t, err)
	err = checkPorts(s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LOCKERNET_TEMPORAL_PORT")
}

// GW-0002 drives its bank through the Kerong driver over a pty to the bus emulator;
// GW-0001 stays on the simulated controllers.
func TestGW0002RunsOnTheKerongEmulator(t *testing.T) {
	s, err := LoadSettings()
	require.NoError(t, err)
	children := simChildren(s)
	args := map[string][]string{}
	for _, c := range children {
		args[c.name] = c.args
	}
	assert.Contains(t, args["gw-0002"], "-kerong-emulator")
	assert.Contains(t, args["gw-0002"], "-simulated")
	assert.NotContains(t, args["gw-0001"], "-kerong-emulator")
}

// TestEmbeddedShapeRestartsADeadChild starts make run's shape, kills the worker and gateway
// GW-0001 with SIGKILL, and sees each started again on its own address while the apiserver,
// the other gateway and the tower simulator keep running; the restarted gateway has kept its
// secret and its data. Ctrl-C then stops every process and removes the pid files.
func TestEmbeddedShapeRestartsADeadChild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded Temporal server and every service")
	}
	binDir := buildBinaries(t, false)
	s := embeddedStackSettings(t, binDir)
	stack := startEmbeddedStack(t, s)
	ctx := context.Background()
	creds, err := seed.ReadCredentials(filepath.Join(s.DataDir, seed.CredentialsFile))
	require.NoError(t, err)
	gw := creds.Gateways[0]
	require.Equal(t, "GW-0001", gw.Serial)

	// Every worker polls as the stack's build, which the stack made the worker deployment's
	// current version once they did (decision 0019).
	build, err := stackBuildID(s, binDir)
	require.NoError(t, err)
	tc, err := temporalclient.Dial(ctx, s.TemporalAddress, s.TemporalNS, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer tc.Close()
	dep, err := (&deployments.Admin{Client: tc, Namespace: s.TemporalNS, Name: s.DeploymentName}).Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, build, dep.Current, "the stack's build is current")
	if v, ok := dep.Version(build); assert.True(t, ok, "the build is a version of the deployment") {
		assert.Subset(t, v.TaskQueues, []string{s.TaskQueue + "/workflow", s.GatewayTaskQueue + "/workflow"},
			"the build's workers poll both queues")
	}

	runDir := filepath.Join(s.DataDir, "run")
	names := []string{"apiserver", "worker", "gw-0001", "gw-0002", "towersim"}
	before := map[string]int{}
	for _, n := range names {
		before[n] = readPid(t, filepath.Join(runDir, n+".pid"))
	}

	// A keyed door open on GW-0001 before the kill: the gateway keeps its answer in its
	// SQLite file, so the same call after the restart is a replay only if the data dir is
	// the same.
	lockers := gatewayCall(t, http.MethodGet, gw.URL+"/lockers", gw.Secret, "")
	require.Equal(t, http.StatusOK, lockers.status, lockers.body)
	var ls []struct {
		LockerID int `json:"lockerId"`
	}
	require.NoError(t, json.Unmarshal([]byte(lockers.body), &ls))
	require.Len(t, ls, 16, "GW-0001 has two banks of 8")
	openURL := fmt.Sprintf("%s/lockers/%d/open", gw.URL, ls[0].LockerID)
	first := gatewayCall(t, http.MethodPost, openURL, gw.Secret, "restart-check")
	require.Equal(t, http.StatusOK, first.status, first.body)
	require.Empty(t, first.replayed)

	// The apiserver is probed all along, from before the kills until both are back.
	probed := make(chan []bool)
	stopProbing := make(chan struct{})
	go func() {
		var results []bool
		for {
			results = append(results, probe(context.Background(), "http://"+s.APIAddr+"/healthz"))
			select {
			case <-stopProbing:
				probed <- results
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	require.NoError(t, syscall.Kill(before["worker"], syscall.SIGKILL))
	require.NoError(t, syscall.Kill(before["gw-0001"], syscall.SIGKILL))
	for _, c := range []struct{ name, health string }{
		{"worker", "http://" + s.WorkerAddr + "/readyz"},
		{"gw-0001", gw.URL + "/healthz"},
	} {
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(filepath.Join(runDir, c.name+".pid"))
			if err != nil || strings.TrimSpace(string(b)) == strconv.Itoa(before[c.name]) {
				return false
			}
			return probe(context.Background(), c.health)
		}, 60*time.Second, 200*time.Millisecond, "%s is restarted and answers on its own address", c.name)
	}
	close(stopProbing)
	results := <-probed
	assert.NotContains(t, results, false, "the apiserver's /healthz answered at every probe while the others restarted")

	select {
	case <-stack.done:
		t.Fatalf("the stack stopped when a child died: %v", stack.err)
	default:
	}
	for _, n := range []string{"apiserver", "gw-0002", "towersim"} {
		assert.Equal(t, before[n], readPid(t, filepath.Join(runDir, n+".pid")), "%s kept running", n)
		assert.NoError(t, syscall.Kill(before[n], 0), "%s's process is alive", n)
	}
	logs := stack.out.String()
	assert.Contains(t, logs, "process died; restarting it")
	assert.Contains(t, logs, "name=worker")
	assert.Contains(t, logs, "name=gw-0001")
	assert.Contains(t, logs, `err="signal: killed"`)

	// Same port and secret: the local API answers with the credentials file's bearer; same
	// data: the keyed open is replayed, not carried out again.
	again := gatewayCall(t, http.MethodPost, openURL, gw.Secret, "restart-check")
	assert.Equal(t, http.StatusOK, again.status, again.body)
	assert.Equal(t, "true", again.replayed, "the answer kept in the gateway's SQLite file before the kill")
	assert.JSONEq(t, first.body, again.body)

	// Ctrl-C: everything stops, no process is left, and the pid files are gone.
	var last []int
	for _, n := range names {
		last = append(last, readPid(t, filepath.Join(runDir, n+".pid")))
	}
	stack.stop(t)
	require.NoError(t, stack.err)
	for i, n := range names {
		assert.ErrorIs(t, syscall.Kill(last[i], 0), syscall.ESRCH, "%s is stopped", n)
		assert.NoFileExists(t, filepath.Join(runDir, n+".pid"))
	}
}

type gatewayResponse struct {
	status         int
	body, replayed string
}

// gatewayCall calls a gateway's local API with its bearer secret and, if key is set, an
// Idempotency-Key.
func gatewayCall(t *testing.T, method, url, secret, key string) gatewayResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return gatewayResponse{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed")}
}
