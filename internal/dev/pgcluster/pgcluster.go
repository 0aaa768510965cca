// Package pgcluster finds a PostgreSQL server for the dev stack and the tests: the one at a
// given URL, else the machine's local server, else a private cluster it creates and starts
// with the machine's initdb and pg_ctl in a directory of its own. As root it runs the
// cluster as the postgres (or nobody) user, because PostgreSQL refuses to run as root.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// LocalURL is the machine's own server, as installed by the distribution.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Reachable reports whether a server answers at databaseURL within timeout.
func Reachable(ctx context.Context, databaseURL string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return false
	}
	_ = conn.Close(ctx)
	return true
}

// Cluster is a private PostgreSQL cluster in Dir, listening on 127.0.0.1:Port.
type Cluster struct {
	Dir  string
	Port int
	cred *syscall.Credential
	bin  string
}

// URL is the connection string of the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// EnsureRunning initialises (first time) and starts the cluster in dir on port, unless it
// already runs there. The cluster keeps running after the process exits, unless Stop is
// called: the dev stack stops it on shutdown, the tests leave it for the next package.
func EnsureRunning(ctx context.Context, dir string, port int) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if Reachable(ctx, c.URL(), time.Second) {
		return c, nil
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx, data); err != nil {
			return nil, err
		}
	}
	if err := c.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=300", port, dir),
		"start"); err != nil {
		return nil, fmt.Errorf("start private postgres (log in %s): %w", filepath.Join(dir, "postgres.log"), err)
	}
	if !Reachable(ctx, c.URL(), 10*time.Second) {
		return nil, fmt.Errorf("private postgres on port %d did not answer", port)
	}
	return c, nil
}

// Stop stops the cluster (fast shutdown).
func (c *Cluster) Stop(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "stop")
}

func (c *Cluster) initdb(ctx context.Context, data string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("create cluster dir: %w", err)
	}
	if c.cred != nil {
		for _, p := range []string{c.Dir, data} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("hand cluster dir to the postgres user: %w", err)
			}
		}
	}
	if err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	return nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	// The server must outlive this process's signals (Ctrl-C goes to the whole group; the
	// dev stack stops it itself), so it gets its own process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// binDir finds the directory of initdb and pg_ctl: PATH, else the newest
// /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found: install postgresql or set DATABASE_URL")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// unprivileged returns the user to run PostgreSQL as when this process is root.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and no postgres or nobody user to run PostgreSQL as")
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WithDatabase returns databaseURL pointing at another database.
func WithDatabase(databaseURL, db string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// CreateDatabase creates db on the server of adminURL if it does not exist.
func CreateDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); err != nil {
		return fmt.Errorf("check database %s: %w", db, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		var exists bool
		if e := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); e == nil && exists {
			return nil // created concurrently
		}
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}
