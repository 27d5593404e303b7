package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
)

const e2eSecret = "e2e-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// syncBuffer is an io.Writer safe for the server goroutine and the test.
type syncBuffer = syncbuf.Buffer

// freePort returns a loopback port that was free a moment ago and that no
// other freePort call of this test binary returned: closed at once, a port
// can come back from the kernel on the very next call (a config then had
// listen == metrics.listen).
func freePort(t *testing.T) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		portsMu.Lock()
		fresh := !portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if fresh {
			return port
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// instance is a running "authsidecar serve", started through run exactly as
// main does.
type instance struct {
	base    string
	metrics string // http://host:port of the metrics listener
	stderr  *syncBuffer
	stop    func() error
}

func writeConfig(t *testing.T, dir, extra string) (path string, port int) {
	t.Helper()
	port = freePort(t)
	cfg := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nbase_url: \"http://127.0.0.1:%d\"\ndatabase: { driver: sqlite, path: %q }\nlog: { format: json, level: debug }\nmetrics: { listen: \"127.0.0.1:%d\" }\n%s",
		port, port, filepath.Join(dir, "auth.db"), freePort(t), extra)
	path = filepath.Join(dir, "sidecar.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, port
}

func startSidecar(t *testing.T, configPath string, port int, secret string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &instance{base: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: &syncBuffer{}}
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "AUTH_SECRET" {
			return secret
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"serve", "-config", configPath}, getenv, strings.NewReader(""), io.Discard, s.stderr)
	}()
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.stderr.String(), `"msg":"listening"`) {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.metrics = metricsURL(s.stderr.String())
	return s
}

