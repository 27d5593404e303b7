package issuer_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/authsidecar/authsidecar/issuer"
)

const pw = "correct-horse-battery"

func TestSignUp(t *testing.T) {
	e := newEnv(t)
	r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Alice", "email": "Alice@Example.COM", "password": pw})
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
	if r.header.Get("Set-Auth-Jwt") != "" {
		t.Error("sign-up carries set-auth-jwt; the contract issues JWTs only on get-session")
	}
	body := r.json(t)
	user := body["user"].(map[string]any)
	if user["email"] != "alice@example.com" {
		t.Errorf("got email %v, want it lower-cased", user["email"])
	}
	for _, k := range []string{"id", "name", "email", "emailVerified", "image", "createdAt", "updatedAt"} {
		if _, ok := user[k]; !ok {
			t.Errorf("user JSON lacks %q: %s", k, r.body)
		}
	}
	if tok, _ := body["token"].(string); len(tok) != 32 {
		t.Errorf("got token %q, want 32 characters", tok)
	}
	c := r.cookie("auth.session_token")
	if c == nil {
		t.Fatalf("no session cookie in %v", r.header["Set-Cookie"])
	}
	raw := strings.Join(r.header["Set-Cookie"], "\n")
	for _, attr := range []string{"Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=604800"} {
		if !strings.Contains(raw, attr) {
			t.Errorf("cookie %q lacks %s", raw, attr)
		}
	}
	if strings.Contains(raw, "Secure") {
		t.Errorf("cookie %q is Secure on an http base URL", raw)
	}
	if got := e.count("session"); got != 1 {
		t.Errorf("got %d sessions, want 1", got)
	}
}

