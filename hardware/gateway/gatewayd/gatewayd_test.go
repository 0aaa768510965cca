package gatewayd

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// run is what cmd/gateway does: Load the settings, then Run.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) error {
	c, err := Load(args, getenv, stderr)
	if err != nil {
		return err
	}
	return Run(ctx, c, stderr, ready)
}

func TestLoad(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8101", c.Addr)
	assert.Equal(t, "two-banks", c.Layout)
	assert.Equal(t, 20*time.Second, c.OpenAttemptTimeout)
	assert.Equal(t, 3, c.OpenAttempts)
	assert.Equal(t, time.Second, c.OpenRetryDelay)
	assert.Zero(t, c.StopGrace, "zero: the gateway's default from the open policy")
	assert.Equal(t, gateway.WatchConfig{Interval: time.Second, DoorAjarAfter: time.Minute, ForcedOpenGrace: 30 * time.Second, OfflineAfter: 3},
		c.Watch, "the watch runs by default")

	c, err = Load([]string{"-door-ajar-after", "5s"}, env(map[string]string{
		"LOCKERNET_GATEWAY_WATCH_INTERVAL": "0s", "LOCKERNET_GATEWAY_DOOR_AJAR_AFTER": "10s", "LOCKERNET_GATEWAY_OFFLINE_AFTER": "5",
	}), io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.Watch.Interval, "0 runs no watch")
	assert.Equal(t, 5*time.Second, c.Watch.DoorAjarAfter)
	assert.Equal(t, 5, c.Watch.OfflineAfter)

	c, err = Load([]string{"-stop-grace", "90s"}, env(map[string]string{"LOCKERNET_GATEWAY_STOP_GRACE": "30s"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, c.StopGrace)

	c, err = Load([]string{"-open-attempts", "5", "-layout", "one-bank"}, env(map[string]string{
		"LOCKERNET_GATEWAY_OPEN_ATTEMPTS":        "4",
		"LOCKERNET_GATEWAY_OPEN_ATTEMPT_TIMEOUT": "150ms",
		"LOCKERNET_GATEWAY_ID":                   "GW-0009",
		"LOCKERNET_GATEWAY_LAYOUT":               "two-banks",
	}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, c.OpenAttempts, "a flag beats the environment")
	assert.Equal(t, "one-bank", c.Layout)
	assert.Equal(t, 150*time.Millisecond, c.OpenAttemptTimeout, "the environment beats the default")
	assert.Equal(t, "GW-0009", c.ID)

	bad := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad env duration", nil, map[string]string{"LOCKERNET_GATEWAY_OPEN_RETRY_DELAY": "soon"}, "LOCKERNET_GATEWAY_OPEN_RETRY_DELAY"},
		{"bad env number", nil, map[string]string{"LOCKERNET_GATEWAY_OPEN_ATTEMPTS": "many"}, "LOCKERNET_GATEWAY_OPEN_ATTEMPTS"},
		{"zero attempts", []string{"-open-attempts", "0"}, nil, "open-attempts"},
		{"zero timeout", []string{"-open-attempt-timeout", "0s"}, nil, "open-attempt-timeout"},
		{"negative stop grace", []string{"-stop-grace", "-1s"}, nil, "must not be negative"},
		{"bad env stop grace", nil, map[string]string{"LOCKERNET_GATEWAY_STOP_GRACE": "a while"}, "LOCKERNET_GATEWAY_STOP_GRACE"},
		{"negative watch interval", []string{"-watch-interval", "-1s"}, nil, "watch-interval"},
		{"zero door ajar", []string{"-door-ajar-after", "0s"}, nil, "door-ajar-after"},
		{"zero offline reads", []string{"-offline-after", "0"}, nil, "offline-after"},
		{"bad env watch interval", nil, map[string]string{"LOCKERNET_GATEWAY_WATCH_INTERVAL": "often"}, "LOCKERNET_GATEWAY_WATCH_INTERVAL"},
		{"stray argument", []string{"serve"}, nil, "unexpected arguments"},
		{"unknown flag", []string{"-colour", "blue"}, nil, "flag provided but not defined"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tc.args, env(tc.env), io.Discard)
			assert.ErrorContains(t, err, tc.want)
			var usage *UsageError
			assert.ErrorAs(t, err, &usage, "the command exits 2")
		})
	}
}

// Secrets of the right strength: 32 random bytes as hex and as base64url.
var (
	goodSecret = strings.Repeat("5e", 32)
	fileSecret = "q7Jd0Zr4mC1xV9bT2nW8eL5yH3aK6uP0sF4gR7tY1iO"
)

func TestRunServesAndStops(t *testing.T) {
	t.Parallel()
	for _, model := range []kerong.Model{kerong.ModelCU16, kerong.ModelCU48} {
		t.Run(string(model), func(t *testing.T) {
			t.Parallel()
			runServesAndStops(t, model)
		})
	}
}

