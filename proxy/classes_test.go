package proxy_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// TestRouteClasses drives every class end to end and asserts, inside the
// upstream, whether the request arrived and with which identity.
func TestRouteClasses(t *testing.T) {
	s := newStack(t)
	cookie, uid, jwt := s.user("ann@example.com")

	tests := []struct {
		name      string
		method    string
		path      string
		hdr       []string
		status    int
		forwarded bool
		wantUser  string // X-User-Id the upstream must see ("" = none)
		wantPath  string // path the upstream must see (default: path)
	}{
		{"business with Bearer", "GET", "/api/tasks", bearer(jwt), 200, true, uid, ""},
		{"business root /api", "GET", "/api", bearer(jwt), 200, true, uid, ""},
		{"business without token", "GET", "/api/tasks", nil, 401, false, "", ""},
		{"business ignores the cookie", "GET", "/api/tasks", []string{"Cookie", cookie}, 401, false, "", ""},
		{"business with garbage token", "GET", "/api/tasks", bearer("not.a.jwt"), 401, false, "", ""},
		{"business lower-case scheme", "GET", "/api/tasks", []string{"Authorization", "bearer " + jwt}, 200, true, uid, ""},
		{"business Basic scheme", "GET", "/api/tasks", []string{"Authorization", "Basic " + jwt}, 401, false, "", ""},
		{"business two tokens", "GET", "/api/tasks", []string{"Authorization", "Bearer " + jwt + " " + jwt}, 401, false, "", ""},
		{"business two headers", "GET", "/api/tasks", []string{"Authorization", "Bearer " + jwt, "Authorization", "Bearer " + jwt}, 401, false, "", ""},
		{"admin without role", "GET", "/api/admin/users", bearer(jwt), 403, false, "", ""},
		{"admin without token", "GET", "/api/admin", nil, 401, false, "", ""},
		{"not admin: /api/administrator", "GET", "/api/administrator", bearer(jwt), 200, true, uid, ""},
		{"cookie-only with cookie", "GET", "/api/mcp-oauth/authorize?client=x", []string{"Cookie", cookie}, 200, true, uid, ""},
		{"cookie-only with Bearer only", "GET", "/api/mcp-oauth/authorize", bearer(jwt), 401, false, "", ""},
		{"cookie-only POST", "POST", "/api/mcp-oauth/authorize", []string{"Cookie", cookie}, 405, false, "", ""},
		{"websocket path with ?token=", "GET", "/ws/chat?room=1&token=" + jwt, nil, 200, true, uid, ""},
		{"websocket path with header", "GET", "/ws", bearer(jwt), 200, true, uid, ""},
		{"websocket path without token", "GET", "/ws/chat", nil, 401, false, "", ""},
		{"websocket two tokens", "GET", "/ws/chat?token=" + jwt + "&token=" + jwt, nil, 401, false, "", ""},
		{"websocket token in query and header", "GET", "/ws/chat?token=" + jwt, bearer(jwt), 401, false, "", ""},
		{"passthrough", "GET", "/ws/browser", nil, 200, true, "", ""},
		{"passthrough strips identity", "GET", "/ws/browser", []string{"X-User-Id", "spoofed"}, 200, true, "", ""},
		{"public", "GET", "/index.html", nil, 200, true, "", ""},
		{"public strips identity", "GET", "/", []string{"X-User-Id", "spoofed", "X_User_Id", "spoofed"}, 200, true, "", ""},
		{"auth is never forwarded", "GET", "/api/auth/ok", nil, 200, false, "", ""},
		{"auth unknown route", "GET", "/api/auth/nope", nil, 404, false, "", ""},
		{"bad path refused", "GET", "/api/%2e%2e/admin", bearer(jwt), 400, false, "", ""},
		{"case variant refused", "GET", "/API/tasks", bearer(jwt), 400, false, "", ""},
		{"admin case variant refused", "GET", "/api/Admin/x", bearer(jwt), 400, false, "", ""},
		{"h2c upgrade refused", "GET", "/api/tasks", append(bearer(jwt), "Connection", "Upgrade", "Upgrade", "h2c"), 400, false, "", ""},
		{"websocket upgrade on business refused", "GET", "/api/tasks", append(bearer(jwt), "Connection", "Upgrade", "Upgrade", "websocket"), 400, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.up.take()
			r := s.do(tt.method, tt.path, nil, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if r.status >= 400 && r.header.Get("Content-Type") != "application/json" {
				t.Errorf("refusal without a JSON body: %q %s", r.header.Get("Content-Type"), r.body)
			}
			got := s.up.take()
			if !tt.forwarded {
				if len(got) != 0 {
					t.Fatalf("upstream received %d requests, want none: %+v", len(got), got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("upstream received %d requests, want 1", len(got))
			}
			if ids := got[0].Header.Values("X-User-Id"); tt.wantUser == "" && len(ids) != 0 || tt.wantUser != "" && (len(ids) != 1 || ids[0] != tt.wantUser) {
				t.Errorf("upstream saw X-User-Id %q, want %q", ids, tt.wantUser)
			}
			for name := range got[0].Header {
				if strings.Contains(name, "_") {
					t.Errorf("upstream saw underscore header %q", name)
				}
			}
			want := tt.wantPath
			if want == "" {
				want, _, _ = strings.Cut(tt.path, "?")
			}
			if got[0].Path != want {
				t.Errorf("upstream saw path %q, want %q", got[0].Path, want)
			}
			if strings.Contains(got[0].RawQuery, "token=") {
				t.Errorf("upstream saw the token in the query: %q", got[0].RawQuery)
			}
		})
	}
}

// TestIdentityHeaderSpoofing: whatever a client sends, the upstream sees
// exactly the verified id, once.
func TestIdentityHeaderSpoofing(t *testing.T) {
	s := newStack(t)
	cookie, uid, jwt := s.user("bob@example.com")
	spoof := [][]string{
		{"X-User-Id", "admin"},
		{"x-user-id", "admin"},
		{"X_User_Id", "admin"},
		{"x_user_id", "admin"},
		{"X-USER-ID", "admin"},
		{"Connection", "X-User-Id"},
		{"Connection", "close, X-User-Id"},
		{"X-User-Role", "admin"},
		{"X-Original-URL", "/api/admin"},
		{"X-HTTP-Method-Override", "DELETE"},
		{"X-Forwarded-For", "10.0.0.1"},
		{"X-Real-IP", "10.0.0.1"},
	}
	for _, h := range spoof {
		t.Run(h[0]+": "+h[1], func(t *testing.T) {
			s.up.take()
			r := s.do("GET", "/api/tasks", nil, append(bearer(jwt), h[0], h[1], "Cookie", cookie+"; theme=dark")...)
			if r.status != 200 {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			got := s.up.take()[0].Header
			if ids := got.Values("X-User-Id"); len(ids) != 1 || ids[0] != uid {
				t.Errorf("upstream saw X-User-Id %q, want [%s]", ids, uid)
			}
			for _, name := range []string{"X-User-Role", "X-Original-Url", "X-Http-Method-Override", "X-Real-Ip"} {
				if v := got.Values(name); len(v) != 0 {
					t.Errorf("upstream saw %s: %q", name, v)
				}
			}
			if xff := got.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" {
				t.Errorf("upstream saw X-Forwarded-For %q, want [127.0.0.1] (replaced, not appended)", xff)
			}
			if c := got.Get("Cookie"); c != "theme=dark" {
				t.Errorf("upstream saw Cookie %q, want only theme=dark (session cookie stripped)", c)
			}
		})
	}
}

// TestBusinessPathMakesNoQueries: the contract's zero database queries,
// counted in the store across 1,000 business requests.
func TestBusinessPathMakesNoQueries(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("carol@example.com")
	before := s.queries.total()
	keysBefore := s.queries.get("keys")
	for i := range 1000 {
		if r := s.do("GET", "/api/tasks", nil, bearer(jwt)...); r.status != 200 {
			t.Fatalf("request %d: got %d %s", i, r.status, r.body)
		}
	}
	if got := s.queries.total() - before; got != 0 {
		t.Errorf("1000 business requests made %d store queries (%v), want 0", got, s.queries.n)
	}
	// And with a forged kid, at most one key read per cooldown.
	forged := forgeKid(t, jwt, "no-such-kid")
	for range 100 {
		if r := s.do("GET", "/api/tasks", nil, bearer(forged)...); r.status != 401 {
			t.Fatalf("forged kid: got %d, want 401", r.status)
		}
	}
	if got := s.queries.get("keys") - keysBefore; got > 1 {
		t.Errorf("100 unknown-kid requests made %d key reads, want at most 1", got)
	}
}

func TestAdminRoleCheck(t *testing.T) {
	s := newStack(t)
	_, uid, jwt := s.user("dan@example.com")
	if r := s.do("GET", "/api/admin/users", nil, bearer(jwt)...); r.status != 403 {
		t.Fatalf("before grant: got %d %s, want 403", r.status, r.body)
	}
	if err := s.db.GrantRole(context.Background(), uid, "admin"); err != nil {
		t.Fatal(err)
	}
	s.up.take()
	for i := range 3 {
		before := s.queries.get("user_role")
		total := s.queries.total()
		if r := s.do("GET", "/api/admin/users", nil, bearer(jwt)...); r.status != 200 {
			t.Fatalf("after grant: got %d %s, want 200", r.status, r.body)
		}
		if got := s.queries.get("user_role") - before; got != 1 {
			t.Errorf("request %d made %d role queries, want exactly 1", i, got)
		}
		if got := s.queries.total() - total; got != 1 {
			t.Errorf("request %d made %d queries in all, want 1", i, got)
		}
	}
	if got := s.up.take(); len(got) != 3 || got[0].Header.Get("X-User-Id") != uid {
		t.Errorf("upstream got %d admin requests, want 3 with the user id", len(got))
	}
}

// TestJWTOutlivesSession: the proxy never reads the session table, so
// without a revocation set (Options.Revocations; the sidecar wires one,
// docs/revocation.md) a JWT outlives the session it was minted from.
func TestJWTOutlivesSession(t *testing.T) {
	s := newStack(t)
	cookie, _, jwt := s.user("eve@example.com")
	if r := s.do("POST", "/api/auth/sign-out", nil, "Cookie", cookie, "Origin", origin); r.status != 200 {
		t.Fatalf("sign-out: %d %s", r.status, r.body)
	}
	if r := s.do("GET", "/api/tasks", nil, bearer(jwt)...); r.status != 200 {
		t.Fatalf("after sign-out: got %d, want 200", r.status)
	}
	if r := s.do("GET", "/api/mcp-oauth/authorize", nil, "Cookie", cookie); r.status != 401 {
		t.Fatalf("cookie-only route after sign-out: got %d, want 401", r.status)
	}
	// 30 days later the JWT is dead.
	s.clock.Add(30*24*time.Hour + time.Minute)
	r := s.do("GET", "/api/tasks", nil, bearer(jwt)...)
	if r.status != 401 || r.header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
		t.Fatalf("expired: got %d %q, want 401 with invalid_token", r.status, r.header.Get("WWW-Authenticate"))
	}
}

// TestRotatedKeyPickedUp: a key rotated by another process (the CLI) is
// published at once and signs only once it has been published longer than
// the cooldown; the running issuer then announces it to its verifier and
// signs with it. A JWT another process signs with a rotated key this one
// never signed with is accepted at first sight, even when this verifier
// read its keys (an unknown kid) just after the rotation: by the time
// anyone signs with the key, the cooldown allows another read.
func TestRotatedKeyPickedUp(t *testing.T) {
	s := newStack(t)
	cookie, _, oldJWT := s.user("fred@example.com")
	other, err := newIssuerOn(s) // another process on the same database
	if err != nil {
		t.Fatal(err)
	}
	getSession := func() string {
		t.Helper()
		return s.do("GET", "/api/auth/get-session", nil, "Cookie", cookie).header.Get("Set-Auth-Jwt")
	}
	fresh, err := other.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if kid := kidOf(t, getSession()); kid != kidOf(t, oldJWT) {
		t.Fatalf("right after the rotation: signed with %s, want the old key until the new one is published long enough", kid)
	}
	s.clock.Add(36 * time.Second) // past the 30 s cooldown and the issuer's 5 s margin
	newJWT := getSession()
	if kidOf(t, newJWT) != fresh.KID {
		t.Fatal("get-session did not sign with the rotated key once it was published long enough")
	}
	if r := s.do("GET", "/api/tasks", nil, bearer(newJWT)...); r.status != 200 {
		t.Fatalf("JWT from the rotated key: got %d %s, want 200", r.status, r.body)
	}
	if r := s.do("GET", "/api/tasks", nil, bearer(oldJWT)...); r.status != 200 {
		t.Fatalf("old key after rotation: got %d, want 200 (still published)", r.status)
	}

	// Our verifier reads its keys (a token with an unknown kid) just
	// before the other process rotates again, then signs: nobody tells us,
	// and the key is not in what we read.
	if r := s.do("GET", "/api/tasks", nil, bearer(forgeKid(t, newJWT, "no-such-kid"))...); r.status != 401 {
		t.Fatalf("unknown kid: got %d, want 401", r.status)
	}
	if _, err := other.RotateKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	foreignJWT := func() string {
		t.Helper()
		req, _ := http.NewRequest("GET", otherSrv.URL+"/api/auth/get-session", nil)
		req.Header.Set("Cookie", cookie)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("Set-Auth-Jwt")
	}
	if kid := kidOf(t, foreignJWT()); kid != fresh.KID {
		t.Fatalf("the other process right after its rotation: signed with %s, want %s", kid, fresh.KID)
	}
	s.clock.Add(36 * time.Second)
	foreign := foreignJWT()
	if kid := kidOf(t, foreign); kid == fresh.KID {
		t.Fatal("the other process did not switch to its rotated key")
	}
	if r := s.do("GET", "/api/tasks", nil, bearer(foreign)...); r.status != 200 {
		t.Fatalf("the other process's first JWT with its rotated key: got %d %s, want 200", r.status, r.body)
	}
	if got := s.refreshe.get("unknown_kid/ok"); got != 2 {
		t.Errorf("got %d unknown-kid reads, want 2 (the forged kid's, the rotated key's)", got)
	}
	if got := s.refreshe.get("unknown_kid/skipped_cooldown"); got != 0 {
		t.Errorf("got %d cooldown skips, want none", got)
	}
}

// TestDatabaseDown: routes that need the store answer 503 quickly; the
// business path does not notice.
func TestDatabaseDown(t *testing.T) {
	s := newStack(t, withStoreTimeout(2*time.Second))
	cookie, _, jwt := s.user("gil@example.com")
	s.db.Close()
	tests := []struct {
		name, method, path string
		hdr                []string
		status             int
	}{
		{"business", "GET", "/api/tasks", bearer(jwt), 200},
		{"admin", "GET", "/api/admin/x", bearer(jwt), 503},
		{"cookie-only", "GET", "/api/mcp-oauth/authorize", []string{"Cookie", cookie}, 503},
		{"get-session", "GET", "/api/auth/get-session", []string{"Cookie", cookie}, 503},
		{"sign-in", "POST", "/api/auth/sign-in/email", []string{"Content-Type", "application/json"}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.method == "POST" {
				body = strings.NewReader(`{"email":"gil@example.com","password":"` + pw + `"}`)
			} else {
				body = strings.NewReader("")
			}
			r := s.do(tt.method, tt.path, body, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status == 503 && !strings.Contains(r.body, `"code"`) {
				t.Errorf("503 without a JSON error: %s", r.body)
			}
		})
	}
}

func TestCORS(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("hal@example.com")
	tests := []struct {
		name       string
		method     string
		path       string
		hdr        []string
		status     int
		wantOrigin string
	}{
		{"trusted origin", "GET", "/api/tasks", append(bearer(jwt), "Origin", "https://app.example.com"), 200, "https://app.example.com"},
		{"untrusted origin", "GET", "/api/tasks", append(bearer(jwt), "Origin", "https://evil.example"), 200, ""},
		{"preflight trusted", "OPTIONS", "/api/tasks", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "POST"}, 204, "https://app.example.com"},
		{"preflight untrusted", "OPTIONS", "/api/tasks", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, 403, ""},
		{"preflight auth route", "OPTIONS", "/api/auth/get-session", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "GET"}, 204, "https://app.example.com"},
		{"public path: upstream's business", "GET", "/page", []string{"Origin", "https://app.example.com"}, 200, "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(tt.method, tt.path, nil, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if got := r.header.Values("Access-Control-Allow-Origin"); tt.wantOrigin == "" && len(got) != 0 || tt.wantOrigin != "" && (len(got) != 1 || got[0] != tt.wantOrigin) {
				t.Errorf("got Access-Control-Allow-Origin %q, want %q", got, tt.wantOrigin)
			}
			if tt.wantOrigin != "" && tt.wantOrigin != "*" {
				if r.header.Get("Access-Control-Allow-Credentials") != "true" {
					t.Error("no Access-Control-Allow-Credentials")
				}
				if tt.method == "OPTIONS" {
					if !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") || r.header.Get("Access-Control-Max-Age") != "600" {
						t.Errorf("preflight headers: %v", r.header)
					}
				} else if !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "set-auth-jwt") {
					t.Errorf("set-auth-jwt not exposed: %v", r.header)
				}
			}
		})
	}
}

