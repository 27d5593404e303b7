package jwks_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/proxy"
)

// issuerDir holds the Better Auth server the verifier mode is tested
// against: testdata/betterauth-issuer (npm ci there first).
var issuerDir = filepath.Join("..", "testdata", "betterauth-issuer")

// lockedBuffer collects the server's stderr for failure messages.
type lockedBuffer = syncbuf.Buffer

// startBetterAuth runs the real Better Auth issuer on a free port and
// returns its base URL. Without node or its packages the test is skipped,
// except in CI (CI=true), where skipping would hide that the check never
// ran.
func startBetterAuth(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := what + "; to run this test: cd testdata/betterauth-issuer && npm ci --no-audit --no-fund"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: not skipped)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found in PATH")
	}
	if _, err := os.Stat(filepath.Join(issuerDir, "node_modules", "better-auth", "package.json")); err != nil {
		missing("better-auth not installed in " + issuerDir)
	}
	cmd := exec.Command(node, "server.mjs")
	cmd.Dir = issuerDir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PORT=") && !strings.HasPrefix(kv, "BASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PORT=0")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		port, ok := strings.CutPrefix(strings.TrimSpace(s), "LISTENING ")
		if !ok || port == "" {
			t.Fatalf("server said %q, want \"LISTENING <port>\"; stderr:\n%s", s, stderr)
		}
		return "http://localhost:" + port
	case <-time.After(30 * time.Second):
		t.Fatalf("no LISTENING line within 30s; stderr:\n%s", stderr)
	}
	return ""
}

// TestBetterAuthIssuer verifies JWTs that a real Better Auth (jwt() plugin,
// EdDSA) issues, with keys fetched from its /api/auth/jwks: what a sidecar
// in verifier mode does in front of a Better Auth deployment.
func TestBetterAuthIssuer(t *testing.T) {
	base := startBetterAuth(t)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}

	body, _ := json.Marshal(map[string]string{"name": "Ada", "email": "ada@example.com", "password": "correct-horse-battery"})
	req, _ := http.NewRequest("POST", base+"/api/auth/sign-up/email", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base) // Better Auth refuses cookie-setting POSTs from untrusted origins
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var signup struct{ User struct{ ID string } }
	err = json.NewDecoder(res.Body).Decode(&signup)
	res.Body.Close()
	if res.StatusCode != 200 || err != nil || signup.User.ID == "" {
		t.Fatalf("sign-up: got %d %v, user id %q", res.StatusCode, err, signup.User.ID)
	}

	// The two ways Better Auth hands out a JWT.
	tokens := map[string]string{}
	res, err = client.Get(base + "/api/auth/token")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	json.NewDecoder(res.Body).Decode(&tok)
	res.Body.Close()
	tokens["GET /api/auth/token"] = tok.Token
	res, err = client.Get(base + "/api/auth/get-session")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tokens["get-session set-auth-jwt"] = res.Header.Get("Set-Auth-Jwt")

	f, err := jwks.New(jwks.Options{URL: base + "/api/auth/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: f})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatalf("load Better Auth's JWKS: %v", err)
	}
	v := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: base, Audience: base})
	for name, token := range tokens {
		t.Run(name, func(t *testing.T) {
			if token == "" {
				t.Fatal("Better Auth gave no token")
			}
			claims, err := v.Verify(context.Background(), token)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if claims.Subject != signup.User.ID {
				t.Errorf("got subject %q, want the user id %q", claims.Subject, signup.User.ID)
			}
			if ttl := claims.Expires.Sub(claims.NotBefore); ttl != 30*24*time.Hour {
				t.Errorf("got lifetime %v, want 720h (jwt.expirationTime 30d)", ttl)
			}
		})
	}
	// Another audience is refused: the issuer and audience checks are live.
	other := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: base, Audience: "https://other.example.com"})
	if _, err := other.Verify(context.Background(), tok.Token); err == nil {
		t.Error("token verified for another audience")
	}
}
