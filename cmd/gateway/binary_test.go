package main

import (
	"database/sql"
	"encoding/json"
	"io"
	"net"
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

	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// Secrets of the right strength: 32 random bytes as hex and as base64.
const (
	goodSecret = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"
	envSecret  = "3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs="
)

// runningGateway is a gateway process and what it logs.
type runningGateway struct {
	addr   string
	cmd    *exec.Cmd
	exited chan error
	logs   *syncbuf.Buffer
}

// startGateway starts bin listening on addr with the further args and the
// environment variables env (besides the secret), and waits until it is healthy.
// The process is killed when the test ends, if it has not stopped by then.
func startGateway(t *testing.T, bin, addr string, args []string, env ...string) *runningGateway {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", addr}, args...)...)
	cmd.Env = append(append(os.Environ(), "LOCKERNET_GATEWAY_SECRET="+envSecret), env...)
	gw := &runningGateway{addr: addr, cmd: cmd, exited: make(chan error, 1), logs: &syncbuf.Buffer{}}
	cmd.Stderr = gw.logs
	require.NoError(t, cmd.Start())
	go func() { gw.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "gateway did not come up")
	return gw
}

// call sends the gateway an authorised request without a body, and returns the
// answer's status and body.
func (gw *runningGateway) call(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+gw.addr+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+envSecret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// simStats is what the simulator control's /sim/stats answers.
type simStats struct {
	Opens    map[string]int `json:"opens"`
	Requests int            `json:"requests"`
}

// simGet reads the simulator control's path at simAddr into v.
func simGet(t *testing.T, simAddr, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + simAddr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// simFault posts body to the simulator control's /sim/faults at simAddr, and
// returns the answer's status.
func simFault(t *testing.T, simAddr, body string) int {
	t.Helper()
	resp, err := http.Post("http://"+simAddr+"/sim/faults", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// stop sends the gateway SIGTERM: it must exit cleanly within 30 s.
func (gw *runningGateway) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, gw.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-gw.exited:
		require.NoError(t, err, "logs: %s", gw.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop on SIGTERM")
	}
}

func buildGateway(t *testing.T, tags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "gateway")
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(t.Context(), goBin, append(args, ".")...)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	data, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", data)
	return out
}

// TestBinaries builds the production and the simcontrol binaries: only the
// latter knows -sim-addr and serves /sim/*; both stop on SIGTERM.
func TestBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	t.Parallel()

	t.Run("production build has no simulator control", func(t *testing.T) {
		t.Parallel()
		bin := buildGateway(t)
		cmd := exec.CommandContext(t.Context(), bin, "-secret", goodSecret, "-sim-addr", testenv.FreeAddr(t))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, 2, exit.ExitCode())
		assert.Contains(t, string(out), "flag provided but not defined: -sim-addr")
	})

	t.Run("simcontrol build serves /sim and stops on SIGTERM", func(t *testing.T) {
		t.Parallel()
		bin := buildGateway(t, "simcontrol")
		addr, simAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
		gw := startGateway(t, bin, addr, []string{"-sim-addr", simAddr, "-layout", "one-bank",
			"-db", filepath.Join(t.TempDir(), "gw.db"), "-open-attempt-timeout", "100ms", "-open-retry-delay", "10ms"},
			"LOCKERNET_GATEWAY_SIMULATED=true")

		status, body := gw.call(t, http.MethodPost, "/lockers/201/open")
		assert.Equal(t, http.StatusOK, status, body)

		require.Equal(t, http.StatusOK, simFault(t, simAddr, `{"mode": "hardware_fault"}`))
		status, body = gw.call(t, http.MethodPost, "/lockers/201/open")
		assert.Equal(t, http.StatusInternalServerError, status, body)

		var stats simStats
		simGet(t, simAddr, "/sim/stats", &stats)
		assert.Equal(t, 1, stats.Opens["201"])
		assert.GreaterOrEqual(t, stats.Requests, 2)

		gw.stop(t)
		assert.Contains(t, gw.logs.String(), "gateway stopped")
		assert.NotContains(t, gw.logs.String(), envSecret)
	})

	// The doors the simulator counts stay readable while a stopping gateway finishes the open
	// in flight: the fault drills read their counters until the process ends.
	t.Run("simcontrol build answers /sim while it stops", func(t *testing.T) {
		t.Parallel()
		bin := buildGateway(t, "simcontrol")
		addr, simAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
		dbPath := filepath.Join(t.TempDir(), "gw.db")
		gw := startGateway(t, bin, addr, []string{"-sim-addr", simAddr, "-layout", "one-bank",
			"-db", dbPath}, "LOCKERNET_GATEWAY_SIMULATED=true")
		require.Equal(t, http.StatusOK, simFault(t, simAddr, `{"mode": "controller_slow", "delayMs": 5000}`))

		go func() {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/lockers/201/open", nil)
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+envSecret)
			req.Header.Set("Idempotency-Key", "open-while-stopping")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		// In flight: its intent is recorded (before the pulse). Only then is it work the stop
		// waits for; a stop that comes first refuses it with GATEWAY_STOPPING, doing nothing.
		db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
		require.NoError(t, err)
		defer db.Close()
		require.Eventually(t, func() bool {
			var n int
			err := db.QueryRow(`SELECT count(*) FROM idempotent_requests WHERE key = 'open-while-stopping'`).Scan(&n)
			return err == nil && n == 1
		}, 10*time.Second, 20*time.Millisecond, "the open's intent was never recorded")

		require.NoError(t, gw.cmd.Process.Signal(syscall.SIGTERM))
		// The local API stops taking connections first; the open in flight holds the stop.
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, 10*time.Second, 10*time.Millisecond, "the local API kept listening after SIGTERM")
		resp, err := http.Get("http://" + simAddr + "/sim/stats")
		require.NoError(t, err, "the simulator control went away with the local API")
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)

		select {
		case err := <-gw.exited:
			require.NoError(t, err, "logs: %s", gw.logs.String())
		case <-time.After(90 * time.Second):
			t.Fatal("the gateway did not stop on SIGTERM")
		}
		_, err = http.Get("http://" + simAddr + "/sim/stats")
		assert.Error(t, err, "the simulator control outlived the gateway")
	})

	t.Run("simcontrol build drives the kerong emulator through the driver", func(t *testing.T) {
		t.Parallel()
		bin := buildGateway(t, "simcontrol")
		addr, simAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
		// No watch: its sensor reads would meet the faults set for the opens first (a silent
		// board read by the watch is known silent before the unlock goes out).
		gw := startGateway(t, bin, addr, []string{"-sim-addr", simAddr, "-layout", "one-bank", "-simulated", "-kerong-emulator",
			"-db", filepath.Join(t.TempDir(), "gw.db"), "-open-attempt-timeout", "2s", "-open-retry-delay", "10ms", "-watch-interval", "0"})

		local := func(method, path string) (int, string) { return gw.call(t, method, path) }
		sim := func(body string) { require.Equal(t, http.StatusOK, simFault(t, simAddr, body), body) }
		status, body := local(http.MethodGet, "/system")
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, `"kind":"kerong-cu16"`)
		assert.Regexp(t, `"address":"kerong\+serial:///dev/pts/\d+\?baud=19200\\u0026board=1\\u0026opentimeout=7s"`, body)

		status, body = local(http.MethodPost, "/lockers/201/open")
		assert.Equal(t, http.StatusOK, status, body)
		sim(`{"mode": "hardware_fault"}`)
		status, body = local(http.MethodPost, "/lockers/202/open")
		assert.Equal(t, http.StatusInternalServerError, status, body)
		sim(`{"mode": "no_answer", "failures": 1}`)
		status, body = local(http.MethodPost, "/lockers/203/open")
		assert.Equal(t, http.StatusOK, status, body)
		sim(`{"mode": "controller_unreachable"}`)
		// The board falls silent as the unlock goes out: the driver cannot tell it from a
		// pulse whose answers were lost.
		status, body = local(http.MethodPost, "/lockers/204/open")
		assert.Equal(t, http.StatusInternalServerError, status, body)
		assert.Contains(t, body, "REQUEST_OUTCOME_UNKNOWN")
		assert.Equal(t, http.StatusBadRequest, simFault(t, simAddr, `{"mode": "melted"}`))
		sim(`{"mode": "none"}`)

		var stats simStats
		simGet(t, simAddr, "/sim/stats", &stats)
		assert.Equal(t, map[string]int{"201": 1, "202": 1, "203": 1, "204": 0, "205": 0, "206": 0, "207": 0, "208": 0}, stats.Opens,
			"one pulse per open that reached the board, none twice")
		assert.GreaterOrEqual(t, stats.Requests, 5)

		var doors map[string]struct{ Open bool }
		simGet(t, simAddr, "/sim/doors", &doors)
		assert.True(t, doors["201"].Open)
		assert.False(t, doors["202"].Open, "the jammed lock stayed shut")

		gw.stop(t)
	})

}
