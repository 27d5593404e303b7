package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/oidctest"
	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// baSecretForTest is the BETTER_AUTH_SECRET the Better Auth application
// runs with, and the sidecar is told of.
const baSecretForTest = "betterauth-takeover-test-secret-0123456789abcdef"

// TestImportBetterAuth takes over a real Better Auth 1.7.25 application
// (testdata/betterauth-takeover: admin, jwt() and generic OAuth plugins,
// provider tokens encrypted), on PostgreSQL and on SQLite as Better
// Auth's own migrations made them: users sign up and sign in there, the
// application stops, "db import-better-auth" copies its database, and
// the built binary serves at the same URL. The browsers keep their
// sessions (Better Auth's cookie in their jar) and get the sidecar's
// cookie with a JWT; Better Auth's JWT still passes a business route;
// the users sign in with the same passwords and ids; the admin plugin's
// roles open admin routes; the provider account is linked and its token,
// opened with the old secret and sealed with AUTH_SECRET, is the one
// Better Auth held. It needs `npm ci` in testdata/betterauth-takeover;
// under CI a missing Node setup fails it.
func TestImportBetterAuth(t *testing.T) {
	dir := needBetterAuth(t, "betterauth-takeover")
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			from := "sqlite:" + filepath.Join(t.TempDir(), "better-auth.db")
			if engine == "postgres" {
				from = pgtest.URL(t)
			}
			takeOver(t, dir, from)
		})
	}
}

func takeOver(t *testing.T, nodeDir, from string) {
	work := t.TempDir()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, work, fmt.Sprintf("upstream: %q\n", up.URL))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	carolIdP := oidctest.User{ID: "sub-carol", Username: "carol", Password: "carol-op-pw", Email: "carol@corp.test", EmailVerified: true, First: "Carol"}
	op := oidctest.StartOP(t, []string{base + "/api/auth/callback/corp"}, carolIdP)
	writeFile(t, cfgPath, readFile(t, cfgPath)+fmt.Sprintf("auth: { better_auth_secret_env: BETTER_AUTH_SECRET }\nidentity_providers:\n  - {id: corp, kind: oidc, issuer: %q, client_id: %s, client_secret_env: CORP_SECRET}\n", op.Issuer, op.ClientID))

	// Before: Better Auth serves at base.
	stopBA := startBetterAuth(t, nodeDir, port, from, op)
	ann := newAgent(t, base)
	annID := ann.json("POST", "/api/auth/sign-up/email", map[string]any{"name": "Ann", "email": "ann@example.com", "password": "ann-password-1"}, 200)["user"].(map[string]any)["id"].(string)
	oldJWT := ann.json("GET", "/api/auth/token", nil, 200)["token"].(string)
	// The application's server code makes an admin (the admin plugin's
	// createUser): role "admin,ops"; Ann and Carol have "user".
	bossID := ann.json("POST", "/test/create-user", map[string]any{"name": "Boss", "email": "boss@example.com", "password": "boss-password-1", "role": []string{"admin", "ops"}}, 200)["user"].(map[string]any)["id"].(string)
	carol := newAgent(t, base)
	if loc := carol.social("corp", op, carolIdP); !strings.HasSuffix(loc, "/done") {
		t.Fatalf("carol's sign-in at Better Auth went to %q", loc)
	}
	carolID := carol.user()["id"]
	carolAccount := accountOf(t, carol, "corp")
	carolToken := carol.json("POST", "/api/auth/get-access-token", map[string]any{"accountId": carolAccount}, 200)["accessToken"]
	if carolID == nil || carolToken == nil {
		t.Fatalf("carol at Better Auth: id %v, access token %v", carolID, carolToken)
	}
	stopBA()

	// The switch: import, then serve at the same URL.
	var out, errOut strings.Builder
	env := map[string]string{"AUTH_SECRET": e2eSecret, "BETTER_AUTH_SECRET": baSecretForTest}
	if err := run(context.Background(), argv(cfgPath, "db import-better-auth", "-from", from), func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("import: %v\n%s%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"3 users (2 with a password, 0 banned), 1 provider account, 2 live sessions", "1 signing key, 4 roles", "nothing left behind", "imported into"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("import said %q, want %q in it", out.String(), want)
		}
	}
	startBinary(t, cfgPath, port, "AUTH_SECRET="+e2eSecret, "BETTER_AUTH_SECRET="+baSecretForTest, "CORP_SECRET="+op.ClientSecret)

	t.Run("Better Auth's session cookie", func(t *testing.T) {
		res := ann.raw("GET", "/api/auth/get-session", nil)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var got struct{ User struct{ ID string } }
		if json.Unmarshal(body, &got); res.StatusCode != 200 || got.User.ID != annID || res.Header.Get("Set-Auth-Jwt") == "" {
			t.Fatalf("get-session with Better Auth's cookie: got %d %s jwt=%q, want 200, user %s and a JWT", res.StatusCode, body, res.Header.Get("Set-Auth-Jwt"), annID)
		}
		// The jar now holds the sidecar's cookie, and Better Auth's is gone.
		u, _ := url.Parse(base)
		var names []string
		for _, c := range ann.c.Jar.Cookies(u) {
			names = append(names, c.Name)
		}
		if strings.Join(names, " ") != "auth.session_token" {
			t.Errorf("cookies after get-session: got %v, want only auth.session_token", names)
		}
		if got := ann.user(); got == nil || got["id"] != annID {
			t.Errorf("get-session with the sidecar's cookie: got %v", got)
		}
		if code := status(t, &instance{base: base}, "/api/tasks", res.Header.Get("Set-Auth-Jwt")); code != 200 {
			t.Errorf("the sidecar's JWT: got %d, want 200", code)
		}
	})
	t.Run("Better Auth's JWT", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/api/tasks", nil)
		req.Header.Set("Authorization", "Bearer "+oldJWT)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var echo struct{ User string }
		json.NewDecoder(res.Body).Decode(&echo)
		res.Body.Close()
		if res.StatusCode != 200 || echo.User != annID {
			t.Errorf("a JWT Better Auth minted: got %d, X-User-Id %q, want 200 and %s", res.StatusCode, echo.User, annID)
		}
	})
	t.Run("same passwords and ids", func(t *testing.T) {
		for _, c := range []struct{ email, password, id string }{{"ann@example.com", "ann-password-1", annID}, {"boss@example.com", "boss-password-1", bossID}} {
			a := newAgent(t, base)
			if got := a.json("POST", "/api/auth/sign-in/email", map[string]any{"email": c.email, "password": c.password}, 200)["user"].(map[string]any)["id"]; got != c.id {
				t.Errorf("%s signs in as %v, want %s", c.email, got, c.id)
			}
			if c.id == bossID {
				// The admin plugin's roles open the admin routes.
				res := a.raw("GET", "/api/auth/get-session", nil)
				res.Body.Close()
				if code := status(t, &instance{base: base}, "/api/admin/users", res.Header.Get("Set-Auth-Jwt")); code != 200 {
					t.Errorf("boss on an admin route: got %d, want 200", code)
				}
			}
		}
		a := newAgent(t, base)
		a.json("POST", "/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": "wrong-password-1"}, 401)
	})
	t.Run("provider account", func(t *testing.T) {
		// Still signed in with Better Auth's cookie: the token Better
		// Auth encrypted, opened and sealed anew.
		if got := carol.json("POST", "/api/auth/get-access-token", map[string]any{"accountId": carolAccount}, 200)["accessToken"]; got != carolToken {
			t.Errorf("carol's access token at the sidecar: got %v, want Better Auth's %v", got, carolToken)
		}
		// Signing in with the provider here finds the same user.
		c := newAgent(t, base)
		c.social("corp", op, carolIdP)
		if got := c.user(); got == nil || got["id"] != carolID {
			t.Errorf("carol through corp at the sidecar: got %v, want %v", got, carolID)
		}
	})
}