// metricsURL reads the admin listener's address from the "listening" log
// line.
func metricsURL(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg         string
			MetricsAddr string `json:"metrics_addr"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
			return "http://" + l.MetricsAddr
		}
	}
	return ""
}

// needBetterAuth returns testdata/NAME, where `npm ci` installed Better
// Auth; without Node or the modules the test skips, and fails under CI.
func needBetterAuth(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", name)
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "better-auth"))
	if nodeErr != nil || modErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s cannot run under CI: node: %v, node_modules: %v", name, nodeErr, modErr)
		}
		t.Skipf("needs node and `npm ci` in %s (node: %v, modules: %v)", dir, nodeErr, modErr)
	}
	return dir
}

func (s *instance) do(t *testing.T, method, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// TestServeEndToEnd runs the real serve command and walks the two-step
// login over HTTP, then restarts it with the same and with another secret.
func TestServeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": r.Header.Get("X-User-Id"), "path": r.URL.Path})
	}))
	defer up.Close()
	cfgPath, port := writeConfig(t, dir, fmt.Sprintf("upstream: %q\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)

	res, body := s.do(t, "POST", "/api/auth/sign-up/email", `{"name":"E2E","email":"e2e@example.com","password":"correct-horse-battery"}`)
	if res.StatusCode != 200 || res.Header.Get("Set-Auth-Jwt") != "" {
		t.Fatalf("sign-up: got %d %s jwt=%q", res.StatusCode, body, res.Header.Get("Set-Auth-Jwt"))
	}
	res, body = s.do(t, "POST", "/api/auth/sign-in/email", `{"email":"e2e@example.com","password":"correct-horse-battery"}`)
	if res.StatusCode != 200 || res.Header.Get("Set-Auth-Jwt") != "" || len(res.Cookies()) != 1 {
		t.Fatalf("sign-in: got %d %s", res.StatusCode, body)
	}
	cookie := res.Cookies()[0]
	res, body = s.do(t, "GET", "/api/auth/get-session", "", "Cookie", cookie.Name+"="+cookie.Value)
	jwt := res.Header.Get("Set-Auth-Jwt")
	if res.StatusCode != 200 || jwt == "" {
		t.Fatalf("get-session: got %d %s jwt=%q", res.StatusCode, body, jwt)
	}
	if info, err := os.Stat(filepath.Join(dir, "auth.db")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("database file: got %v %v, want mode 0600", info.Mode(), err)
	}
	_, jwks1 := s.do(t, "GET", "/api/auth/jwks", "")
	res, body = s.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
	if res.StatusCode != 200 || !bytes.Contains(body, []byte(`"path":"/api/tasks"`)) {
		t.Fatalf("business request: got %d %s", res.StatusCode, body)
	}
	if res, _ := s.do(t, "GET", "/api/tasks", ""); res.StatusCode != 401 {
		t.Fatalf("business request without token: got %d, want 401", res.StatusCode)
	}
	// Unicode look-alikes of protected routes (fullwidth A, fullwidth API,
	// one-dot leaders, fullwidth w) are refused: an upstream that applies
	// NFKC would read them as /api/tasks, /api/admin/x, /ws/chat. Ordinary
	// non-ASCII paths still reach the upstream.
	for _, p := range []string{"/%EF%BC%A1pi/tasks", "/%EF%BC%A1%EF%BC%B0%EF%BC%A9/admin/x", "/x/%E2%80%A4%E2%80%A4/api/admin/x", "/%EF%BD%97s/chat"} {
		if res, body := s.do(t, "GET", p, ""); res.StatusCode != 400 || !bytes.Contains(body, []byte(`"code":"BAD_PATH"`)) {
			t.Errorf("look-alike %s: got %d %s, want 400 BAD_PATH", p, res.StatusCode, body)
		}
	}
	if res, body := s.do(t, "GET", "/files/%C3%A9t%C3%A9.pdf", ""); res.StatusCode != 200 || !bytes.Contains(body, []byte(`"path":"/files/été.pdf"`)) {
		t.Errorf("non-ASCII public path: got %d %s, want 200 from the upstream", res.StatusCode, body)
	}
	// The WebSocket route takes the token in the query: it must reach
	// neither the upstream nor the access log.
	if res, body := s.do(t, "GET", "/ws/chat?room=1&token="+jwt, ""); res.StatusCode != 200 || bytes.Contains(body, []byte("token")) {
		t.Fatalf("websocket route with ?token=: got %d %s", res.StatusCode, body)
	}
	// The log is flushed in batches (every 100 ms): wait for it.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.stderr.String(), `"class":"business"`) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(s.stderr.String(), `"msg":"request"`) || !strings.Contains(s.stderr.String(), `"class":"business"`) {
		t.Errorf("no access-log line with a class:\n%s", s.stderr.String())
	}
	if err := s.stop(); err != nil {
		t.Fatalf("serve returned %v on shutdown", err)
	}
	logs := s.stderr.String()
	for _, secretish := range []string{e2eSecret, "correct-horse-battery", cookie.Value, jwt} {
		if strings.Contains(logs, secretish) {
			t.Errorf("log contains a secret, password, cookie or token: %q", secretish)
		}
	}

	// Same secret: same keys.
	s = startSidecar(t, cfgPath, port, e2eSecret)
	if _, jwks2 := s.do(t, "GET", "/api/auth/jwks", ""); !bytes.Equal(jwks1, jwks2) {
		t.Errorf("restart with the same secret changed JWKS: %s -> %s", jwks1, jwks2)
	}
	if res, body := s.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt); res.StatusCode != 200 {
		t.Errorf("old JWT after restart with the same secret: got %d %s, want 200", res.StatusCode, body)
	}
	s.stop()

	// Another secret: the old key is dropped, loudly.
	s = startSidecar(t, cfgPath, port, "another-secret-0123456789abcdefghijklmnop")
	_, jwks3 := s.do(t, "GET", "/api/auth/jwks", "")
	var set struct{ Keys []struct{ Kid string } }
	json.Unmarshal(jwks1, &set)
	if len(set.Keys) != 1 || bytes.Contains(jwks3, []byte(set.Keys[0].Kid)) {
		t.Errorf("after AUTH_SECRET rotation the old key is still published: %s", jwks3)
	}
	if res, _ := s.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt); res.StatusCode != 401 {
		t.Errorf("JWT signed under the old AUTH_SECRET: got %d on a business route, want 401", res.StatusCode)
	}
	if !strings.Contains(s.stderr.String(), "signing key unusable") {
		t.Errorf("no loud log line about the undecryptable key:\n%s", s.stderr.String())
	}
}

// TestBetterAuthClient runs Better Auth's official client (npm
// better-auth@1.7.25) against the real binary's serve command. It needs
// `npm ci` in testdata/betterauth-client; CI does that, and there a
// missing Node setup is a failure, not a skip. Mail goes to the log
// (email.delivery: log), and the script reads the links from there through
// MAIL_URL, the shape of the reference server's GET /__mail. It runs with
// auth.sign_in_after_verification on (the reference server's
// autoSignInAfterVerification, which the script's defaults expect) and
// off, the sidecar's default (VERIFY_SIGNS_IN=no). The default run also
// makes the session and account calls (list-sessions to delete-user),
// each revocation checked on a business route (BUSINESS_URL).
func TestBetterAuthClient(t *testing.T) {
	dir := needBetterAuth(t, "betterauth-client")
	up := echoUpstream(t)
	for _, tc := range []struct {
		name, auth, signsIn string
		accounts            bool
	}{
		{"a verification link signs in", "auth: { sign_in_after_verification: true }\n", "yes", false},
		{"a verification link only verifies (the default)", "auth: { allow_delete_user: true }\n", "no", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("email: { delivery: log }\nupstream: %q\n%s", up.URL, tc.auth))
			s := startSidecar(t, cfgPath, port, e2eSecret)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "client-check.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "BASE_URL="+s.base, "MAIL_URL="+mailbox(t, s.stderr.String), "VERIFY_SIGNS_IN="+tc.signsIn)
			if tc.accounts {
				cmd.Env = append(cmd.Env, "ACCOUNT_CHECKS=1", "BUSINESS_URL="+s.base+"/api/tasks", "DELETE_USER=allowed")
			}
			out, err := cmd.CombinedOutput()
			t.Logf("client-check:\n%s", out)
			if err != nil {
				// The server's warnings and errors say why a call failed (a
				// 503 names its cause only in the log).
				for _, line := range strings.Split(s.stderr.String(), "\n") {
					if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
						t.Log(line)
					}
				}
				t.Fatalf("Better Auth client check failed: %v", err)
			}
			if !regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`).Match(out) {
				t.Fatal("client check did not report all passed")
			}
			// The recovery checks ran (they skip without MAIL_URL).
			want := []string{
				"PASS resetPassword with the mailed token returns {status:true}",
				"PASS sign-in with the new password works",
				"PASS verifyEmail returns {status:true,user:null}",
				"PASS a used verification link: 401 INVALID_TOKEN",
				"PASS forgetPassword (the old name) gets 404",
			}
			if tc.signsIn == "yes" {
				want = append(want, "PASS verifyEmail sets the auth.session_token cookie (signed in)")
			} else {
				want = append(want, "PASS verifyEmail sets no auth.session_token cookie (the link only verifies)", "PASS getSession after verifyEmail: still signed out")
			}
			if tc.accounts {
				want = append(want,
					"PASS listSessions returns the user's two sessions",
					"PASS the JWT's sid is its session's id, never its token",
					"PASS revokeSession: the revoked JWT is refused (401)",
					"PASS revokeSession: the other JWT still works",
					"PASS changeEmail of an unverified address: unchanged until the link",
					"PASS revokeOtherSessions: the revoked JWT is refused (401)",
					"PASS changePassword (the caller's older JWT too): the revoked JWT is refused (401)",
					"PASS changePassword (a JWT minted after it): the other JWT still works",
					"PASS revokeSessions: the revoked JWT is refused (401)",
					"PASS deleteUser: the revoked JWT is refused (401)",
				)
			}
			for _, w := range want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("client check lacks %q", w)
				}
			}
		})
	}
}