func TestSignUpRejections(t *testing.T) {
	e := newEnv(t)
	e.signUp("taken@example.com", pw)
	long := strings.Repeat("x", 129)
	tests := []struct {
		name       string
		ct, body   string
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{"duplicate email", "application/json", `{"name":"A","email":"taken@example.com","password":"` + pw + `"}`, 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", "User already exists. Use another email."},
		{"duplicate email other case", "application/json", `{"name":"A","email":"TAKEN@example.com","password":"` + pw + `"}`, 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", ""},
		{"short password", "application/json", `{"name":"A","email":"b@example.com","password":"short"}`, 400, "PASSWORD_TOO_SHORT", "Password too short"},
		{"long password", "application/json", `{"name":"A","email":"b@example.com","password":"` + long + `"}`, 400, "PASSWORD_TOO_LONG", "Password too long"},
		{"empty password", "application/json", `{"name":"A","email":"b@example.com","password":""}`, 400, "VALIDATION_ERROR", "[body.password] Too small: expected string to have >=1 characters"},
		{"invalid email", "application/json", `{"name":"A","email":"not-an-email","password":"` + pw + `"}`, 400, "VALIDATION_ERROR", "[body.email] Invalid email address"},
		{"email not a string", "application/json", `{"name":"A","email":42,"password":"` + pw + `"}`, 400, "VALIDATION_ERROR", "[body.email] Invalid input: expected string, received number"},
		{"missing name", "application/json", `{"email":"b@example.com","password":"` + pw + `"}`, 400, "VALIDATION_ERROR", "[body.name] Invalid input: expected string, received undefined"},
		{"name too long", "application/json", `{"name":"` + strings.Repeat("n", 257) + `","email":"b@example.com","password":"` + pw + `"}`, 400, "VALIDATION_ERROR", ""},
		{"email too long", "application/json", `{"name":"A","email":"` + strings.Repeat("e", 250) + `@example.com","password":"` + pw + `"}`, 400, "VALIDATION_ERROR", ""},
		{"malformed JSON", "application/json", `{"name":"Bob",`, 400, "BAD_REQUEST", "Invalid JSON in request body"},
		{"truncated JSON", "application/json", `{"name":"A","email":"b@example.com","password":"` + pw, 400, "BAD_REQUEST", ""},
		{"duplicate keys", "application/json", `{"name":"A","email":"b@example.com","email":"c@example.com","password":"` + pw + `"}`, 400, "BAD_REQUEST", ""},
		{"trailing value", "application/json", `{"name":"A","email":"b@example.com","password":"` + pw + `"} {}`, 400, "BAD_REQUEST", ""},
		{"array body", "application/json", `[1,2]`, 400, "VALIDATION_ERROR", ""},
		{"text/plain", "text/plain", `{"name":"A","email":"b@example.com","password":"` + pw + `"}`, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"body too large", "application/json", `{"name":"` + strings.Repeat("n", 70000) + `"}`, 413, "PAYLOAD_TOO_LARGE", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users, sessions := e.count("user"), e.count("session")
			r := e.do(http.MethodPost, "/api/auth/sign-up/email", tt.ct, tt.body)
			if r.status != tt.wantStatus || r.code(t) != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.wantStatus, tt.wantCode)
			}
			if tt.wantMsg != "" {
				if got := r.json(t)["message"]; got != tt.wantMsg {
					t.Errorf("got message %q, want %q", got, tt.wantMsg)
				}
			}
			if r.cookie("auth.session_token") != nil {
				t.Error("a refused sign-up set a cookie")
			}
			if u, s := e.count("user"), e.count("session"); u != users || s != sessions {
				t.Errorf("stored data changed: users %d->%d, sessions %d->%d", users, u, sessions, s)
			}
		})
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	_, user := e.signUp("bob@example.com", pw)

	r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "BOB@example.com", "password": pw})
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
	if r.header.Get("Set-Auth-Jwt") != "" {
		t.Error("sign-in carries set-auth-jwt: login must take two steps (docs/protocol.md)")
	}
	body := r.json(t)
	if body["redirect"] != false || body["user"].(map[string]any)["id"] != user["id"] {
		t.Errorf("got %s, want redirect:false and the signed-up user", r.body)
	}
	if _, ok := body["url"]; ok {
		t.Errorf("got url in %s without a callbackURL", r.body)
	}
	if r.cookie("auth.session_token") == nil {
		t.Fatal("no session cookie")
	}

	t.Run("form-urlencoded", func(t *testing.T) {
		r := e.do(http.MethodPost, "/api/auth/sign-in/email", "application/x-www-form-urlencoded", form(map[string]string{"email": "bob@example.com", "password": pw}))
		if r.status != http.StatusOK {
			t.Fatalf("got %d %s, want 200", r.status, r.body)
		}
	})
	t.Run("rememberMe false makes a browser-session cookie", func(t *testing.T) {
		r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "bob@example.com", "password": pw, "rememberMe": false})
		if r.status != http.StatusOK {
			t.Fatalf("got %d %s", r.status, r.body)
		}
		if c := r.cookie("auth.session_token"); c == nil || c.MaxAge != 0 {
			t.Fatalf("got cookie %v, want one without Max-Age", c)
		}
	})
	t.Run("callbackURL", func(t *testing.T) {
		r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "bob@example.com", "password": pw, "callbackURL": "/dashboard"})
		if r.status != http.StatusOK || r.json(t)["url"] != "/dashboard" || r.json(t)["redirect"] != true {
			t.Fatalf("got %d %s, want redirect to /dashboard", r.status, r.body)
		}
		r = e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "bob@example.com", "password": pw, "callbackURL": "https://evil.example/"})
		if r.status != http.StatusForbidden || r.code(t) != "INVALID_CALLBACK_URL" {
			t.Fatalf("got %d %s, want 403 INVALID_CALLBACK_URL", r.status, r.body)
		}
	})

	wrong := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "bob@example.com", "password": "wrong-password-123"})
	unknown := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "nobody@example.com", "password": "wrong-password-123"})
	for name, r := range map[string]resp{"wrong password": wrong, "unknown email": unknown} {
		if r.status != http.StatusUnauthorized || r.code(t) != "INVALID_EMAIL_OR_PASSWORD" || r.json(t)["message"] != "Invalid email or password" {
			t.Errorf("%s: got %d %s, want 401 INVALID_EMAIL_OR_PASSWORD", name, r.status, r.body)
		}
	}
	if string(wrong.body) != string(unknown.body) {
		t.Errorf("wrong password and unknown email differ: %s vs %s", wrong.body, unknown.body)
	}

	sessions := e.count("session")
	for _, tt := range []struct {
		name, body, code string
		status           int
	}{
		{"invalid email", `{"email":"not-an-email","password":"x"}`, "INVALID_EMAIL", 400},
		{"missing password", `{"email":"bob@example.com"}`, "VALIDATION_ERROR", 400},
		{"long password", `{"email":"bob@example.com","password":"` + strings.Repeat("p", 129) + `"}`, "PASSWORD_TOO_LONG", 400},
		{"malformed", `{"email":`, "BAD_REQUEST", 400},
	} {
		r := e.do(http.MethodPost, "/api/auth/sign-in/email", "application/json", tt.body)
		if r.status != tt.status || r.code(t) != tt.code {
			t.Errorf("%s: got %d %s, want %d %s", tt.name, r.status, r.body, tt.status, tt.code)
		}
	}
	if got := e.count("session"); got != sessions {
		t.Errorf("refused sign-ins changed sessions: %d -> %d", sessions, got)
	}
}

