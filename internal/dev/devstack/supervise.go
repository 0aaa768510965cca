package devstack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// supervisor keeps the children of a shape running — both shapes use it: each child is a
// service, restarted when it dies, and stop ends them all, the last started first, then
// closes their log files.
type supervisor struct {
	binDir string // where a child's bin is found when it is not an absolute path (binary)
	out    io.Writer
	logger *slog.Logger
	pidDir string

	services []*service
	files    []*os.File // children's log files, closed once the children have stopped
}

// start resolves the child's binary, opens its log file if it has one and puts it under
// supervision with the stack's environment env plus its own; waitHealthy on the service
// waits until it answers.
func (sp *supervisor) start(ctx context.Context, c child, env []string) (*service, error) {
	bin := c.bin
	if !filepath.IsAbs(bin) {
		var err error
		if bin, err = binary(sp.binDir, c.bin); err != nil {
			return nil, err
		}
	}
	w := sp.out
	if c.logFile != "" {
		f, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", c.logFile, err)
		}
		sp.files = append(sp.files, f)
		w = f
	}
	sv := &service{child: c, bin: bin, env: append(append([]string{}, env...), c.env...), out: w,
		logger: sp.logger, pidDir: sp.pidDir}
	sp.services = append(sp.services, sv)
	sv.supervise(ctx)
	return sv, nil
}

// launch starts the child and waits until it answers.
func (sp *supervisor) launch(ctx context.Context, c child, env []string, timeout time.Duration) error {
	sv, err := sp.start(ctx, c, env)
	if err != nil {
		return err
	}
	return sv.waitHealthy(ctx, timeout)
}

// stop stops every service, the last started first (SIGTERM, then SIGKILL after grace).
func (sp *supervisor) stop(grace time.Duration) {
	for i := len(sp.services) - 1; i >= 0; i-- {
		sp.services[i].stop(grace)
	}
	for _, f := range sp.files {
		f.Close()
	}
}

// service is a child a shape keeps running, as compose's `restart: unless-stopped` does:
// when it exits, the supervisor logs why and starts it again after a back-off (1 s,
// doubling to 30 s, back to 1 s once it has run for a minute), while the rest keeps running.
// It is never given up on: a child that keeps dying is logged at every restart, with the
// count, at most 30 s apart. Its pid is in <data dir>/run/<name>.pid, so drills and
// operators can find it.
type service struct {
	child
	bin    string   // resolved path of child.bin (replace changes it: guarded by mu)
	env    []string // the stack's environment plus child.env (replace changes it: guarded by mu)
	out    io.Writer
	logger *slog.Logger
	pidDir string

	mu       sync.Mutex
	cur      *proc
	stopping bool
	restarts int
	started  chan struct{} // closed once the first start has been tried (set by supervise)
	firstErr error
	// replacing is set by replace while it stops the running process: its exit is not a
	// crash, and the next start (at once, of the new bin) is handed to swapped.
	replacing bool
	swapped   chan startResult
}

// startResult is a start of the child that replace waits for.
type startResult struct {
	p   *proc
	err error
}

const (
	restartMin   = time.Second
	restartMax   = 30 * time.Second
	restartReset = time.Minute
)

// supervise starts the service and keeps it running until stop; the first start's error
// is returned by waitStarted.
func (sv *service) supervise(ctx context.Context) {
	sv.started = make(chan struct{})
	go func() {
		backoff := restartMin
		first := true
		for {
			p, err := sv.start()
			if first {
				first = false
				sv.firstErr = err
				close(sv.started)
				if err != nil {
					return
				}
			}
			var ran time.Duration
			if err == nil {
				t0 := time.Now()
				<-p.done
				ran = time.Since(t0)
				err = p.err
				if err == nil {
					err = fmt.Errorf("exited with status 0")
				}
			}
			// Ctrl-C in the terminal reaches the children too, and one may exit before this
			// process has seen it: give the stop a moment to arrive before calling it a crash.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			sv.mu.Lock()
			stopping, replacing := sv.stopping, sv.replacing
			if !stopping && !replacing {
				sv.restarts++
			}
			n := sv.restarts
			sv.mu.Unlock()
			if stopping || ctx.Err() != nil {
				return
			}
			if replacing { // a deploy stopped it: start the new build at once
				backoff = restartMin
				continue
			}
			if ran >= restartReset {
				backoff = restartMin
			}
			sv.logger.Warn("process died; restarting it", "name", sv.name, "err", err, "ran", ran.Round(time.Millisecond),
				"restart_in", backoff, "restarts", n)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, restartMax)
		}
	}()
}

