package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// TestSidecarIdentityProviders runs the sidecar as serve does, with a
// real OpenID provider, a Google stand-in and a provider that is down:
// readiness ignores providers; a sign-in goes through the listener from
// sign-in/social to a business call with the JWT; the access log holds
// the callback's path without its code; a reload changes a provider's
// rules at once, and a reload whose secret is missing is refused whole.
func TestSidecarIdentityProviders(t *testing.T) {
	up := echoUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	op := oidctest.StartOP(t, []string{base + "/api/auth/callback/corp"})
	si := oidctest.StartStandIn(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "sidecar.yaml")
	file := func(googleSignUp bool, googleSecretEnv string) string {
		return fmt.Sprintf(`listen: 127.0.0.1:0
base_url: %q
upstream: %q
database: { path: %q }
metrics: { listen: 127.0.0.1:0 }
identity_providers:
  - id: corp
    kind: oidc
    issuer: %q
    client_id: %s
    client_secret_env: CORP_CLIENT_SECRET
  - id: google
    kind: google
    client_id: %s
    client_secret_env: %s
    sign_up: %v
    endpoints: { authorization: %q, token: %q, jwks: %q }
  - id: down
    kind: oidc
    issuer: http://127.0.0.1:1
    client_id: nobody
`, base, up.URL, filepath.Join(dir, "auth.db"), op.Issuer, op.ClientID, si.ClientID, googleSecretEnv, googleSignUp,
			si.URL+"/o/oauth2/v2/auth", si.URL+"/token", si.URL+"/oauth2/v3/certs")
	}
	writeFile(t, path, file(true, "GOOGLE_CLIENT_SECRET"))
	env := map[string]string{"AUTH_SECRET": e2eSecret, "CORP_CLIENT_SECRET": op.ClientSecret, "GOOGLE_CLIENT_SECRET": si.ClientSecret}
	getenv := func(k string) string { return env[k] }
	cfg, secret, hash, err := LoadConfig(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	ready := make(chan struct{}, 8)
	s, err := New(context.Background(), Options{Config: cfg, Secret: secret, Getenv: getenv, Log: &log, Listener: ln,
		ConfigPath: path, ConfigHash: hash, OnReady: func() { ready <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-ready
	if res, err := http.Get("http://" + s.AdminAddr().String() + "/readyz"); err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz with a provider down: got %v %v, want 200", res, err)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start := func(provider string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/api/auth/sign-in/social", strings.NewReader(`{"provider":"`+provider+`","callbackURL":"/app","errorCallbackURL":"/oops"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base) // a browser does; the session cookie requires it
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		u, _ := m["url"].(string)
		if res.StatusCode != 200 || u == "" {
			t.Fatalf("sign-in/social %s: got %d %v", provider, res.StatusCode, m)
		}
		return u
	}
	get := func(u string) *http.Response {
		t.Helper()
		res, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	cb, err := oidctest.Login(ctx, start("corp"), oidctest.Alice)
	if err != nil {
		t.Fatal(err)
	}
	if res := get(cb); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/app" {
		t.Fatalf("callback: got %d %q, want 302 /app", res.StatusCode, res.Header.Get("Location"))
	}
	res := get(base + "/api/auth/get-session")
	jwt := res.Header.Get("Set-Auth-Jwt")
	req, _ := http.NewRequest("GET", base+"/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var echoed map[string]string
	json.NewDecoder(res.Body).Decode(&echoed)
	res.Body.Close()
	if res.StatusCode != 200 || echoed["user"] == "" {
		t.Fatalf("business call: got %d %v, want 200 with the user id", res.StatusCode, echoed)
	}
	code := mustParam(t, cb, "code")
	time.Sleep(200 * time.Millisecond) // the access log is batched
	if all := log.String(); strings.Contains(all, code) || !strings.Contains(all, `"path":"/api/auth/callback/corp"`) {
		t.Errorf("access log: want the callback path without its code %q:\n%s", code, all)
	}

	// sign_up: false for google, by reload: a new Google user is refused.
	writeFile(t, path, file(false, "GOOGLE_CLIENT_SECRET"))
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	<-ready
	si.Google.Email, si.Google.Sub = "newcomer@example.com", "2000002"
	if res := get(get(start("google")).Header.Get("Location")); !strings.Contains(res.Header.Get("Location"), "error=signup_disabled") {
		t.Errorf("after the reload: got %q, want error=signup_disabled", res.Header.Get("Location"))
	}
	// A provider whose secret is not in the environment: refused whole.
	writeFile(t, path, file(true, "MISSING_SECRET"))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "MISSING_SECRET") {
		t.Errorf("Reload without the secret: got %v, want it refused naming $MISSING_SECRET", err)
	}
	<-ready
	if res := get(get(start("google")).Header.Get("Location")); !strings.Contains(res.Header.Get("Location"), "error=signup_disabled") {
		t.Errorf("after the refused reload: got %q, want the rules in force unchanged", res.Header.Get("Location"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func mustParam(t *testing.T, raw, key string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(key)
}