// verifyJWT checks a token against the live JWKS with jwx, independently of
// the issuer's own code.
func verifyJWT(t *testing.T, e *env, token string) jwt.Token {
	t.Helper()
	r := e.do(http.MethodGet, "/api/auth/jwks", "", "")
	set, err := jwk.Parse(r.body)
	if err != nil {
		t.Fatalf("parse jwks %s: %v", r.body, err)
	}
	tok, err := jwt.Parse([]byte(token), jwt.WithKeySet(set), jwt.WithIssuer("http://localhost:8080"),
		jwt.WithAudience("http://localhost:8080"), jwt.WithClock(jwt.ClockFunc(e.clock.Now)))
	if err != nil {
		t.Fatalf("JWT does not verify against /api/auth/jwks: %v", err)
	}
	return tok
}

func TestTwoStepLogin(t *testing.T) {
	e := newEnv(t)
	cookie, user := e.signUp("carol@example.com", pw)

	r := e.getSession(cookie)
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	token := r.header.Get("Set-Auth-Jwt")
	if token == "" {
		t.Fatal("get-session carries no set-auth-jwt")
	}
	if got := r.header.Get("Access-Control-Expose-Headers"); !strings.Contains(got, "set-auth-jwt") {
		t.Errorf("got Access-Control-Expose-Headers %q, want set-auth-jwt", got)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("got Cache-Control %q, want no-store", got)
	}
	body := r.json(t)
	if body["user"].(map[string]any)["id"] != user["id"] || body["session"].(map[string]any)["userId"] != user["id"] {
		t.Errorf("got %s, want the user's session", r.body)
	}

	tok := verifyJWT(t, e, token)
	if tok.Subject() != user["id"] {
		t.Errorf("got sub %q, want %v", tok.Subject(), user["id"])
	}
	if got := tok.Expiration().Sub(tok.IssuedAt()); got != 30*24*time.Hour {
		t.Errorf("got exp-iat %v, want 720h", got)
	}
	if email, _ := tok.Get("email"); email != "carol@example.com" {
		t.Errorf("got email claim %v", email)
	}
	if _, ok := tok.Get("role"); ok {
		t.Error("JWT carries a role: the contract says it answers only who you are")
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	var h map[string]string
	json.Unmarshal(hdr, &h)
	if h["alg"] != "EdDSA" || h["typ"] != "JWT" || h["kid"] == "" {
		t.Errorf("got header %s, want alg EdDSA, typ JWT, a kid", hdr)
	}

	// A fresh JWT each call.
	r2 := e.do(http.MethodPost, "/api/auth/get-session", "", "", "Cookie", cookie, "Origin", "http://localhost:8080")
	if r2.status != http.StatusOK || r2.header.Get("Set-Auth-Jwt") == "" || r2.header.Get("Set-Auth-Jwt") == token {
		t.Errorf("POST get-session: got %d jwt=%q, want 200 and a new JWT", r2.status, r2.header.Get("Set-Auth-Jwt"))
	}

	t.Run("token endpoint", func(t *testing.T) {
		r := e.do(http.MethodGet, "/api/auth/token", "", "", "Cookie", cookie)
		if r.status != http.StatusOK {
			t.Fatalf("got %d %s", r.status, r.body)
		}
		verifyJWT(t, e, r.json(t)["token"].(string))
		r = e.do(http.MethodGet, "/api/auth/token", "", "")
		if r.status != http.StatusUnauthorized || r.code(t) != "UNAUTHORIZED" {
			t.Fatalf("no cookie: got %d %s, want 401 UNAUTHORIZED", r.status, r.body)
		}
	})
	t.Run("HEAD issues nothing", func(t *testing.T) {
		r := e.do(http.MethodHead, "/api/auth/get-session", "", "", "Cookie", cookie)
		if r.status != http.StatusOK || r.header.Get("Set-Auth-Jwt") != "" || len(r.body) != 0 {
			t.Fatalf("got %d jwt=%q body=%q, want 200 without a JWT", r.status, r.header.Get("Set-Auth-Jwt"), r.body)
		}
	})

	// Sign-out: the session goes, the JWT stays valid (docs/protocol.md).
	out := e.do(http.MethodPost, "/api/auth/sign-out", "application/json", "{}", "Cookie", cookie, "Origin", "http://localhost:8080")
	if out.status != http.StatusOK || string(out.body) != `{"success":true}` {
		t.Fatalf("sign-out: got %d %s", out.status, out.body)
	}
	if c := out.cookie("auth.session_token"); c == nil || c.MaxAge >= 0 {
		t.Errorf("sign-out did not expire the cookie: %v", out.header["Set-Cookie"])
	}
	if got := e.count("session"); got != 0 {
		t.Errorf("got %d sessions after sign-out, want 0", got)
	}
	if r := e.getSession(cookie); string(r.body) != "null" || r.header.Get("Set-Auth-Jwt") != "" {
		t.Errorf("get-session after sign-out: got %s jwt=%q, want null", r.body, r.header.Get("Set-Auth-Jwt"))
	}
	verifyJWT(t, e, token)
}

func TestGetSessionWithoutSession(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("dave@example.com", pw)
	name, value, _ := strings.Cut(cookie, "=")
	tests := []struct {
		name        string
		cookie      string
		wantCleared bool
	}{
		{"no cookie", "", false},
		{"bad signature", name + "=" + value[:len(value)-6] + "AAA%3D", false},
		{"unsigned token", name + "=" + value[:32], false},
		{"signed, unknown session", name + "=" + strings.Replace(cookie, value, "", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodGet, "/api/auth/get-session", "", "", "Cookie", tt.cookie)
			if r.status != http.StatusOK || string(r.body) != "null" || r.header.Get("Set-Auth-Jwt") != "" {
				t.Fatalf("got %d %s jwt=%q, want 200 null", r.status, r.body, r.header.Get("Set-Auth-Jwt"))
			}
			if got := r.cookie(name) != nil; got != tt.wantCleared {
				t.Errorf("got cookie cleared=%v, want %v", got, tt.wantCleared)
			}
		})
	}
}