// TestUpstreamErrors: 502 when the upstream is down, 504 when it is slow
// to answer, both JSON.
func TestUpstreamErrors(t *testing.T) {
	s := newStack(t, withHeaderTimeout(200*time.Millisecond))
	_, _, jwt := s.user("ida@example.com")
	release := make(chan struct{})
	s.up.handle = func(w http.ResponseWriter, r *http.Request) { <-release }
	r := s.do("GET", "/api/slow", nil, bearer(jwt)...)
	close(release)
	if r.status != 504 || !strings.Contains(r.body, "GATEWAY_TIMEOUT") {
		t.Errorf("slow upstream: got %d %s, want 504 JSON", r.status, r.body)
	}
	s.up.Close()
	r = s.do("GET", "/api/tasks", nil, bearer(jwt)...)
	if r.status != 502 || !strings.Contains(r.body, "BAD_GATEWAY") {
		t.Errorf("upstream down: got %d %s, want 502 JSON", r.status, r.body)
	}
}

// TestDatabaseLocked: a database that hangs (another process holds the
// write lock) yields 503 at the store deadline, not a hung request.
func TestDatabaseLocked(t *testing.T) {
	s := newStack(t, withStoreTimeout(time.Second))
	_, _, jwt := s.user("jay@example.com")
	other, err := sql.Open("sqlite", "file:"+s.dbPath+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	r := s.do("POST", "/api/auth/sign-in/email", strings.NewReader(`{"email":"jay@example.com","password":"`+pw+`"}`), "Content-Type", "application/json")
	if r.status != 503 {
		t.Fatalf("sign-in against a locked database: got %d %s, want 503", r.status, r.body)
	}
	if r := s.do("GET", "/api/tasks", nil, bearer(jwt)...); r.status != 200 {
		t.Fatalf("business while locked: got %d, want 200", r.status)
	}
}

// TestForwardedHeadersAndHosts: X-Forwarded-* from an untrusted client are
// replaced; from a trusted proxy they are extended. A Host outside the
// allowed list is refused before anything else.
func TestForwardedHeadersAndHosts(t *testing.T) {
	trusted, _ := proxy.ParsePrefixes([]string{"127.0.0.1"})
	s := newStack(t, func(o *proxy.Options) {
		o.TrustedProxies = trusted
		o.AllowedHosts = []string{"127.0.0.1"}
	})
	r := s.do("GET", "/page", nil, "X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "app.example.com")
	if r.status != 200 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	h := s.up.take()[0].Header
	if got := h.Get("X-Forwarded-For"); got != "198.51.100.7, 127.0.0.1" {
		t.Errorf("trusted peer: got X-Forwarded-For %q, want the chain extended", got)
	}
	if h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Forwarded-Host") != "app.example.com" {
		t.Errorf("trusted peer: got proto %q host %q, want them kept", h.Get("X-Forwarded-Proto"), h.Get("X-Forwarded-Host"))
	}

	untrusted := newStack(t)
	untrusted.do("GET", "/page", nil, "X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example")
	h = untrusted.up.take()[0].Header
	if h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") == "evil.example" {
		t.Errorf("untrusted peer: got %v, want X-Forwarded-* replaced", h)
	}

	req, _ := http.NewRequest("GET", s.srv.URL+"/page", nil)
	req.Host = "evil.example"
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 || len(s.up.take()) != 0 {
		t.Fatalf("Host evil.example: got %d, want 400 and nothing forwarded", res.StatusCode)
	}
}

