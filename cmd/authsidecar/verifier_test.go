package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingUpstream echoes the identity it was given and counts requests,
// so a test can tell "answered by the sidecar" from "forwarded".
func countingUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": r.Header.Get("X-User-Id"), "authorization": r.Header.Get("Authorization"), "path": r.URL.Path})
	}))
	t.Cleanup(up.Close)
	return up, &n
}

// TestVerifierEndToEnd runs a verifier-only sidecar in front of a second
// service, fed by a full sidecar's /api/auth/jwks over HTTP: it starts
// while the issuer is down (503 KEYS_UNAVAILABLE, /readyz failing) and
// recovers by itself; it serves no /api/auth/*; it learns a rotated key
// on the first token that names it; and once the issuer has been gone past
// max_age + stale_if_error its keys become unusable.
func TestVerifierEndToEnd(t *testing.T) {
	dir := t.TempDir()
	up, hits := countingUpstream(t)
	issuerPort := freePort(t)
	issuerBase := fmt.Sprintf("http://127.0.0.1:%d", issuerPort)
	verifierCfg, vport := writeConfigFile(t, dir, "verifier.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://api2.example.test"
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks", max_age: 2s, cooldown: 1s, stale_if_error: 2s }
`, up.URL, issuerBase))
	v := startBinary(t, verifierCfg, vport) // no AUTH_SECRET, no database
	if strings.Contains(v.stderr.String(), "AUTH_SECRET") && !strings.Contains(v.stderr.String(), "listening") {
		t.Fatalf("verifier wanted a secret:\n%s", v.stderr.String())
	}

	// The issuer is not up yet: no keys, so 503 KEYS_UNAVAILABLE with
	// Retry-After, never 401 (which would make clients drop good tokens).
	res, body := v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer eyJhbGciOiJFZERTQSIsImtpZCI6IngifQ.eyJzdWIiOiJ4In0.c2ln")
	if res.StatusCode != 503 || jsonCode(body) != "KEYS_UNAVAILABLE" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("verifier without keys: got %d %s Retry-After=%q, want 503 KEYS_UNAVAILABLE with Retry-After", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	if res, _ := http.Get(v.metrics + "/readyz"); res == nil || res.StatusCode != 503 {
		t.Errorf("/readyz without keys: got %v, want 503", res)
	}

	issuerCfg := filepath.Join(dir, "issuer.yaml")
	writeFile(t, issuerCfg, fmt.Sprintf(`listen: "127.0.0.1:%d"
base_url: %q
upstream: %q
database: { driver: sqlite, path: %q }
metrics: { listen: "127.0.0.1:%d" }
keys: { cooldown: 1s }
`, issuerPort, issuerBase, up.URL, filepath.Join(dir, "issuer.db"), freePort(t)))
	iss := startBinary(t, issuerCfg, issuerPort, "AUTH_SECRET="+e2eSecret)
	cookie, jwt := signUp(t, iss.instance, "ann@example.com", "correct-horse-battery")

	// The verifier fetches again by itself (backoff) and serves.
	start := time.Now()
	for status(t, v.instance, "/api/tasks", jwt) != 200 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("verifier did not recover within 15s of the issuer starting:\n%s", v.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("verifier served %v after the issuer came up", time.Since(start).Round(time.Millisecond))
	res, body = v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
	var seen map[string]string
	json.Unmarshal(body, &seen)
	if res.StatusCode != 200 || seen["user"] == "" || seen["authorization"] != "" {
		t.Errorf("business request through the verifier: got %d %s, want the user id and no Authorization upstream", res.StatusCode, body)
	}
	if res, _ := http.Get(v.metrics + "/readyz"); res == nil || res.StatusCode != 200 {
		t.Errorf("/readyz with keys: got %v, want 200", res)
	}
	if got := status(t, v.instance, "/api/tasks", jwt[:len(jwt)-4]+"AAAA"); got != 401 {
		t.Errorf("tampered JWT through the verifier: got %d, want 401", got)
	}

	// /api/auth/* is the issuer's: 404 JSON here, never forwarded.
	before := hits.Load()
	for _, path := range []string{"/api/auth/get-session", "/api/auth/jwks", "/api/auth/sign-in/email"} {
		res, body := v.do(t, "GET", path, "", "Cookie", cookie)
		if res.StatusCode != 404 || jsonCode(body) != "NOT_FOUND" {
			t.Errorf("verifier %s: got %d %s, want 404 NOT_FOUND JSON", path, res.StatusCode, body)
		}
	}
	if hits.Load() != before {
		t.Error("the verifier forwarded an /api/auth/* request upstream")
	}

	// A verifier cannot read roles: its admin routes (the defaults here)
	// answer 403 JSON to a valid token and are never forwarded.
	before = hits.Load()
	res, body = v.do(t, "GET", "/api/admin/users", "", "Authorization", "Bearer "+jwt)
	if res.StatusCode != 403 || jsonCode(body) != "FORBIDDEN" || hits.Load() != before {
		t.Errorf("admin route through the verifier: got %d %s (upstream hits +%d), want 403 FORBIDDEN, nothing forwarded", res.StatusCode, body, hits.Load()-before)
	}
	// "routes.admin: []" says the upstream checks roles itself.
	optCfg, optPort := writeConfigFile(t, dir, "verifier-opt-out.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://api2.example.test"
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks" }
routes: { admin: [] }
`, up.URL, issuerBase))
	opt := startBinary(t, optCfg, optPort)
	if got := status(t, opt.instance, "/api/admin/users", jwt); got != 200 {
		t.Errorf("admin route through a verifier with routes.admin: []: got %d, want 200 (forwarded)", got)
	}
	// Written out without a database, they are refused at start.
	badCfg, _ := writeConfigFile(t, dir, "verifier-admin.yaml", fmt.Sprintf(`mode: verifier
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks" }
routes:
  admin: [{ prefix: /api/ops/, roles: [ops] }]
`, up.URL, issuerBase))
	raw, _ := os.ReadFile(badCfg)
	line := 1 + strings.Count(string(raw[:strings.Index(string(raw), "  admin:")]), "\n")
	if _, _, err := cli(t, "", "", "serve", "-config", badCfg); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("verifier-admin.yaml:%d: routes.admin: needs a database to read user_role", line)) {
		t.Errorf("serve with admin routes written for a verifier without a database: got %v, want a refusal at line %d", err, line)
	}

	// A rotated key signs once it has been published longer than the
	// cooldown (1s, plus 5s): the verifier accepts it at first sight.
	cliWithEnv(t, map[string]string{"AUTH_SECRET": e2eSecret}, argv(issuerCfg, "keys rotate")...)
	var fresh string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if fresh = getJWT(t, iss.instance, cookie); kidOf(t, fresh) != kidOf(t, jwt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the issuer never signed with the rotated-in key")
		}
	}
	if got := status(t, v.instance, "/api/tasks", fresh); got != 200 {
		t.Errorf("the verifier on the first JWT of the rotated-in key: got %d, want 200", got)
	}

	// The issuer goes away: the last good keys serve until max_age +
	// stale_if_error (4s here), then 503 KEYS_UNAVAILABLE.
	iss.stop()
	if got := status(t, v.instance, "/api/tasks", jwt); got != 200 {
		t.Errorf("right after the issuer stopped: got %d, want 200 (keys still fresh)", got)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, body := v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
		if res.StatusCode == 503 && jsonCode(body) == "KEYS_UNAVAILABLE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys never became unusable with the issuer gone: last %d %s", res.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res, _ := http.Get(v.metrics + "/metrics"); res != nil {
		var b strings.Builder
		bodyTo(&b, res)
		for _, want := range []string{`authsidecar_keyset_refreshes_total{result="error"`, `authsidecar_keyset_usable 0`} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("verifier /metrics lacks %s", want)
			}
		}
	}
}

