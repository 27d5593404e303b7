package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests in this file's neighbours that say "binary" run the built
// authsidecar as separate processes, as an operator does: several replicas
// on one database, kill -9, a verifier in front of another process's JWKS.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// sidecarBinary builds ./cmd/authsidecar once per test run.
func sidecarBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "authsidecar-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "authsidecar")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// process is a running binary: a sidecar plus a way to kill it hard.
type process struct {
	*instance
	cmd *exec.Cmd
}

// startBinary runs "authsidecar serve -config cfgPath" with env added to
// the environment and waits until it listens.
func startBinary(t *testing.T, cfgPath string, port int, env ...string) *process {
	t.Helper()
	p, err := launch(t, cfgPath, port, env...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.waitListening(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

// launch starts the process without waiting for it to listen.
func launch(t *testing.T, cfgPath string, port int, env ...string) (*process, error) {
	t.Helper()
	cmd := exec.Command(sidecarBinary(t), "serve", "-config", cfgPath)
	cmd.Env = append(testEnv(), env...)
	s := &instance{base: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	cmd.Stdout = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	var stopErr error
	wait := func(sig syscall.Signal) error {
		once.Do(func() {
			cmd.Process.Signal(sig)
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				stopErr = fmt.Errorf("did not stop within 30s: %v", <-done)
			}
		})
		return stopErr
	}
	s.stop = func() error { return wait(syscall.SIGTERM) }
	p := &process{instance: s, cmd: cmd}
	t.Cleanup(func() {
		p.stop() // SIGTERM: the batched log is flushed
		if t.Failed() {
			t.Logf("%s log:\n%s", s.base, tail(s.stderr.String(), 4000))
		}
	})
	return p, nil
}

// kill is kill -9.
func (p *process) kill() {
	p.cmd.Process.Kill()
	p.instance.stop()
}

// waitListening waits for the "listening" log line and reads the metrics
// address from it.
func (p *process) waitListening(d time.Duration) error {
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), `"msg":"listening"`) {
		if p.cmd.ProcessState != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s did not start:\n%s", p.base, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.metrics = metricsURL(p.stderr.String())
	return nil
}

// testEnv is the environment without anything of the caller's that a
// sidecar reads (a developer's DATABASE_URL must not leak into a test).
func testEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		// NOTIFY_SOCKET: a test run under systemd (a CI unit) must not
		// tell that unit its sidecars are ready or stopping.
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "AUTH_SECRET", "DATABASE_URL", "GOGC", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// writeConfigFile writes a config from a YAML body with the ports filled
// in: the listen port, and "metrics: { listen: ... }" added.
func writeConfigFile(t *testing.T, dir, name, body string) (path string, port int) {
	t.Helper()
	port = freePort(t)
	cfg := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmetrics: { listen: \"127.0.0.1:%d\" }\nlog: { format: json, level: info }\n%s", port, freePort(t), body)
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, port
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// bodyTo copies a response body into w and closes it.
func bodyTo(w io.Writer, res *http.Response) {
	defer res.Body.Close()
	io.Copy(w, res.Body)
}

// runWithEnv runs one CLI command in process with exactly env as the
// environment and stdin.
func runWithEnv(env map[string]string, stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// cliWithEnv is runWithEnv that fails the test on an error.
func cliWithEnv(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, errOut, err := runWithEnv(env, "", args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// binaryCLI runs the built binary as an operator does, with AUTH_SECRET
// and env, and returns its stdout and stderr.
func binaryCLI(t *testing.T, env []string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(sidecarBinary(t), args...)
	cmd.Env = append(append(testEnv(), "AUTH_SECRET="+e2eSecret), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("authsidecar %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}
