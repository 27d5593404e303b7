package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// TestAccountTakeoverBinary runs issue 30's two red-team sequences against
// the built binary, configured as the docs say (SQLite, email.delivery:
// log), with real OpenID providers (zitadel's example OP): "corp", as
// most are, and "lax", trusted with unverified addresses. The attacker
// never reaches the victim's user id, through a session, a JWT or the
// X-User-Id the upstream receives.
func TestAccountTakeoverBinary(t *testing.T) {
	dir := t.TempDir()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, dir, fmt.Sprintf("upstream: %q\n%s\nemail: { delivery: log }\n", up.URL, mailLimits))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var (
		malIdP   = oidctest.User{ID: "sub-mal", Username: "mallory", Password: "mallory-op-pw", Email: "mallory@evil.test", EmailVerified: true}
		squatIdP = oidctest.User{ID: "sub-squat", Username: "squat", Password: "squat-op-pw", Email: "victim2@corp.test", EmailVerified: false}
		ownerIdP = oidctest.User{ID: "sub-owner", Username: "owner", Password: "owner-op-pw", Email: "victim2@corp.test", EmailVerified: true}
	)
	corp := oidctest.StartOP(t, []string{base + "/api/auth/callback/corp"}, malIdP, squatIdP, ownerIdP)
	lax := oidctest.StartOP(t, []string{base + "/api/auth/callback/lax"}, squatIdP)
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "identity_providers:\n  - {id: corp, kind: oidc, issuer: %q, client_id: %s, client_secret_env: CORP_SECRET}\n  - {id: lax, kind: oidc, issuer: %q, client_id: %s, client_secret_env: LAX_SECRET, trust_unverified_email: true}\n",
		corp.Issuer, corp.ClientID, lax.Issuer, lax.ClientID)
	f.Close()
	p := startBinary(t, cfgPath, port, "AUTH_SECRET="+e2eSecret, "CORP_SECRET="+corp.ClientSecret, "LAX_SECRET="+lax.ClientSecret)
	log := p.stderr.String

	t.Run("link-social and change-email", func(t *testing.T) {
		const victim = "victim@corp.test"
		// 1. Mallory signs up with a password and never verifies.
		mal := newAgent(t, base)
		mal.json("POST", "/api/auth/sign-up/email", map[string]any{"name": "M", "email": "mallory@evil.test", "password": "mallory-password-1"}, 200)
		// 2. link-social with her own provider account: refused.
		if code := mal.json("POST", "/api/auth/link-social", map[string]any{"provider": "corp"}, 403)["code"]; code != "EMAIL_NOT_VERIFIED" {
			t.Errorf("link-social: code %v, want EMAIL_NOT_VERIFIED", code)
		}
		// 3. change-email to the victim's address: answered, not applied;
		// the link goes to the victim's inbox.
		mal.json("POST", "/api/auth/change-email", map[string]any{"newEmail": victim}, 200)
		if u := mal.user(); u["email"] != "mallory@evil.test" {
			t.Errorf("after change-email: %v, want the address unchanged", u)
		}
		waitMail(t, log, "email_verification", victim, 0)
		// 4. The victim signs up: the address is hers to take.
		vic := newAgent(t, base)
		victimID := vic.json("POST", "/api/auth/sign-up/email", map[string]any{"name": "V", "email": victim, "password": "victim-password-1"}, 200)["user"].(map[string]any)["id"].(string)
		// The old link, followed by the victim, would move Mallory onto an
		// address that is taken now: refused.
		if res := vic.get(waitMail(t, log, "email_verification", victim, 0)); res.StatusCode == 200 {
			t.Errorf("the change link onto a taken address: got 200")
		}
		// 5. Mallory signs in with her provider: not the victim's user.
		// Her local account's address is unverified: not joined either.
		m2 := newAgent(t, base)
		loc := m2.social("corp", corp, malIdP)
		if !strings.Contains(loc, "error=account_not_linked") {
			t.Errorf("Mallory's provider sign-in: got %q, want error=account_not_linked", loc)
		}
		m2.notVictim(t, loc, victimID)
	})

	t.Run("a link made under the old rules", func(t *testing.T) {
		const victim = "victim3@corp.test"
		mal := newAgent(t, base)
		malID := mal.json("POST", "/api/auth/sign-up/email", map[string]any{"name": "M", "email": "mallory3@evil.test", "password": "mallory-password-1"}, 200)["user"].(map[string]any)["id"].(string)
		// The database as the old rules left it: Mallory's provider
		// account linked to her unverified account, moved to the
		// victim's address at once.
		// busy_timeout: the running sidecar may hold the write lock.
		sqliteExec(t, filepath.Join(dir, "auth.db")+"?_pragma=busy_timeout(10000)",
			fmt.Sprintf(`INSERT INTO account (id, account_id, provider_id, user_id, created_at, updated_at) VALUES ('old-link', %q, 'corp', %q, 0, 0)`, malIdP.ID, malID),
			fmt.Sprintf(`UPDATE "user" SET email = %q WHERE id = %q`, victim, malID))
		vic := newAgent(t, base)
		if res := vic.raw("POST", "/api/auth/sign-up/email", map[string]any{"name": "V", "email": victim, "password": "victim-password-1"}); res.StatusCode != 422 {
			t.Fatalf("victim's sign-up onto the taken address: got %d, want 422", res.StatusCode)
		}
		vic.json("POST", "/api/auth/request-password-reset", map[string]any{"email": victim}, 200)
		link, _ := url.Parse(waitMail(t, log, "password_reset", victim, 0))
		token := strings.TrimPrefix(link.Path, "/api/auth/reset-password/")
		vic.json("POST", "/api/auth/reset-password", map[string]any{"newPassword": "victim-password-2", "token": token}, 200)
		vic.json("POST", "/api/auth/sign-in/email", map[string]any{"email": victim, "password": "victim-password-2"}, 200)
		if u := vic.user(); u["id"] != malID || u["emailVerified"] != true {
			t.Fatalf("victim after the reset: %v", u)
		}
		if u := mal.user(); u != nil {
			t.Errorf("Mallory's session outlived the reset: %v", u)
		}
		// Mallory's provider sign-in: her link went with the reset.
		m2 := newAgent(t, base)
		m2.notVictim(t, m2.social("corp", corp, malIdP), malID)
		// The log is written in batches: wait for the line.
		for deadline := time.Now().Add(15 * time.Second); !strings.Contains(log(), `"msg":"provider accounts linked before the address was proven were removed"`); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("no log line for the removed link within 15s")
				break
			}
		}
		if v, _, _ := metricValue(t, p.metrics, "authsidecar_provider_accounts_unlinked_total", map[string]string{"cause": "password_reset"}); v != 1 {
			t.Errorf("authsidecar_provider_accounts_unlinked_total{cause=password_reset}: got %v, want 1", v)
		}
	})

	t.Run("unverified provider address", func(t *testing.T) {
		const owner = "victim2@corp.test"
		before := usersCount(t, cfgPath)
		// A provider that says the address is not verified: nothing made.
		sq := newAgent(t, base)
		if loc := sq.social("corp", corp, squatIdP); !strings.Contains(loc, "error=email_not_verified") {
			t.Fatalf("corp, unverified: got %q, want error=email_not_verified", loc)
		}
		if n := usersCount(t, cfgPath); n != before {
			t.Errorf("users: %d, want %d: nothing stored", n, before)
		}
		// Trusted (lax): the squatter gets a user, the address unclaimed.
		sq.social("lax", lax, squatIdP)
		squat := sq.user()
		if squat == nil || squat["email"] != owner || squat["emailVerified"] != false {
			t.Fatalf("squatter through lax: %v", squat)
		}
		if code := sq.json("POST", "/api/auth/send-verification-email", map[string]any{"email": owner}, 403)["code"]; code != "EMAIL_NOT_VERIFIABLE" {
			t.Errorf("squatter's send-verification-email: %v", code)
		}
		// The owner signs up, verifies (the mail reaches her), and her own
		// provider account joins her user.
		own := newAgent(t, base)
		ownerID := own.json("POST", "/api/auth/sign-up/email", map[string]any{"name": "O", "email": owner, "password": "owner-password-1"}, 200)["user"].(map[string]any)["id"].(string)
		own.json("POST", "/api/auth/send-verification-email", map[string]any{"email": owner}, 200)
		if res := own.get(waitMail(t, log, "email_verification", owner, 0)); res.StatusCode >= 400 {
			t.Fatalf("owner's verification link: %d", res.StatusCode)
		}
		g := newAgent(t, base)
		g.social("corp", corp, ownerIdP)
		if u := g.user(); u == nil || u["id"] != ownerID {
			t.Errorf("owner's provider sign-in: %v, want %s", u, ownerID)
		}
		if got := len(mailsTo(log(), "email_verification", owner)); got != 1 {
			t.Errorf("verification mails to %s: %d, want the owner's one", owner, got)
		}
		// The squatter's session never became the owner's user.
		if u := sq.user(); u == nil || u["id"] == ownerID {
			t.Errorf("squatter: %v", u)
		}
		sq.notVictim(t, "", ownerID)
	})
}