func TestSessionLifecycle(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("erin@example.com", pw)
	first := e.getSession(cookie).json(t)["session"].(map[string]any)["expiresAt"]

	// Younger than update age: no extension, no cookie.
	e.clock.Add(time.Hour)
	r := e.getSession(cookie)
	if r.cookie("auth.session_token") != nil || r.json(t)["session"].(map[string]any)["expiresAt"] != first {
		t.Fatalf("session extended before update age: %s", r.body)
	}
	// Older than update age: extended and the cookie re-set.
	e.clock.Add(24 * time.Hour)
	r = e.getSession(cookie)
	if r.cookie("auth.session_token") == nil || r.json(t)["session"].(map[string]any)["expiresAt"] == first {
		t.Fatalf("session not extended after update age: %s %v", r.body, r.header["Set-Cookie"])
	}
	// Expired: null, cookie cleared, row deleted.
	e.clock.Add(8 * 24 * time.Hour)
	r = e.getSession(cookie)
	if string(r.body) != "null" {
		t.Fatalf("expired session: got %s, want null", r.body)
	}
	if c := r.cookie("auth.session_token"); c == nil || c.MaxAge >= 0 {
		t.Errorf("expired session: cookie not cleared: %v", r.header["Set-Cookie"])
	}
	if got := e.count("session"); got != 0 {
		t.Errorf("got %d sessions, want the expired one deleted", got)
	}
}