// TestConfiguredStripHeaders: headers named in proxy.strip_headers never
// reach the upstream, whatever the route class.
func TestConfiguredStripHeaders(t *testing.T) {
	s := newStack(t, func(o *proxy.Options) { o.StripHeaders = []string{"X-Backend-Override"} })
	_, _, jwt := s.user("strip@example.com")
	for _, path := range []string{"/page", "/api/tasks"} {
		s.do("GET", path, nil, append(bearer(jwt), "X-Backend-Override", "admin", "x-backend-override", "admin")...)
		got := s.up.take()
		if len(got) != 1 || len(got[0].Header.Values("X-Backend-Override")) != 0 {
			t.Errorf("%s: upstream saw %+v, want X-Backend-Override stripped", path, got)
		}
	}
}

// TestAuthorizationForwarding: a Bearer token the sidecar verified does not
// reach the upstream unless ForwardAuthorization is set; where the sidecar
// did not authenticate with it (passthrough, public, cookie-only), the
// header is the client's business and passes untouched.
func TestAuthorizationForwarding(t *testing.T) {
	for _, forward := range []bool{false, true} {
		t.Run(fmt.Sprintf("forward=%v", forward), func(t *testing.T) {
			s := newStack(t, func(o *proxy.Options) { o.ForwardAuthorization = forward })
			cookie, uid, jwt := s.user("fwd@example.com")
			tests := []struct {
				name, path string
				hdr        []string
				verified   bool // the sidecar authenticated the request with the header
			}{
				{"business", "/api/tasks", bearer(jwt), true},
				{"admin prefix look-alike", "/api/administrator", bearer(jwt), true},
				{"websocket by header", "/ws/chat", bearer(jwt), true},
				{"passthrough", "/ws/browser", bearer("opaque"), false},
				{"public", "/index.html", bearer("opaque"), false},
				{"cookie-only", "/api/mcp-oauth/authorize", append(bearer("opaque"), "Cookie", cookie), false},
			}
			for _, tt := range tests {
				r := s.do("GET", tt.path, nil, tt.hdr...)
				if r.status != 200 {
					t.Fatalf("%s: got %d %s", tt.name, r.status, r.body)
				}
				got := s.up.take()
				if len(got) != 1 {
					t.Fatalf("%s: upstream got %d requests", tt.name, len(got))
				}
				auth := got[0].Header.Values("Authorization")
				switch {
				case tt.verified && !forward && len(auth) != 0:
					t.Errorf("%s: upstream saw the verified token: %q", tt.name, auth)
				case (!tt.verified || forward) && (len(auth) != 1 || auth[0] != tt.hdr[1]):
					t.Errorf("%s: upstream saw Authorization %q, want %q", tt.name, auth, tt.hdr[1])
				}
				if tt.verified && got[0].Header.Get("X-User-Id") != uid {
					t.Errorf("%s: upstream saw X-User-Id %q, want %s", tt.name, got[0].Header.Get("X-User-Id"), uid)
				}
			}
		})
	}
}

