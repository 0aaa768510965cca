package devstack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// service is a child the cluster shape keeps running, as compose's `restart: unless-stopped`
// does: when it exits, the supervisor logs why and starts it again after a back-off (1 s,
// doubling to 30 s, back to 1 s once it has run for a minute), while the rest keeps running.
// Its pid is in <data dir>/run/<name>.pid, so drills and operators can find it.
type service struct {
	child
	bin    string   // resolved path of child.bin
	env    []string // the stack's environment plus child.env
	out    io.Writer
	logger *slog.Logger
	pidDir string

	mu       sync.Mutex
	cur      *proc
	stopping bool
	restarts int
	started  chan struct{} // closed once the first start has been tried (set by supervise)
	firstErr error
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
			stopping := sv.stopping
			if !stopping {
				sv.restarts++
			}
			n := sv.restarts
			sv.mu.Unlock()
			if stopping || ctx.Err() != nil {
				return
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
	p, err := startProcIn(sv.name, sv.bin, sv.args, sv.env, sv.out, sv.ownGroup)
	if err != nil {
		return nil, err
	}
	sv.mu.Lock()
	sv.cur = p
	stopping := sv.stopping
	sv.mu.Unlock()
	if stopping { // stop raced with a restart
		p.stop(10 * time.Second)
		return p, nil
	}
	if sv.pidDir != "" {
		_ = os.WriteFile(filepath.Join(sv.pidDir, sv.name+".pid"), []byte(strconv.Itoa(p.cmd.Process.Pid)+"\n"), 0o600)
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
