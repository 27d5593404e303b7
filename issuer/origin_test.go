package issuer_test

import (
	"net/http"
	"testing"

	"github.com/authsidecar/authsidecar/issuer"
)

// Better Auth's origin rule (docs/protocol.md; Better Auth 1.7.25's
// originCheckMiddleware): every state-changing request that carries a
// Cookie header must name a trusted origin in Origin, else Referer.
// Without it the answer is 403 MISSING_OR_NULL_ORIGIN and nothing changes.
func TestCookieBearingPostNeedsOrigin(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.TrustedOrigins = []string{"https://app.example.com"} })
	cookie, _ := e.signUp("origin@example.com", pw)
	// Reading is not changing: GET get-session with the cookie and no
	// Origin answers the session, as Better Auth's does.
	if r := e.getSession(cookie); r.status != http.StatusOK || r.header.Get("Set-Auth-Jwt") == "" {
		t.Errorf("GET get-session with a cookie and no Origin: got %d %s, want 200 with a JWT", r.status, r.body)
	}
	paths := []string{
		"/api/auth/sign-out",
		"/api/auth/sign-in/email",
		"/api/auth/sign-up/email",
		"/api/auth/change-password",
		"/api/auth/get-session",
		"/api/auth/request-password-reset",
		"/api/auth/reset-password",
		"/api/auth/send-verification-email",
		"/api/auth/reset-password-page",
	}
	body := `{"email":"origin@example.com","password":"` + pw + `","name":"X","currentPassword":"` + pw + `","newPassword":"another-password-1","token":"x"}`
	tests := []struct {
		name string
		hdr  []string
		code string // "" when the origin check must let it through
	}{
		{"session cookie, no Origin", []string{"Cookie", cookie}, "MISSING_OR_NULL_ORIGIN"},
		{"any cookie, no Origin", []string{"Cookie", "foo=bar"}, "MISSING_OR_NULL_ORIGIN"},
		{"cookie, Origin null", []string{"Cookie", cookie, "Origin", "null"}, "MISSING_OR_NULL_ORIGIN"},
		{"cookie, same-origin fetch without Origin", []string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin"}, "MISSING_OR_NULL_ORIGIN"},
		{"cookie, untrusted Origin", []string{"Cookie", cookie, "Origin", "https://evil.example"}, "INVALID_ORIGIN"},
		{"cookie, untrusted Referer", []string{"Cookie", cookie, "Referer", "https://evil.example/page"}, "INVALID_ORIGIN"},
		{"cookie, Origin naming the request's own host", []string{"Cookie", cookie, "Origin", "http://" + e.srv.Listener.Addr().String()}, "INVALID_ORIGIN"},
		{"cookie, base URL origin", []string{"Cookie", cookie, "Origin", "http://localhost:8080"}, ""},
		{"cookie, trusted origin", []string{"Cookie", cookie, "Origin", "https://app.example.com"}, ""},
		{"cookie, trusted Referer", []string{"Cookie", cookie, "Referer", "https://app.example.com/settings?x=1"}, ""},
	}
	for _, path := range paths {
		for _, tt := range tests {
			t.Run(path+"/"+tt.name, func(t *testing.T) {
				sessions, users := e.count("session"), e.count("user")
				r := e.do(http.MethodPost, path, "application/json", body, tt.hdr...)
				if tt.code == "" {
					if r.status == http.StatusForbidden && (r.code(t) == "MISSING_OR_NULL_ORIGIN" || r.code(t) == "INVALID_ORIGIN") {
						t.Fatalf("got %d %s, want the origin accepted", r.status, r.body)
					}
					return
				}
				if r.status != http.StatusForbidden || r.code(t) != tt.code {
					t.Fatalf("got %d %s, want 403 %s", r.status, r.body, tt.code)
				}
				if got := r.header.Get("Set-Cookie"); got != "" {
					t.Errorf("a refused request set a cookie: %s", got)
				}
				if s, u := e.count("session"), e.count("user"); s != sessions || u != users {
					t.Errorf("a refused request changed the store: sessions %d -> %d, users %d -> %d", sessions, s, users, u)
				}
			})
		}
	}
}

// Without cookies, sign-in and sign-up follow Better Auth's
// formCsrfMiddleware: a request that sends Sec-Fetch-* headers (a browser,
// or Node's fetch) or an Origin/Referer must name a trusted origin, and a
// cross-site navigation is refused outright; one sending none of them
// (curl, a server) passes. The other endpoints keep the cross-origin
// protection they had.
func TestCookielessOriginRules(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.TrustedOrigins = []string{"https://app.example.com"} })
	e.signUp("cookieless@example.com", pw)
	signIn := `{"email":"cookieless@example.com","password":"` + pw + `"}`
	tests := []struct {
		name   string
		path   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"sign-in, nothing (curl)", "/api/auth/sign-in/email", signIn, nil, 200, ""},
		{"sign-in, trusted Origin", "/api/auth/sign-in/email", signIn, []string{"Origin", "https://app.example.com"}, 200, ""},
		{"sign-in, trusted Referer", "/api/auth/sign-in/email", signIn, []string{"Referer", "http://localhost:8080/login"}, 200, ""},
		{"sign-in, Sec-Fetch-Site same-origin without Origin", "/api/auth/sign-in/email", signIn, []string{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"sign-in, Node fetch without Origin", "/api/auth/sign-in/email", signIn, []string{"Sec-Fetch-Mode", "cors"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"sign-in, Sec-Fetch with trusted Origin", "/api/auth/sign-in/email", signIn, []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://app.example.com"}, 200, ""},
		{"sign-in, cross-site navigation", "/api/auth/sign-in/email", signIn, []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Origin", "https://app.example.com"}, 403, "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED"},
		{"sign-in, untrusted Origin", "/api/auth/sign-in/email", signIn, []string{"Origin", "https://evil.example"}, 403, "INVALID_ORIGIN"},
		{"sign-in, Origin null", "/api/auth/sign-in/email", signIn, []string{"Origin", "null"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"sign-up, Sec-Fetch without Origin", "/api/auth/sign-up/email", `{"name":"N","email":"n1@example.com","password":"` + pw + `"}`, []string{"Sec-Fetch-Site", "same-origin"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"sign-out, nothing (curl)", "/api/auth/sign-out", `{}`, nil, 200, ""},
		{"sign-out, untrusted Origin", "/api/auth/sign-out", `{}`, []string{"Origin", "https://evil.example"}, 403, "INVALID_ORIGIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodPost, tt.path, "application/json", tt.body, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.code != "" && r.code(t) != tt.code {
				t.Errorf("got code %q, want %q", r.code(t), tt.code)
			}
		})
	}
}