// accountOf is the row id of the browser's user's account with provider,
// from list-accounts (Better Auth's and the sidecar's alike).
func accountOf(t *testing.T, a *agent, provider string) string {
	t.Helper()
	res := a.raw("GET", "/api/auth/list-accounts", nil)
	defer res.Body.Close()
	var accounts []struct{ ID, ProviderID string }
	if err := json.NewDecoder(res.Body).Decode(&accounts); err != nil {
		t.Fatalf("list-accounts: %v", err)
	}
	for _, acc := range accounts {
		if acc.ProviderID == provider {
			return acc.ID
		}
	}
	t.Fatalf("list-accounts: no %s account in %+v", provider, accounts)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startBetterAuth runs testdata/betterauth-takeover's server on port with
// its database at from, and returns how to stop it (SIGTERM, then wait).
func startBetterAuth(t *testing.T, dir string, port int, from string, op *oidctest.OP) (stop func()) {
	t.Helper()
	node := exec.Command("node", "server.mjs")
	node.Dir = dir
	node.Env = append(testEnv(), fmt.Sprintf("PORT=%d", port), fmt.Sprintf("BASE_URL=http://127.0.0.1:%d", port), "DATABASE="+from,
		"BETTER_AUTH_SECRET="+baSecretForTest, "OIDC_ISSUER="+op.Issuer, "OIDC_CLIENT_ID="+op.ClientID, "OIDC_CLIENT_SECRET="+op.ClientSecret)
	out := &syncBuffer{}
	node.Stdout, node.Stderr = out, out
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- node.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			node.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				node.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("Better Auth:\n%s", tail(out.String(), 4000))
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "LISTENING"); {
		if time.Now().After(deadline) {
			t.Fatalf("Better Auth did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop
}
