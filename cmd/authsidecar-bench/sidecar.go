package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// sidecar is a running "authsidecar serve".
type sidecar struct {
	*child
	addr    string // public listener, 127.0.0.1:PORT
	metrics string // metrics listener
	log     string // its stderr
}

// sidecarConfig is what differs between the sidecars the benchmark runs.
type sidecarConfig struct {
	name     string // file names in the temporary directory
	secret   string // AUTH_SECRET ("": none in its environment, as a verifier needs)
	db       string // SQLite file (full mode, unless pgURL)
	pgURL    string // PostgreSQL: database.driver postgres, DATABASE_URL in its environment
	jwksURL  string // mode verifier: keys.jwks_url, and no database
	issuer   string // auth.issuer ("": the default, base_url's origin)
	upstream string // http://127.0.0.1:PORT
	baseURL  string // "": http://<its own listen address>
	access   bool   // log.access
	// oneAddress: the load stands for as many clients as it has
	// connections, from the one address 127.0.0.1, so no client's share
	// of the upstream connections applies (proxy.upstream_client_share
	// 100%); row a's 32 connections stay within a share anyway.
	oneAddress bool
}

// yaml is the sidecar's config: production defaults (JSON log at info
// with the access log, metrics on), except that the rate limits are off
// so the benchmark's own sign-ins are not throttled, and a short shutdown
// grace so the benchmark ends quickly. A verifier gets neither database
// nor limits (it serves no /api/auth/*); it checks iss and aud against
// auth.issuer, which the benchmark sets to the issuing sidecars' base_url
// (by default a verifier would want the jwks_url's origin).
func (c sidecarConfig) yaml(listen, metrics string) string {
	q := func(s string) string { return `"` + s + `"` } // our values never hold quotes
	lines := []string{
		"listen: " + q(listen),
		"base_url: " + q(c.baseURL),
		"upstream: " + q(c.upstream),
	}
	switch {
	case c.jwksURL != "":
		lines = append(lines, "mode: verifier", "keys:", "  jwks_url: "+q(c.jwksURL))
	case c.pgURL != "":
		lines = append(lines, "database:", "  driver: postgres") // url_env DATABASE_URL, max_conns 10
	default:
		lines = append(lines, "database:", "  path: "+q(c.db))
	}
	if c.issuer != "" {
		lines = append(lines, "auth:", "  issuer: "+q(c.issuer))
	}
	lines = append(lines,
		"metrics:",
		"  listen: "+q(metrics),
		"log:",
		"  format: json",
		"  level: info",
		fmt.Sprintf("  access: %t", c.access),
	)
	if c.jwksURL == "" {
		lines = append(lines,
			"limits:",
			`  signin_per_email: "off"`,
			`  signin_per_ip: "off"`,
			`  signup_per_ip: "off"`,
		)
	}
	if c.oneAddress {
		lines = append(lines, "proxy:", "  upstream_client_share: 100%")
	}
	lines = append(lines, "shutdown:", "  grace: 5s", "")
	return strings.Join(lines, "\n")
}

// readyTimeout bounds the wait for /readyz; startAttempts bounds retries
// when a port picked free was taken before the sidecar bound it.
const (
	readyTimeout  = 30 * time.Second
	startAttempts = 3
)

// startSidecar starts "authsidecar serve" and waits until /readyz is 200
// (for a verifier, that means its keys are fetched).
func startSidecar(ctx context.Context, bin, dir string, c sidecarConfig) (*sidecar, error) {
	var lastErr error
	for range startAttempts {
		s, err := startSidecarOnce(ctx, bin, dir, c)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func startSidecarOnce(ctx context.Context, bin, dir string, c sidecarConfig) (*sidecar, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	listen, metrics := ports[0], ports[1]
	if c.baseURL == "" {
		c.baseURL = "http://" + listen
	}
	cfgPath := filepath.Join(dir, c.name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(c.yaml(listen, metrics)), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, c.name+".log")
	env := withoutVar(withoutVar(os.Environ(), "AUTH_SECRET"), "DATABASE_URL")
	if c.secret != "" {
		env = append(env, "AUTH_SECRET="+c.secret)
	}
	if c.pgURL != "" {
		env = append(env, "DATABASE_URL="+c.pgURL)
	}
	ch, _, err := startChild(ctx, childSpec{
		name: c.name,
		path: bin,
		args: []string{"serve", "-config", cfgPath},
		env:  env,
		log:  logPath,
	})
	if err != nil {
		return nil, err
	}
	s := &sidecar{child: ch, addr: listen, metrics: metrics, log: logPath}
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz every 50ms, at most readyTimeout.
func (s *sidecar) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		if done, err := s.exited(); done {
			return fmt.Errorf("%s exited (%v): %s", s.name, err, logTail(s.log))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.metrics+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %v: %s", s.name, readyTimeout, logTail(s.log))
}

// logTail is the end of a log file, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("log %s ends:\n%s", path, b)
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// newSecret is a random AUTH_SECRET for this run only.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// buildSidecar builds ./cmd/authsidecar from the module root into dir.
func buildSidecar(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the authsidecar module: run from its directory")
	}
	bin := filepath.Join(dir, "authsidecar")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/authsidecar")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/authsidecar: %w\n%s", err, out)
	}
	return bin, nil
}

// firstLogError is the first ERROR or WARN line of a sidecar's JSON log,
// shortened: the reason behind the errors a scenario counted.
func firstLogError(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
			if len(line) > 300 {
				line = line[:300] + "..."
			}
			return line
		}
	}
	return "no ERROR or WARN line"
}