// agent is one browser on the running binary: its own cookies, a trusted
// Origin, redirects shown, not followed.
type agent struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newAgent(t *testing.T, base string) *agent {
	jar, _ := cookiejar.New(nil)
	return &agent{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (a *agent) raw(method, path string, body any) *http.Response {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = a.base + path
	}
	req, _ := http.NewRequest(method, u, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", a.base)
	res, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	return res
}

// json sends a request and wants status; it returns the JSON body.
func (a *agent) json(method, path string, body any, status int) map[string]any {
	a.t.Helper()
	res := a.raw(method, path, body)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		a.t.Fatalf("%s %s: got %d %s, want %d", method, path, res.StatusCode, b, status)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func (a *agent) get(u string) *http.Response {
	a.t.Helper()
	res := a.raw("GET", u, nil)
	res.Body.Close()
	return res
}

// user is get-session's user, nil without a session.
func (a *agent) user() map[string]any {
	a.t.Helper()
	res := a.raw("GET", "/api/auth/get-session", nil)
	defer res.Body.Close()
	var m struct {
		User map[string]any `json:"user"`
	}
	json.NewDecoder(res.Body).Decode(&m)
	return m.User
}

// social signs in at op as u through provider and returns where the
// callback sends the browser.
func (a *agent) social(provider string, op *oidctest.OP, u oidctest.User) string {
	a.t.Helper()
	start := a.json("POST", "/api/auth/sign-in/social", map[string]any{"provider": provider, "callbackURL": "/done", "errorCallbackURL": "/failed"}, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cb, err := oidctest.Login(ctx, start["url"].(string), u)
	if err != nil {
		a.t.Fatal(err)
	}
	res := a.get(cb)
	if res.StatusCode != http.StatusFound {
		a.t.Fatalf("callback: got %d", res.StatusCode)
	}
	return res.Header.Get("Location")
}

// notVictim checks that whatever this browser is signed in as (if at
// all), its session, JWT and the X-User-Id the upstream receives are not
// victimID.
func (a *agent) notVictim(t *testing.T, loc, victimID string) {
	t.Helper()
	u := a.user()
	if u == nil {
		return // refused: no session at all
	}
	if u["id"] == victimID {
		t.Fatalf("signed in as the victim (%s) after %q", victimID, loc)
	}
	res := a.raw("GET", "/api/auth/get-session", nil)
	res.Body.Close()
	jwt := res.Header.Get("Set-Auth-Jwt")
	req, _ := http.NewRequest("GET", a.base+"/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	up, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Body.Close()
	var echo struct{ User string }
	json.NewDecoder(up.Body).Decode(&echo)
	if up.StatusCode != 200 || echo.User == "" || echo.User == victimID {
		t.Fatalf("business call: %d, X-User-Id %q (victim %s)", up.StatusCode, echo.User, victimID)
	}
}

// usersCount is the number of users, as the admin CLI lists them.
func usersCount(t *testing.T, cfgPath string) int {
	t.Helper()
	out := mustCLI(t, e2eSecret, "", argv(cfgPath, "users list")...)
	return len(table(out)) - 1
}