// start launches one run of the child and records its pid.
func (sv *service) start() (*proc, error) {
	sv.mu.Lock()
	bin, env := sv.bin, sv.env
	sv.mu.Unlock()
	p, err := startProcIn(sv.name, bin, sv.args, env, sv.out, sv.ownGroup)
	sv.mu.Lock()
	stopping := sv.stopping
	if err == nil {
		sv.cur = p
		if !stopping && sv.pidDir != "" {
			_ = os.WriteFile(filepath.Join(sv.pidDir, sv.name+".pid"), []byte(strconv.Itoa(p.cmd.Process.Pid)+"\n"), 0o600)
		}
	}
	// A start after replace, whether it came at once or after a crash's back-off, runs the
	// new bin: replace waits for it (and finds its pid in the pid file already).
	sv.replacing = false
	if sv.swapped != nil {
		sv.swapped <- startResult{p: p, err: err}
		sv.swapped = nil
	}
	sv.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if stopping { // stop raced with a restart
		p.stop(10 * time.Second)
	}
	return p, nil
}

// waitStarted returns the first start's error, after the child has been launched.
func (sv *service) waitStarted() error {
	<-sv.started
	return sv.firstErr
}

// current is the running process (or the one that last ran).
func (sv *service) current() *proc {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.cur
}

// binPath is the binary the child runs (replace changes it).
// envNow is the environment the child's next start gets.
func (sv *service) envNow() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]string{}, sv.env...)
}

func (sv *service) binPath() string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.bin
}

// replace stops the running process (SIGTERM, then SIGKILL after grace) and has the
// supervisor start bin in its place at once: a deploy, not a crash, so there is no back-off
// and no restart is counted. Every later start, a crash's restart included, runs bin. It
// returns the process it stopped and the one it started.
func (sv *service) replace(ctx context.Context, bin string, setEnv []string, grace time.Duration) (stopped, started *proc, err error) {
	ch := make(chan startResult, 1)
	sv.mu.Lock()
	if sv.stopping {
		sv.mu.Unlock()
		return nil, nil, fmt.Errorf("%s is stopping", sv.name)
	}
	sv.bin, sv.replacing, sv.swapped = bin, true, ch
	sv.env = withEnv(sv.env, setEnv)
	stopped = sv.cur
	sv.mu.Unlock()
	if stopped != nil {
		stopped.stop(grace)
	}
	select {
	case r := <-ch:
		return stopped, r.p, r.err
	case <-ctx.Done():
		return stopped, nil, ctx.Err()
	}
}

// Restarts counts how many times the supervisor has restarted the child.
func (sv *service) Restarts() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.restarts
}

// stop ends supervision and stops the running process (SIGTERM, then SIGKILL after grace).
func (sv *service) stop(grace time.Duration) {
	sv.mu.Lock()
	sv.stopping = true
	p := sv.cur
	sv.mu.Unlock()
	if p != nil {
		p.stop(grace)
	}
	if sv.pidDir != "" {
		_ = os.Remove(filepath.Join(sv.pidDir, sv.name+".pid"))
	}
}

// waitHealthy waits until the service's health URL answers, failing early if the child
// exits before it does.
func (sv *service) waitHealthy(ctx context.Context, timeout time.Duration) error {
	if err := sv.waitStarted(); err != nil {
		return err
	}
	if sv.health == "" {
		return nil
	}
	err := waitHTTP(ctx, sv.health, timeout, sv.current())
	if err != nil && sv.logFile != "" {
		return fmt.Errorf("%w; the end of %s:\n%s", err, sv.logFile, tailFile(sv.logFile, 3000))
	}
	return err
}

// tailFile is the last n bytes of a log file, for an error message.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// withEnv is env with each KEY=VALUE of set in place of env's own KEY (appended when env
// has none).
func withEnv(env, set []string) []string {
	out := append([]string{}, env...)
	for _, kv := range set {
		key, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { k, _, _ := strings.Cut(e, "="); return k == key })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}