func TestChangePassword(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("fay@example.com", pw)
	other := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "fay@example.com", "password": pw})
	otherCookie := other.cookie("auth.session_token")

	r := e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": "not-the-password", "newPassword": "brand-new-password"}, "Cookie", cookie, "Origin", "http://localhost:8080")
	if r.status != http.StatusBadRequest || r.code(t) != "INVALID_PASSWORD" {
		t.Fatalf("wrong current: got %d %s, want 400 INVALID_PASSWORD", r.status, r.body)
	}
	r = e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": pw, "newPassword": "short"}, "Cookie", cookie, "Origin", "http://localhost:8080")
	if r.status != http.StatusBadRequest || r.code(t) != "PASSWORD_TOO_SHORT" {
		t.Fatalf("short new: got %d %s, want 400 PASSWORD_TOO_SHORT", r.status, r.body)
	}
	r = e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": pw, "newPassword": "brand-new-password"})
	if r.status != http.StatusUnauthorized {
		t.Fatalf("no session: got %d %s, want 401", r.status, r.body)
	}
	if got := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "fay@example.com", "password": pw}); got.status != 200 {
		t.Fatalf("refused changes altered the password: %d %s", got.status, got.body)
	}
	before := e.count("session")
	r = e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": pw, "newPassword": "brand-new-password", "revokeOtherSessions": true}, "Cookie", cookie, "Origin", "http://localhost:8080")
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
	if got := e.count("session"); got != 1 || before < 3 {
		t.Errorf("got %d sessions (from %d), want only the current one left", got, before)
	}
	if s := e.getSession(otherCookie.Name + "=" + otherCookie.Value); string(s.body) != "null" {
		t.Errorf("other session survived revokeOtherSessions: %s", s.body)
	}
	if s := e.getSession(cookie); string(s.body) == "null" {
		t.Error("current session was revoked")
	}
	for _, tt := range []struct {
		pw   string
		want int
	}{{pw, 401}, {"brand-new-password", 200}} {
		if got := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "fay@example.com", "password": tt.pw}); got.status != tt.want {
			t.Errorf("sign-in with %q: got %d, want %d", tt.pw, got.status, tt.want)
		}
	}
}

func TestJWKSAndRouting(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodGet, "/api/auth/jwks", "", "")
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("got %s, want one key", r.body)
	}
	k := set.Keys[0]
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["kid"] == "" || k["x"] == "" {
		t.Errorf("got key %v", k)
	}
	for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
		if _, ok := k[private]; ok {
			t.Errorf("JWKS publishes private member %q", private)
		}
	}

	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/auth/ok", 200, ""},
		{"GET", "/api/auth", 404, "NOT_FOUND"},
		{"GET", "/api/auth/", 404, "NOT_FOUND"},
		{"GET", "/api/auth/does-not-exist", 404, "NOT_FOUND"},
		{"GET", "/api/auth/sign-in/email", 405, "METHOD_NOT_ALLOWED"},
		{"DELETE", "/api/auth/get-session", 405, "METHOD_NOT_ALLOWED"},
		{"PUT", "/api/auth/jwks", 405, "METHOD_NOT_ALLOWED"},
		{"GET", "/api/auth/jwks/", 404, "NOT_FOUND"},
		{"GET", "/api/authx", 404, "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := e.do(tt.method, tt.path, "", "")
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			if tt.code != "" && r.code(t) != tt.code {
				t.Errorf("got code %q, want %q", r.code(t), tt.code)
			}
		})
	}
}