func runServesAndStops(t *testing.T, model kerong.Model) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("  "+fileSecret+"\n"), 0o600))

	// GW-0002's bank on a Kerong board (address 1) of the model behind a pseudo-terminal.
	emu, pt := emutest.ServePTY(t, kerongemu.Config{Boards: []int{1}, Models: map[int]kerong.Model{1: model}})
	ctlURL := "kerong+serial://" + pt.Path + "?baud=19200&board=1&model=" + string(model)
	layoutPath := kerongLayoutOf(t, kerong.KindOf(model), ctlURL)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	var logs syncbuf.Buffer
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-secret-file", secretFile, "-layout", layoutPath},
			env(map[string]string{"LOCKERNET_DATA_DIR": dir}), &logs, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	}

	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/system", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fileSecret)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"gatewayId":"GW-0002"`)
	var sys struct {
		Controllers []struct {
			ID, Kind, Address string
			Online            bool
		} `json:"controllers"`
	}
	require.NoError(t, json.Unmarshal(body, &sys))
	require.Len(t, sys.Controllers, 1)
	assert.Equal(t, "kerong-"+string(model), sys.Controllers[0].Kind, "/system names the controller's model")
	assert.Equal(t, ctlURL, sys.Controllers[0].Address, "and its transport, port and boards")
	assert.True(t, sys.Controllers[0].Online)
	assert.FileExists(t, filepath.Join(dir, "gateway-GW-0002.db"))

	// A door open goes through the driver to the board: one pulse, the door open.
	req, err = http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/lockers/203/open", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fileSecret)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"doorOpen":true`)
	assert.Equal(t, 1, emu.Pulses(1, 3))
	open, _, _ := emu.Door(1, 3)
	assert.True(t, open)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

// A stop (SIGTERM or SIGINT end run's context) with a door open in flight lets it finish
// first: its caller gets the answer, its event-log line and its keyed answer are written, and
// only then is the database closed; after a restart, the open's repeat gets its answer and the
// lock was pulsed once.
func TestRunStopsAfterTheOpenInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	emu, pt := emutest.ServePTY(t, kerongemu.Config{Boards: []int{1}})
	// The board may take longer to answer an unlock than the driver's default wait.
	layoutPath := kerongLayout(t, "kerong+serial://"+pt.Path+"?baud=19200&board=1&opentimeout=10s")
	start := func(ctx context.Context, logs io.Writer) (string, <-chan error) {
		addrc := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			// No watch: its sensor reads would share the bus (and the one slow answer) with the
			// unlock whose frame the test waits for.
			done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-secret", goodSecret, "-layout", layoutPath, "-watch-interval", "0"},
				env(map[string]string{"LOCKERNET_DATA_DIR": dir}), logs, func(a string) { addrc <- a })
		}()
		select {
		case addr := <-addrc:
			return addr, done
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		}
		return "", nil
	}
	type answer struct {
		status int
		body   string
		err    error
	}
	open := func(addr, path, key string) answer {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+path, nil)
		if err != nil {
			return answer{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+goodSecret)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, body: string(body), err: err}
	}

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var logs syncbuf.Buffer
	addr, done := start(ctx, &logs)
	first := open(addr, "/lockers/201/open", "warm-up")
	require.NoError(t, first.err)
	require.Equal(t, http.StatusOK, first.status, first.body)

	// The board takes longer over the next unlock than a plain HTTP server's shutdown grace.
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultSlowAnswer, Delay: gateway.ShutdownGrace + 500*time.Millisecond, Count: 1}))
	frames := emu.Frames()
	inFlight := make(chan answer, 1)
	go func() { inFlight <- open(addr, "/lockers/204/open", "in-flight") }()
	require.Eventually(t, func() bool { return emu.Frames() > frames }, 10*time.Second, 5*time.Millisecond, "the unlock reached the board")
	stop()

	a := <-inFlight
	require.NoError(t, a.err, "the caller got its answer through the stop")
	require.Equal(t, http.StatusOK, a.status, a.body)
	assert.Contains(t, a.body, `"doorOpen":true`)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	out := logs.String()
	assert.NotContains(t, out, "database is closed")
	closed := strings.Index(out, `"msg":"gateway database closed"`)
	require.GreaterOrEqual(t, closed, 0, "the gateway closed its database: %s", out)
	assert.Equal(t, 2, strings.Count(out[:closed], `"msg":"door opened"`), "both opens were recorded before it")
	assert.Less(t, closed, strings.Index(out, `"msg":"gateway stopped"`))

	ctx2, stop2 := context.WithCancel(t.Context())
	addr, done = start(ctx2, io.Discard)
	again := open(addr, "/lockers/204/open", "in-flight")
	require.NoError(t, again.err)
	assert.Equal(t, http.StatusOK, again.status, "the result was kept: %s", again.body)
	assert.Equal(t, a.body, again.body)
	assert.Equal(t, 1, emu.Pulses(1, 4), "the lock was pulsed once")
	stop2()
	require.NoError(t, <-done)
}

