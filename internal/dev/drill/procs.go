package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one service process of a drill's system. It can be started again after it
// stopped (same binary, arguments, environment and ports), killed or stopped gracefully,
// which is what the drills do to it. Its output is appended to a log file.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	health  string // URL answering below 500 once the process is ready
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	runs int
}

// start launches the process and waits until its health URL answers.
func (p *proc) start(ctx context.Context, timeout time.Duration) error {
	if err := p.spawn(); err != nil {
		return err
	}
	return p.waitHealthy(ctx, timeout)
}

// spawn launches the process without waiting for it to be ready.
func (p *proc) spawn() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("%s is already running", p.name)
	}
	out, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.name, err)
	}
	p.runs++
	fmt.Fprintf(out, "=== lockernet-drill: start #%d of %s at %s\n", p.runs, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = out, out
	// Should the drill itself die, its children die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		out.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// waitHealthy waits until the health URL answers below 500, the process exits, or timeout.
func (p *proc) waitHealthy(ctx context.Context, timeout time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if probe(ctx, p.health) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up: %v (log: %s)", p.name, p.exitErr(), p.logPath)
		case <-ctx.Done():
			return fmt.Errorf("%s did not become healthy at %s within %s (log: %s)", p.name, p.health, timeout, p.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// running reports whether the process is up (started and not exited).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !closed(p.done)
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// send sends sig to the running process without waiting for it to act on it.
func (p *proc) send(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || closed(done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL, 0)
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM, grace)
}

func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || closed(done) {
		return
	}
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		<-done
		return
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// logTail returns the last n lines of the process's log.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logCount counts the log lines containing s.
func (p *proc) logCount(s string) int {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// logLines counts the log lines containing every one of subs.
func (p *proc) logLines(subs ...string) int {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

func closed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

func probe(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode < 500
}

// findBinaries returns where the service binaries are: dir, else next to this executable
// (make test-faults builds them all into bin/dev).
func findBinaries(dir string) (string, error) {
	if dir == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find own executable: %w", err)
		}
		dir = filepath.Dir(self)
	}
	var missing []string
	for _, name := range []string{"apiserver", "worker", "gateway"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return "", errors.New("binaries " + strings.Join(missing, ", ") + " not found in " + dir + " (build them with make dev-build, or set -bin)")
	}
	return dir, nil
}