// TestGracefulShutdown: SIGTERM during a slow upstream request lets it
// finish; /readyz turns 503 as soon as shutdown starts; serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		w.Write([]byte("finished"))
	}))
	defer up.Close()
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)

	// Admin endpoints live on the metrics listener only: on the public port
	// /readyz is just another app path.
	if _, body := s.do(t, "GET", "/readyz", ""); string(body) != "finished" {
		t.Fatalf("/readyz on the public port: got %s, want it forwarded to the app", body)
	}
	res, err := http.Get(s.metrics + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz before shutdown: %v %v", res, err)
	}
	res.Body.Close()
	// A public path needs no token: the upstream answers slowly.
	got := make(chan string, 1)
	go func() {
		res, err := http.Get(s.base + "/slow")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- fmt.Sprint(res.StatusCode, " ", string(b))
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get(s.metrics + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 503 && bytes.Contains(b, []byte("shutting_down")) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz never turned 503 during shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if g := <-got; g != "200 finished" {
		t.Fatalf("in-flight request: got %q, want it to finish", g)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

// TestRateLimitAndHeaderLimitsEndToEnd: through the real serve wiring, a
// client cannot dodge the per-IP sign-in limit by sending its own
// X-Forwarded-For (the peer is not a trusted proxy), and oversized headers
// are refused by net/http with 431.
func TestRateLimitAndHeaderLimitsEndToEnd(t *testing.T) {
	cfgPath, port := writeConfig(t, t.TempDir(), "limits: { signin_per_ip: 2/m, signin_per_email: \"off\", signup_per_ip: \"off\" }\n")
	s := startSidecar(t, cfgPath, port, e2eSecret)
	var statuses []int
	for i := range 3 {
		res, _ := s.do(t, "POST", "/api/auth/sign-in/email", `{"email":"nobody@example.com","password":"wrong-password"}`,
			"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1), "X-Real-IP", fmt.Sprintf("203.0.113.%d", i+1))
		statuses = append(statuses, res.StatusCode)
		if i == 2 && res.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(statuses) != "[401 401 429]" {
		t.Fatalf("got %v, want [401 401 429]: forged X-Forwarded-For must not reset the limit", statuses)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/tasks HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\nConnection: close\r\n\r\n", strings.Repeat("a", 70<<10))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, "431") {
		t.Fatalf("70 KiB header: got %q, want 431", line)
	}
}