// TestWellKnownIdentityHeaders: the identity headers other proxies set
// (Remote-User, X-Forwarded-User, X-Auth-Request-Email, ...) never reach
// the upstream from a client, on any route class and in any case, while
// an identity header configured as one of them carries the verified id.
func TestWellKnownIdentityHeaders(t *testing.T) {
	for _, identity := range []string{"X-User-Id", "Remote-User"} {
		t.Run(identity, func(t *testing.T) {
			s := newStack(t, func(o *proxy.Options) { o.IdentityHeader = identity })
			cookie, uid, jwt := s.user("spoof@example.com")
			for _, path := range []string{"/api/tasks", "/index.html", "/ws/browser", "/api/mcp-oauth/authorize"} {
				hdr := append(bearer(jwt), "Cookie", cookie)
				for _, h := range proxy.IdentityHeaders {
					hdr = append(hdr, strings.ToLower(h), "admin@example.com")
				}
				// Kubernetes' extra attributes: any name under the prefix.
				hdr = append(hdr, "x-remote-extra-scopes", "admin", "X-Remote-Extra-Acme.Example%2fRole", "owner")
				r := s.do("GET", path, nil, hdr...)
				if r.status != 200 {
					t.Fatalf("%s: got %d %s", path, r.status, r.body)
				}
				got := s.up.take()[0].Header
				for _, h := range proxy.IdentityHeaders {
					if h == identity {
						continue
					}
					if v := got.Values(h); len(v) != 0 {
						t.Errorf("%s: upstream saw %s: %q", path, h, v)
					}
				}
				for name, v := range got {
					if strings.HasPrefix(strings.ToLower(name), "x-remote-extra-") {
						t.Errorf("%s: upstream saw %s: %q", path, name, v)
					}
				}
				authenticated := path == "/api/tasks" || path == "/api/mcp-oauth/authorize"
				if v := got.Values(identity); authenticated && (len(v) != 1 || v[0] != uid) || !authenticated && len(v) != 0 {
					t.Errorf("%s: upstream saw %s %q (authenticated: %v, id %s)", path, identity, v, authenticated, uid)
				}
			}
		})
	}
}