func TestCrossOriginProtection(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.TrustedOrigins = []string{"https://app.example.com"} })
	body := `{"name":"X","email":"%s@example.com","password":"` + pw + `"}`
	// Sign-up follows Better Auth's formCsrfMiddleware: a browser's
	// request (Sec-Fetch-*) must name its origin (TestCookielessOriginRules).
	tests := []struct {
		name   string
		hdr    []string
		status int
		code   string
	}{
		{"no Origin, no Sec-Fetch (curl)", nil, 200, ""},
		{"base URL origin", []string{"Origin", "http://localhost:8080"}, 200, ""},
		{"trusted origin", []string{"Origin", "https://app.example.com"}, 200, ""},
		{"same-origin fetch with Origin", []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://localhost:8080"}, 200, ""},
		{"same-origin fetch without Origin", []string{"Sec-Fetch-Site", "same-origin"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"untrusted origin", []string{"Origin", "https://evil.example"}, 403, "INVALID_ORIGIN"},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, 403, "INVALID_ORIGIN"},
		{"cross-site without Origin", []string{"Sec-Fetch-Site", "cross-site"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"null origin", []string{"Origin", "null"}, 403, "MISSING_OR_NULL_ORIGIN"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users := e.count("user")
			r := e.do(http.MethodPost, "/api/auth/sign-up/email", "application/json", fmt.Sprintf(body, fmt.Sprint("u", i)), tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status == 403 {
				if r.code(t) != tt.code {
					t.Errorf("got %s, want %s", r.body, tt.code)
				}
				if e.count("user") != users {
					t.Error("a refused cross-origin sign-up created a user")
				}
			}
		})
	}
}

func TestRestartKeepsKeysAndSecretRotationDropsThem(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("gus@example.com", pw)
	old := e.getSession(cookie).header.Get("Set-Auth-Jwt")
	oldKid := kidOf(t, old)

	e.start() // same secret
	verifyJWT(t, e, old)
	if got := e.count("jwks"); got != 1 {
		t.Errorf("restart with the same secret: got %d keys, want 1", got)
	}
	if kid := kidOf(t, e.getSession(cookie).header.Get("Set-Auth-Jwt")); kid != oldKid {
		t.Errorf("restart with the same secret: got kid %s, want %s", kid, oldKid)
	}

	e.opts.Secret = []byte("a-completely-different-secret-of-enough-length")
	e.start()
	jwks := string(e.do(http.MethodGet, "/api/auth/jwks", "", "").body)
	if strings.Contains(jwks, oldKid) {
		t.Errorf("old key still published after AUTH_SECRET rotation: %s", jwks)
	}
	if !strings.Contains(jwks, `"kid"`) {
		t.Errorf("no new key after AUTH_SECRET rotation: %s", jwks)
	}
	set, _ := jwk.Parse([]byte(jwks))
	if _, err := jwt.Parse([]byte(old), jwt.WithKeySet(set), jwt.WithClock(jwt.ClockFunc(e.clock.Now))); err == nil {
		t.Error("a JWT signed before AUTH_SECRET rotation still verifies")
	}
	// The old cookie's HMAC no longer verifies either: everyone signs in again.
	if r := e.getSession(cookie); string(r.body) != "null" {
		t.Errorf("old cookie after rotation: got %s, want null", r.body)
	}
	keys, err := e.iss.PublicKeys(t.Context())
	if err != nil || len(keys) != 1 || keys[0].KID == oldKid {
		t.Errorf("PublicKeys after rotation: got %v %v, want only the new key", keys, err)
	}
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	var h struct{ Kid string }
	json.Unmarshal(hdr, &h)
	return h.Kid
}

func TestConcurrentSignUps(t *testing.T) {
	e := newEnv(t)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := fmt.Sprintf(`{"name":"U%d","email":"user%d@example.com","password":"%s"}`, i, i, pw)
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/auth/sign-up/email", strings.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Sprintf("user%d: status %d", i, res.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for table, want := range map[string]int{"user": n, "account": n, "session": n} {
		if got := e.count(table); got != want {
			t.Errorf("got %d rows in %s, want %d", got, table, want)
		}
	}
	for i := range n {
		if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": fmt.Sprintf("user%d@example.com", i), "password": pw}); r.status != 200 {
			t.Errorf("user%d cannot sign in: %d %s", i, r.status, r.body)
		}
	}
}

