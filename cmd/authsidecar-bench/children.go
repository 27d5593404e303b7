package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the benchmark started and stops before it returns.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it tells our own modes to exit
	done  chan struct{}  // closed once the process has exited
	err   error          // Wait's result, set before done closes
}

// childSpec says how to start one child.
type childSpec struct {
	name string
	path string
	args []string
	env  []string // nil: the benchmark's environment
	log  string   // file receiving the child's stderr (and stdout unless announce)
	// announce: the child prints "listening HOST:PORT" as its first line
	// on stdout once it accepts connections (our own modes do).
	announce bool
}

// announceTimeout bounds the wait for a child's "listening" line.
const announceTimeout = 15 * time.Second

// startChild starts s and, when s.announce, returns the address it
// announced.
func startChild(ctx context.Context, s childSpec) (*child, string, error) {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", s.name, err)
	}
	defer logf.Close() // the child holds its own copy of the descriptor
	cmd := exec.Command(s.path, s.args...)
	cmd.Env = s.env
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	var stdout io.ReadCloser
	if s.announce {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, "", fmt.Errorf("%s: %w", s.name, err)
		}
	} else {
		cmd.Stdout = logf
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", s.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", s.name, err)
	}
	c := &child{name: s.name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	if !s.announce {
		go c.wait()
		return c, "", nil
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, br) // until the child exits and closes it
	}()
	go c.wait()
	timer := time.NewTimer(announceTimeout)
	defer timer.Stop()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			c.stop()
			return nil, "", fmt.Errorf("%s: announced %q, want \"listening HOST:PORT\" (log: %s)", s.name, line, s.log)
		}
		return c, addr, nil
	case <-timer.C:
		c.stop()
		return nil, "", fmt.Errorf("%s: not listening after %v (log: %s)", s.name, announceTimeout, s.log)
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

func (c *child) wait() {
	c.err = c.cmd.Wait()
	close(c.done)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// stopGrace is how long a child gets after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// stop ends the child: SIGTERM (and stdin closed), then SIGKILL after
// stopGrace. It returns once the process has exited.
func (c *child) stop() {
	c.stdin.Close()
	if done, _ := c.exited(); done {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.cmd.Process.Kill()
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		c.cmd.Process.Kill()
		<-c.done
	}
}

// children stops everything started, newest first.
type children struct {
	mu   sync.Mutex
	list []*child
}

func (cs *children) add(c *child) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.list = append(cs.list, c)
}

func (cs *children) stopAll() {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}