// TestVerifierBetterAuth: a real Better Auth server (memory adapter, jwt()
// plugin, 30-day tokens) is the issuer and this binary the verifier: any
// issuer that follows the contract works. It needs `npm ci` in
// testdata/betterauth-issuer; under CI a missing Node setup fails it.
func TestVerifierBetterAuth(t *testing.T) {
	dir := needBetterAuth(t, "betterauth-issuer")
	baPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", baPort)
	node := exec.Command("node", "server.mjs")
	node.Dir = dir
	node.Env = append(testEnv(), fmt.Sprintf("PORT=%d", baPort), "BASE_URL="+base)
	nodeOut := &syncBuffer{}
	node.Stdout, node.Stderr = nodeOut, nodeOut
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Process.Kill(); node.Wait() })
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(nodeOut.String(), "LISTENING"); {
		if time.Now().After(deadline) {
			t.Fatalf("Better Auth did not start:\n%s", nodeOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	up, _ := countingUpstream(t)
	cfg, port := writeConfigFile(t, t.TempDir(), "verifier.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://api2.example.test"
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks", cooldown: 1s }
`, up.URL, base))
	v := startBinary(t, cfg, port)

	ba := &instance{base: base}
	res, body := ba.do(t, "POST", "/api/auth/sign-up/email", `{"name":"Ann","email":"ann@example.com","password":"correct-horse-battery"}`, "Origin", base)
	var signed struct{ User struct{ ID string } }
	if json.Unmarshal(body, &signed); res.StatusCode != 200 || signed.User.ID == "" || len(res.Cookies()) == 0 {
		t.Fatalf("Better Auth sign-up: got %d %s", res.StatusCode, body)
	}
	var cookies []string
	for _, c := range res.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	res, body = ba.do(t, "GET", "/api/auth/token", "", "Cookie", strings.Join(cookies, "; "), "Origin", base)
	var tok struct{ Token string }
	if json.Unmarshal(body, &tok); res.StatusCode != 200 || tok.Token == "" {
		t.Fatalf("Better Auth /token: got %d %s", res.StatusCode, body)
	}

	// Better Auth made its key with the first token: the verifier learns
	// it on the unknown kid (within keys.cooldown).
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, body = v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+tok.Token)
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Better Auth's JWT through the verifier: got %d %s\n%s", res.StatusCode, body, v.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var seen map[string]string
	if json.Unmarshal(body, &seen); seen["user"] != signed.User.ID {
		t.Errorf("upstream saw user %q, want Better Auth's user id %q", seen["user"], signed.User.ID)
	}
	if got := status(t, v.instance, "/api/tasks", tok.Token[:len(tok.Token)-4]+"AAAA"); got != 401 {
		t.Errorf("tampered Better Auth JWT: got %d, want 401", got)
	}
}

func jsonCode(body []byte) string {
	var e struct{ Code string }
	json.Unmarshal(body, &e)
	return e.Code
}
