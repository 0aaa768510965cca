package devstack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the dev stack. Children stay in the stack's process group, so
// Ctrl-C in the terminal reaches them too; Pdeathsig kills them if the stack itself dies
// without cleaning up, so no orphan survives.
type proc struct {
	name     string
	cmd      *exec.Cmd
	done     chan struct{}
	err      error
	ownGroup bool
}

// startProcIn starts a child; with ownGroup, in a process group of its own, for a child
// that forks workers (nginx): when it exits, whatever is left of its group is killed, so
// no orphaned worker keeps serving its port. Its output must then be a file, not a pipe the
// workers would hold open.
func startProcIn(name, bin string, args []string, env []string, out io.Writer, ownGroup bool) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: ownGroup}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), ownGroup: ownGroup}
	if f, ok := out.(*os.File); ok {
		// A log file: the child writes it directly, and Wait does not wait for its children.
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		go func() {
			p.err = cmd.Wait()
			if ownGroup {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			close(p.done)
		}()
		return p, nil
	}
	if ownGroup {
		return nil, fmt.Errorf("start %s: a process group of its own needs a log file", name)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		prefixLines(out, name, stdout)
	}()
	go func() {
		wg.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to stop (SIGTERM) and kills it if it has not within grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var outMu sync.Mutex

func prefixLines(out io.Writer, name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		outMu.Lock()
		fmt.Fprintf(out, "%-10s | %s\n", name, sc.Text())
		outMu.Unlock()
	}
}

// binDirOr is dir, else the directory of the running dev stack, where make run and make
// run-cluster build the binaries it starts.
func binDirOr(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	return filepath.Dir(self), nil
}

// binary finds a sibling executable in dir, else next to the running dev stack (make run
// builds them together).
func binary(dir, name string) (string, error) {
	dir, err := binDirOr(dir)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("binary %s not found in %s (build with make run or make run-cluster): %w", name, dir, err)
	}
	return p, nil
}

// waitHTTP waits until url answers with a status below 500.
func waitHTTP(ctx context.Context, url string, timeout time.Duration, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if ok := probe(ctx, url); ok {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during start-up: %v", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s did not become healthy at %s", p.name, url)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