// kerongLayout writes the one-bank layout (GW-0002, lockers 201–208 on channels 1–8)
// with its controller a Kerong CU16 board at ctlURL.
func kerongLayout(t *testing.T, ctlURL string) string {
	t.Helper()
	return kerongLayoutOf(t, "kerong-cu16", ctlURL)
}

// kerongLayoutOf is kerongLayout with a controller of the kind.
func kerongLayoutOf(t *testing.T, kind, ctlURL string) string {
	t.Helper()
	l, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	l.Banks[0].Controller = gateway.ControllerSpec{ID: "CTL-1", Kind: kind, Address: ctlURL}
	b, err := json.Marshal(l)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "layout.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	// A Kerong board at a TCP port nobody answers on: the gateway starts (and
	// reports the controller offline) until it fails for the reason under test.
	layoutPath := kerongLayout(t, "kerong+tcp://127.0.0.1:1?board=1")

	l, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	l.Banks[0].Controller = gateway.ControllerSpec{ID: "CTL-1", Kind: "kerong-cu16", Address: "kerong+tcp://127.0.0.1:1?board=1"}
	l.Banks[0].Lockers[7].Channel = 17
	raw, err := json.Marshal(l)
	require.NoError(t, err)
	badChannel := filepath.Join(t.TempDir(), "layout.json")
	require.NoError(t, os.WriteFile(badChannel, raw, 0o600))

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"busy port", []string{"-secret", goodSecret, "-addr", busy.Addr().String()}, "address already in use"},
		{"no secret", nil, "a secret is required"},
		{"two secrets", []string{"-secret", goodSecret, "-secret-file", "f"}, "not both"},
		{"unreadable secret file", []string{"-secret-file", "/nonexistent/secret"}, "read secret file"},
		{"unknown layout", []string{"-secret", goodSecret, "-layout", "nine-banks"}, "not a preset"},
		{"bad log format", []string{"-secret", goodSecret, "-log-format", "xml"}, "log format"},
		{"short secret", []string{"-secret", "s3cret"}, "at least 32 random bytes"},
		{"31 bytes of hex", []string{"-secret", strings.Repeat("ab", 31)}, "at least 32 random bytes"},
		{"a passphrase", []string{"-secret", "correct horse battery staple, twice over!"}, "at least 32 random bytes"},
		{"controller of no known kind", []string{"-secret", goodSecret, "-layout", kerongLayoutOf(t, "modbus", "modbus://10.0.0.1")}, `kind "modbus"`},
		{"bad controller URL", []string{"-secret", goodSecret, "-layout", kerongLayoutOf(t, "kerong-cu16", "kerong+serial:///dev/ttyUSB0?board=99")}, "board"},
		{"CU48 kind, CU16 address", []string{"-secret", goodSecret, "-layout", kerongLayoutOf(t, "kerong-cu48", "kerong+serial:///dev/ttyUSB0?board=1")},
			"name different models"},
		{"CU16 kind, CU48 address", []string{"-secret", goodSecret, "-layout", kerongLayoutOf(t, "kerong-cu16", "kerong+serial:///dev/ttyUSB0?board=1&model=cu48")},
			"name different models"},
		{"CU48 board address 10", []string{"-secret", goodSecret, "-layout", kerongLayoutOf(t, "kerong-cu48", "kerong+serial:///dev/ttyUSB0?board=10&model=cu48")},
			"0 to 9"},
		{"channel beyond the boards", []string{"-secret", goodSecret, "-layout", badChannel}, "channel 17"},
	}
	// Without -simulated the gateway refuses to run on pretend lock controllers, and a
	// production build refuses them altogether.
	err = run(t.Context(), []string{"-secret", goodSecret, "-db", filepath.Join(t.TempDir(), "gw.db")}, env(nil), io.Discard, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-simulated")
	err = run(t.Context(), []string{"-secret", goodSecret, "-db", filepath.Join(t.TempDir(), "gw.db")},
		env(map[string]string{"LOCKERNET_GATEWAY_SIMULATED": "maybe"}), io.Discard, nil)
	require.Error(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{"-layout", layoutPath, "-db", filepath.Join(dir, "gw.db")}, tc.args...)
			err := run(t.Context(), args, env(nil), io.Discard, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), goodSecret, "never echo the secret")
			assert.NotContains(t, err.Error(), "s3cret", "never echo the secret")
		})
	}
}