func TestSecureCookieOnHTTPS(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.BaseURL = "https://auth.example.com" })
	r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "S", "email": "s@example.com", "password": pw})
	c := r.cookie("__Secure-auth.session_token")
	if r.status != 200 || c == nil || !c.Secure || !c.HttpOnly {
		t.Fatalf("got %d %v, want a Secure __Secure-auth.session_token cookie", r.status, r.header["Set-Cookie"])
	}
	if e.iss.CookieName() != "__Secure-auth.session_token" {
		t.Errorf("got CookieName %q", e.iss.CookieName())
	}
	// The unprefixed name is not our cookie.
	if g := e.getSession("auth.session_token=" + c.Value); string(g.body) != "null" {
		t.Errorf("unprefixed cookie accepted on https: %s", g.body)
	}
	if g := e.getSession(c.Name + "=" + c.Value); g.header.Get("Set-Auth-Jwt") == "" {
		t.Errorf("prefixed cookie refused: %s", g.body)
	}
}

func TestRateLimits(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) {
		o.SignInPerIP = issuer.Rate{N: 3, Per: time.Minute}
		o.SignInPerEmail = issuer.Rate{N: 5, Per: time.Minute}
		o.SignUpPerIP = issuer.Rate{N: 2, Per: time.Minute}
		// The test names the client in a header; production uses the
		// proxy's trusted-proxy rule.
		o.ClientIP = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	})
	signIn := func(ip, email string) resp {
		return e.postJSON("/api/auth/sign-in/email", map[string]any{"email": email, "password": "wrong-password"}, "X-Test-Client", ip)
	}
	for i := range 3 {
		if r := signIn("10.0.0.1", "a@example.com"); r.status != 401 {
			t.Fatalf("attempt %d: got %d %s, want 401", i, r.status, r.body)
		}
	}
	r := signIn("10.0.0.1", "a@example.com")
	if r.status != 429 || r.code(t) != "TOO_MANY_REQUESTS" || r.header.Get("Retry-After") == "" {
		t.Fatalf("4th from one IP: got %d %s Retry-After=%q, want 429 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
	// Another IP is not affected, until the email's own limit (5) is hit.
	for i, ip := range []string{"10.0.0.2", "10.0.0.3"} {
		if r := signIn(ip, "A@example.com"); r.status != 401 {
			t.Fatalf("email attempt %d from %s: got %d, want 401", i+4, ip, r.status)
		}
	}
	if r := signIn("10.0.0.4", "a@example.com"); r.status != 429 {
		t.Fatalf("6th attempt on one email from a new IP: got %d %s, want 429", r.status, r.body)
	}
	// Buckets refill with time.
	e.clock.Add(time.Minute)
	if r := signIn("10.0.0.1", "a@example.com"); r.status != 401 {
		t.Fatalf("after a minute: got %d, want 401", r.status)
	}
	// Sign-up per IP, and nothing is created once limited.
	for i := range 2 {
		r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "N", "email": fmt.Sprintf("n%d@example.com", i), "password": pw}, "X-Test-Client", "10.9.9.9")
		if r.status != 200 {
			t.Fatalf("sign-up %d: %d %s", i, r.status, r.body)
		}
	}
	users := e.count("user")
	if r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "N", "email": "n9@example.com", "password": pw}, "X-Test-Client", "10.9.9.9"); r.status != 429 {
		t.Fatalf("3rd sign-up: got %d, want 429", r.status)
	}
	if e.count("user") != users {
		t.Error("a rate-limited sign-up created a user")
	}
}
