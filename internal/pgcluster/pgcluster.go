// Package pgcluster runs a throwaway PostgreSQL from Debian's binaries
// (initdb and postgres under /usr/lib/postgresql/*/bin): a temporary
// directory, a free loopback port, password authentication with a random
// password, fsync off (the data is thrown away). When the process runs as
// root, the server runs as Debian's postgres user, since postgres refuses
// root. The tests (internal/pgtest) and the load benchmark use it.
package pgcluster

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
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
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	bin      string // directory of initdb and postgres
	dir      string // everything: data, socket, log
	port     int
	password string
	uid, gid int // the OS user postgres runs as (0: ourselves)

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{}
}

// superuser is the cluster's superuser name.
const superuser = "authsidecar"

// Port returns the cluster's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// AdminURL is the superuser's URL of the "postgres" database: for
// creating and dropping databases.
func (c *Cluster) AdminURL() string {
	return (&url.URL{Scheme: "postgres", User: url.UserPassword(superuser, c.password),
		Host: "127.0.0.1:" + strconv.Itoa(c.port), Path: "/postgres", RawQuery: "sslmode=disable"}).String()
}

// New initializes a cluster in a new temporary directory and starts it on
// a free loopback port. Close stops it and removes the directory.
func New() (*Cluster, error) { return NewOnPort(0) }

// NewOnPort is New on a given port (0: a free one).
func NewOnPort(port int) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	pw := make([]byte, 16)
	rand.Read(pw)
	c.password = "pw-" + hex.EncodeToString(pw)
	// postgres refuses to run as root: run it as Debian's postgres user.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
		}
		c.uid, _ = strconv.Atoi(u.Uid)
		c.gid, _ = strconv.Atoi(u.Gid)
	}
	// Not t.TempDir(): its parents are 0700 root-owned, out of the postgres
	// user's reach. os.TempDir() is world-traversable.
	if c.dir, err = os.MkdirTemp("", "authsidecar-pg-"); err != nil {
		return nil, err
	}
	if err := c.chown(c.dir); err != nil {
		c.remove()
		return nil, err
	}
	pwfile := filepath.Join(c.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		c.remove()
		return nil, err
	}
	c.chown(pwfile)
	initdb := c.command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", superuser, "--auth=scram-sha-256",
		"--pwfile="+pwfile, "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		c.remove()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		c.port = port
		if port == 0 {
			if c.port, err = freePort(); err != nil {
				c.remove()
				return nil, err
			}
		}
		err = c.Start()
		if err == nil {
			return c, nil
		}
		// A free port may be taken before the server binds it: try another.
		if port != 0 || attempt == 2 || !strings.Contains(err.Error(), "already in use") {
			c.remove()
			return nil, err
		}
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// command runs name as the cluster's OS user.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	if c.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
		cmd.Env = append(os.Environ(), "HOME="+c.dir)
	}
	return cmd
}

func (c *Cluster) chown(path string) error {
	if c.uid == 0 {
		return nil
	}
	return os.Chown(path, c.uid, c.gid)
}

// Start starts the server (again, after Stop) on the same port and data,
// and waits until it accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("pgtest: already running")
	}
	logPath := filepath.Join(c.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command(filepath.Join(c.bin, "postgres"), "-D", c.data(), "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C on the test run reaches go test,
	// which then stops the server through Cleanup, not both at once.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	// If the test binary dies without cleaning up (a panic, kill -9), the
	// server goes too (immediate shutdown) instead of lingering.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c.proc, c.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("pgx", c.AdminURL())
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case <-done:
			c.proc = nil
			return fmt.Errorf("postgres exited at start: %s", c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			c.stopLocked()
			return fmt.Errorf("postgres not ready after 30s: %v\n%s", err, c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down fast (SIGINT: active transactions are rolled
// back, clients disconnected) and waits for it to exit.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Cluster) stopLocked() error {
	if c.proc == nil {
		return nil
	}
	c.proc.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.proc.Process.Kill()
		<-c.done
	}
	c.proc = nil
	return nil
}

// Close stops the server and removes its files.
func (c *Cluster) Close() {
	c.Stop()
	c.remove()
}

func (c *Cluster) remove() { os.RemoveAll(c.dir) }

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// binDir finds the newest Debian PostgreSQL's bin directory.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", errors.New("no initdb under /usr/lib/postgresql/*/bin")
	}
	sort.Slice(ok, func(i, j int) bool { return version(ok[i]) < version(ok[j]) })
	return ok[len(ok)-1], nil
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
