package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLegacySignInBinary: the built binary with migration.legacy_signin
// moves a user of a tiny legacy application on its first sign-in: the
// JWT's sub and the upstream's X-User-Id are the legacy id.
func TestLegacySignInBinary(t *testing.T) {
	const secret = "legacy-secret-0123456789"
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Email, Password string }
		json.NewDecoder(r.Body).Decode(&in)
		if r.Header.Get("Authorization") != "Bearer "+secret || in.Email != "ann@example.com" || in.Password != "legacy-password-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": 1042, "email": "ann@example.com", "name": "Ann", "email_verified": true})
	}))
	defer app.Close()
	seen := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Get("X-User-Id") }))
	defer up.Close()
	dir := t.TempDir()
	cfg, port := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf("upstream: %q\ndatabase: { path: %q }\nmigration: { legacy_signin: { url: %q } }\n",
		up.URL, dir+"/auth.db", app.URL+"/api/legacy-signin"))
	p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret, "LEGACY_SIGNIN_SECRET="+secret)

	if res, _ := p.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"wrong-password-1"}`); res.StatusCode != 401 {
		t.Errorf("wrong password: got %d, want 401", res.StatusCode)
	}
	res, body := p.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"legacy-password-1"}`)
	if res.StatusCode != 200 || len(res.Cookies()) == 0 {
		t.Fatalf("sign-in: got %d %s", res.StatusCode, body)
	}
	c := res.Cookies()[0]
	res, body = p.do(t, "GET", "/api/auth/get-session", "", "Cookie", c.Name+"="+c.Value)
	jwt := res.Header.Get("Set-Auth-Jwt")
	parts := strings.Split(jwt, ".")
	if res.StatusCode != 200 || len(parts) != 3 {
		t.Fatalf("get-session: got %d %s, JWT %q", res.StatusCode, body, jwt)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct{ Sub string }
	if json.Unmarshal(payload, &claims); claims.Sub != "1042" {
		t.Errorf("JWT sub: got %q, want the legacy id 1042", claims.Sub)
	}
	if res, _ := p.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt); res.StatusCode != 200 {
		t.Errorf("business call: got %d, want 200", res.StatusCode)
	}
	if got := <-seen; got != "1042" {
		t.Errorf("upstream X-User-Id: got %q, want 1042", got)
	}
}

// TestCheckLegacySignIn: check reads lazy migration's secret as serve
// would, and never calls the legacy endpoint (a call is a password check).
func TestCheckLegacySignIn(t *testing.T) {
	var called atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Store(true) }))
	defer app.Close()
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir, fmt.Sprintf("migration: { legacy_signin: { url: %q } }\n", app.URL+"/signin"))
	env := map[string]string{"AUTH_SECRET": e2eSecret}
	if out, err := runCheck(t, cfg, env); err == nil || !strings.Contains(out, "FAIL  migration.legacy_signin.secret_env: $LEGACY_SIGNIN_SECRET is not set") {
		t.Errorf("without the secret: got %v\n%s", err, out)
	}
	env["LEGACY_SIGNIN_SECRET"] = "legacy-secret-0123456789"
	want := "ok    lazy migration: legacy sign-in at " + app.URL + ", secret from $LEGACY_SIGNIN_SECRET (not contacted)"
	if out, err := runCheck(t, cfg, env); err != nil || !strings.Contains(out, want) {
		t.Errorf("with the secret: got %v\n%s\nwant a line %q", err, out, want)
	}
	if called.Load() {
		t.Error("check called the legacy endpoint")
	}
}
