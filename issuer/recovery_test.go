package issuer_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
)

// recorder seals with the real Box and keeps each plaintext, so a test can
// follow the link the user would receive.
type recorder struct {
	box  *mail.Box
	mu   sync.Mutex
	msgs []mail.Message
}

func (r *recorder) Seal(id string, m mail.Message) ([]byte, error) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	return r.box.Seal(id, m)
}

func (r *recorder) all() []mail.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mail.Message(nil), r.msgs...)
}

// last returns the newest message of kind to addr, failing when none.
func (r *recorder) last(t testing.TB, kind mail.Kind, to string) mail.Message {
	t.Helper()
	msgs := r.all()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Kind == kind && msgs[i].To == to {
			return msgs[i]
		}
	}
	t.Fatalf("no %s message to %s among %d", kind, to, len(msgs))
	return mail.Message{}
}

func (r *recorder) count(kind mail.Kind, to string) int {
	n := 0
	for _, m := range r.all() {
		if m.Kind == kind && m.To == to {
			n++
		}
	}
	return n
}

// newRecoveryEnv is newEnv with mail on (sealed by a real Box) and the
// trusted origin the reference transcripts use.
func newRecoveryEnv(t testing.TB, mutate ...func(*issuer.Options)) (*env, *recorder) {
	t.Helper()
	box, err := mail.NewBox([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{box: box}
	e := newEnv(t, append([]func(*issuer.Options){func(o *issuer.Options) {
		o.TrustedOrigins = []string{"http://localhost:5173"}
		o.Recovery.Sealer = rec
	}}, mutate...)...)
	return e, rec
}

var resetLinkRE = regexp.MustCompile(`^http://localhost:8080/api/auth/reset-password/([A-Za-z0-9_-]{43})\?callbackURL=(.*)$`)

// resetToken requests a reset for email and returns the mailed token.
func (e *env) resetToken(rec *recorder, email, redirectTo string) string {
	e.t.Helper()
	before := rec.count(mail.PasswordReset, email)
	body := map[string]any{"email": email}
	if redirectTo != "" {
		body["redirectTo"] = redirectTo
	}
	r := e.postJSON("/api/auth/request-password-reset", body)
	if r.status != 200 {
		e.t.Fatalf("request-password-reset: got %d %s", r.status, r.body)
	}
	e.iss.Wait()
	if rec.count(mail.PasswordReset, email) != before+1 {
		e.t.Fatalf("request-password-reset queued no message to %s", email)
	}
	m := rec.last(e.t, mail.PasswordReset, email)
	sub := resetLinkRE.FindStringSubmatch(m.URL)
	if sub == nil {
		e.t.Fatalf("reset link %q does not have the mailed shape", m.URL)
	}
	return sub[1]
}

func TestRequestPasswordResetSameAnswerForEveryAddress(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	e.signUp("alice@example.com", "password-1")
	known := e.postJSON("/api/auth/request-password-reset", map[string]any{"email": "ALICE@Example.COM"})
	unknown := e.postJSON("/api/auth/request-password-reset", map[string]any{"email": "nobody@example.com"})
	e.iss.Wait()
	want := `{"status":true,"message":"If this email exists in our system, check your email for the reset link"}`
	for name, r := range map[string]resp{"known": known, "unknown": unknown} {
		if r.status != 200 || string(r.body) != want {
			t.Errorf("%s: got %d %s, want 200 %s", name, r.status, r.body, want)
		}
		if r.header.Get("Set-Cookie") != "" {
			t.Errorf("%s: set a cookie", name)
		}
	}
	msgs := rec.all()
	if len(msgs) != 1 || msgs[0].To != "alice@example.com" || msgs[0].Kind != mail.PasswordReset {
		t.Fatalf("got messages %+v, want one reset mail to the stored lower-case address", msgs)
	}
	m := msgs[0]
	if sub := resetLinkRE.FindStringSubmatch(m.URL); sub == nil || sub[2] != "" {
		t.Errorf("link %q: want .../reset-password/<43 chars>?callbackURL= (empty)", m.URL)
	}
	if d := m.TokenExpiresAt.Sub(e.clock.Now()); d < 59*time.Minute || d > time.Hour {
		t.Errorf("token expires in %s, want 1h", d)
	}
	if m.User.Email != "alice@example.com" || m.User.Name != "Test User" || m.User.ID == "" {
		t.Errorf("message user %+v", m.User)
	}
}

func TestPasswordResetFlow(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	cookie, _ := e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "")

	// The mailed link with no redirectTo lands on the built-in page.
	r := e.do("GET", "/api/auth/reset-password/"+tok+"?callbackURL=", "", "")
	if r.status != 302 || r.header.Get("Location") != "http://localhost:8080/api/auth/reset-password-page?token="+tok {
		t.Fatalf("GET link: got %d Location %q", r.status, r.header.Get("Location"))
	}
	if r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("redirect carrying a token without Referrer-Policy: no-referrer")
	}
	// A trusted absolute callback keeps its query; a relative one resolves
	// against base_url (Better Auth P14, P15). Neither spends the token.
	for cb, want := range map[string]string{
		"http://localhost:5173/reset?x=1": "http://localhost:5173/reset?x=1&token=" + tok,
		"/reset":                          "http://localhost:8080/reset?token=" + tok,
	} {
		r := e.do("GET", "/api/auth/reset-password/"+tok+"?callbackURL="+url.QueryEscape(cb), "", "")
		if r.status != 302 || r.header.Get("Location") != want {
			t.Errorf("callback %s: got %d %q, want 302 %q", cb, r.status, r.header.Get("Location"), want)
		}
	}

	r = e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-2", "token": tok})
	if r.status != 200 || string(r.body) != `{"status":true}` || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("reset: got %d %s %v", r.status, r.body, r.header)
	}
	if got := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-1"}); got.status != 401 {
		t.Errorf("old password after reset: got %d, want 401", got.status)
	}
	signin := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-2"})
	if signin.status != 200 {
		t.Errorf("new password: got %d %s", signin.status, signin.body)
	}
	if u := signin.json(t)["user"].(map[string]any); u["emailVerified"] != true {
		t.Errorf("reset did not mark the address verified: %v", u)
	}
	if s := e.getSession(cookie); string(s.body) != "null" {
		t.Errorf("old cookie session after reset: got %s, want null (revoked by default)", s.body)
	}
	// Used: refused, and the link now redirects with the error.
	if r := e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-3", "token": tok}); r.status != 400 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("reuse: got %d %s, want 400 INVALID_TOKEN", r.status, r.body)
	}
	r = e.do("GET", "/api/auth/reset-password/"+tok+"?callbackURL=/reset", "", "")
	if r.header.Get("Location") != "http://localhost:8080/reset?error=INVALID_TOKEN" {
		t.Errorf("used link: got Location %q", r.header.Get("Location"))
	}
}

func TestPasswordResetKeepsSessionsWhenAsked(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.KeepSessionsOnReset = true })
	cookie, _ := e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "")
	if r := e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-2", "token": tok}); r.status != 200 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	if s := e.getSession(cookie); s.status != 200 || string(s.body) == "null" {
		t.Errorf("session after reset with revoke off: got %d %s, want it alive", s.status, s.body)
	}
}

func TestResetTokenLifecycle(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.ResetTokenTTL = 2 * time.Second })
	e.signUp("alice@example.com", "password-1")
	reset := func(tok string) resp {
		return e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-2", "token": tok})
	}
	// A newer link replaces the older one.
	old := e.resetToken(rec, "alice@example.com", "")
	newer := e.resetToken(rec, "alice@example.com", "")
	if r := reset(old); r.status != 400 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("replaced token: got %d %s", r.status, r.body)
	}
	// Letter case matters: the token is compared as bytes (by its hash).
	if r := reset(strings.ToUpper(newer)); r.code(t) != "INVALID_TOKEN" {
		t.Errorf("case-swapped token: got %d %s", r.status, r.body)
	}
	// Expired.
	e.clock.Add(3 * time.Second)
	if r := reset(newer); r.status != 400 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("expired token: got %d %s", r.status, r.body)
	}
	// A successful reset invalidates every other reset token of the user.
	a := e.resetToken(rec, "alice@example.com", "")
	if r := reset(a); r.status != 200 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	if r := reset(a); r.code(t) != "INVALID_TOKEN" {
		t.Errorf("second use: got %d %s", r.status, r.body)
	}
}

func TestResetPasswordChecks(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "")
	tests := []struct {
		name, body, query string
		status            int
		code              string
	}{
		{"no newPassword", `{"token":"` + tok + `"}`, "", 400, "VALIDATION_ERROR"},
		{"empty body", `{}`, "", 400, "VALIDATION_ERROR"},
		{"no token", `{"newPassword":"password-2"}`, "", 400, "INVALID_TOKEN"},
		{"short password, bad token: length first", `{"newPassword":"short","token":"nope"}`, "", 400, "PASSWORD_TOO_SHORT"},
		{"short password keeps the token", `{"newPassword":"short","token":"` + tok + `"}`, "", 400, "PASSWORD_TOO_SHORT"},
		{"long password", `{"newPassword":"` + strings.Repeat("x", 129) + `","token":"` + tok + `"}`, "", 400, "PASSWORD_TOO_LONG"},
		{"unknown token", `{"newPassword":"password-2","token":"nope"}`, "", 400, "INVALID_TOKEN"},
		{"huge token", `{"newPassword":"password-2","token":"` + strings.Repeat("a", 4000) + `"}`, "", 400, "INVALID_TOKEN"},
		{"token not a string", `{"newPassword":"password-2","token":5}`, "", 400, "VALIDATION_ERROR"},
		{"body token wins over the query", `{"newPassword":"password-2","token":"bad"}`, "?token=" + tok, 400, "INVALID_TOKEN"},
		{"duplicate member", `{"newPassword":"password-2","newPassword":"x","token":"` + tok + `"}`, "", 400, "BAD_REQUEST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/api/auth/reset-password"+tc.query, "application/json", tc.body)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	if r := e.do("POST", "/api/auth/reset-password", "application/x-www-form-urlencoded", "newPassword=password-2&token="+tok); r.status != 415 {
		t.Errorf("form body: got %d %s, want 415", r.status, r.body)
	}
	// The token survived every refusal above and still works from the query.
	if r := e.do("POST", "/api/auth/reset-password?token="+tok, "application/json", `{"newPassword":"password-2"}`); r.status != 200 {
		t.Errorf("token from the query: got %d %s", r.status, r.body)
	}
}

// hostileRedirects are targets a redirect must never go to: other hosts in
// every spelling browsers read as one.
var hostileRedirects = []string{
	"https://evil.example/reset",
	"//evil.example/x",
	"/\\evil.example/x",
	"\\\\evil.example",
	"https:evil.example",
	"https:/evil.example",
	"http://localhost:5173@evil.example/",
	"http://user@localhost:5173/",
	"http://localhost:5173.evil.example/",
	"http://evil.example#http://localhost:5173",
	"/%2F%2Fevil.example",
	"/%5Cevil.example",
	"/%2fevil.example",
	"javascript:alert(1)",
	"data:text/html,hi",
	"reset",
	" /reset",
	"/reset\n",
	"/re\tset",
	"http://LOCALHOST:5173%2F@evil.example",
	"http://localhost%3A5173/",
	"ftp://localhost:5173/",
	"http://ｌocalhost:5173/",
	"/\u2215evil.example",
}

func TestRedirectTargetsRefused(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	cookie, _ := e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "")
	before := len(rec.all())
	for _, target := range hostileRedirects {
		t.Run(target, func(t *testing.T) {
			r := e.postJSON("/api/auth/request-password-reset", map[string]any{"email": "alice@example.com", "redirectTo": target})
			if r.status != 403 || r.code(t) != "INVALID_REDIRECT_URL" {
				t.Errorf("request-password-reset: got %d %s, want 403 INVALID_REDIRECT_URL", r.status, r.body)
			}
			r = e.do("GET", "/api/auth/reset-password/"+tok+"?callbackURL="+url.QueryEscape(target), "", "")
			if r.status != 403 || r.code(t) != "INVALID_CALLBACK_URL" || r.header.Get("Location") != "" {
				t.Errorf("reset link: got %d %s Location %q, want 403 INVALID_CALLBACK_URL", r.status, r.body, r.header.Get("Location"))
			}
			r = e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "alice@example.com", "callbackURL": target})
			if r.status != 403 || r.code(t) != "INVALID_CALLBACK_URL" {
				t.Errorf("send-verification-email: got %d %s, want 403 INVALID_CALLBACK_URL", r.status, r.body)
			}
			r = e.do("GET", "/api/auth/verify-email?token=x&callbackURL="+url.QueryEscape(target), "", "")
			if r.status != 403 || r.code(t) != "INVALID_CALLBACK_URL" {
				t.Errorf("verify-email: got %d %s, want 403 INVALID_CALLBACK_URL", r.status, r.body)
			}
			r = e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-1", "callbackURL": target})
			if r.status != 403 || r.code(t) != "INVALID_CALLBACK_URL" || r.header.Get("Location") != "" {
				t.Errorf("sign-in: got %d %s, want 403 INVALID_CALLBACK_URL", r.status, r.body)
			}
			r = e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "x", "email": "x@example.com", "password": "password-1", "callbackURL": target})
			if r.status != 403 || r.code(t) != "INVALID_CALLBACK_URL" {
				t.Errorf("sign-up: got %d %s, want 403 INVALID_CALLBACK_URL", r.status, r.body)
			}
		})
	}
	e.iss.Wait()
	if n := len(rec.all()); n != before {
		t.Errorf("refused redirects queued %d messages", n-before)
	}
	_ = cookie
	// And the good ones pass.
	for _, target := range []string{"/reset", "/", "http://localhost:5173/reset?x=1", "http://localhost:8080/a/b", "/reset?next=%2Fhome"} {
		if r := e.postJSON("/api/auth/request-password-reset", map[string]any{"email": "nobody@example.com", "redirectTo": target}); r.status != 200 {
			t.Errorf("redirectTo %q: got %d %s, want 200", target, r.status, r.body)
		}
	}
}

func TestRecoveryOff(t *testing.T) {
	e := newEnv(t)
	if r := e.postJSON("/api/auth/request-password-reset", map[string]any{"email": "a@example.com"}); r.status != 400 || r.code(t) != "RESET_PASSWORD_DISABLED" {
		t.Errorf("request-password-reset: got %d %s", r.status, r.body)
	}
	if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "a@example.com"}); r.status != 400 || r.code(t) != "VERIFICATION_EMAIL_NOT_ENABLED" {
		t.Errorf("send-verification-email: got %d %s", r.status, r.body)
	}
	if r := e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-2", "token": "x"}); r.status != 400 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("reset-password: got %d %s", r.status, r.body)
	}
}

func TestCookieNeedsOrigin(t *testing.T) {
	e, _ := newRecoveryEnv(t)
	for _, path := range []string{"/api/auth/request-password-reset", "/api/auth/reset-password", "/api/auth/send-verification-email"} {
		r := e.do("POST", path, "application/json", `{"email":"a@example.com","newPassword":"password-2","token":"x"}`, "Cookie", "foo=bar")
		if r.status != 403 || r.code(t) != "MISSING_OR_NULL_ORIGIN" {
			t.Errorf("%s with a cookie and no Origin: got %d %s", path, r.status, r.body)
		}
		r = e.do("POST", path, "application/json", `{"email":"a@example.com","newPassword":"password-2","token":"x"}`, "Cookie", "foo=bar", "Origin", "null")
		if r.status != 403 {
			t.Errorf("%s with Origin null: got %d %s", path, r.status, r.body)
		}
		r = e.do("POST", path, "application/json", `{"email":"a@example.com","newPassword":"password-2","token":"x"}`, "Cookie", "foo=bar", "Referer", "http://localhost:5173/page")
		if r.status == 403 {
			t.Errorf("%s with a cookie and a trusted Referer: got %d %s", path, r.status, r.body)
		}
	}
}

var verifyLinkRE = regexp.MustCompile(`^http://localhost:8080/api/auth/verify-email\?token=([A-Za-z0-9_-]{43})&callbackURL=(.*)$`)

func verifyToken(t testing.TB, rec *recorder, email string) (tok, callback string) {
	t.Helper()
	m := rec.last(t, mail.EmailVerification, email)
	sub := verifyLinkRE.FindStringSubmatch(m.URL)
	if sub == nil {
		t.Fatalf("verification link %q does not have the mailed shape", m.URL)
	}
	cb, _ := url.QueryUnescape(sub[2])
	return sub[1], cb
}

func TestEmailVerification(t *testing.T) {
	// The link signs in here: Better Auth's autoSignInAfterVerification
	// (TestVerifyEmailSignIn covers the default, off).
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.SignInAfterVerification = true })
	cookie, _ := e.signUp("alice@example.com", "password-1")
	e.signUp("bob@example.com", "password-1")
	origin := []string{"Cookie", cookie, "Origin", "http://localhost:8080"}

	if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "bob@example.com"}, origin...); r.status != 400 || r.code(t) != "EMAIL_MISMATCH" {
		t.Errorf("other user's email with a session: got %d %s", r.status, r.body)
	}
	r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "Alice@Example.com", "callbackURL": "/verified"}, origin...)
	if r.status != 200 || string(r.body) != `{"status":true}` {
		t.Fatalf("own email with a session: got %d %s", r.status, r.body)
	}
	tok, cb := verifyToken(t, rec, "alice@example.com")
	if cb != "/verified" {
		t.Errorf("callbackURL in the link: %q", cb)
	}
	// Without a callback: JSON, and a session for the user.
	r = e.do("GET", "/api/auth/verify-email?token="+tok, "", "")
	if r.status != 200 || string(r.body) != `{"status":true,"user":null}` {
		t.Fatalf("verify: got %d %s", r.status, r.body)
	}
	c := r.cookie("auth.session_token")
	if c == nil {
		t.Fatal("verify set no session cookie")
	}
	s := e.getSession(c.Name + "=" + c.Value).json(t)
	if u := s["user"].(map[string]any); u["email"] != "alice@example.com" || u["emailVerified"] != true {
		t.Errorf("session after verify: %v", u)
	}
	// Used: refused, never a second success.
	if r := e.do("GET", "/api/auth/verify-email?token="+tok, "", ""); r.status != 401 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("reuse: got %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/auth/verify-email?token="+tok+"&callbackURL=/verified?x=1", "", ""); r.status != 302 || r.header.Get("Location") != "/verified?x=1&error=INVALID_TOKEN" {
		t.Errorf("reuse with callback: got %d %q", r.status, r.header.Get("Location"))
	}
	if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "alice@example.com"}, origin...); r.status != 400 || r.code(t) != "EMAIL_ALREADY_VERIFIED" {
		t.Errorf("verified user with a session: got %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/auth/verify-email", "", ""); r.status != 400 || r.code(t) != "VALIDATION_ERROR" {
		t.Errorf("no token: got %d %s", r.status, r.body)
	}

	// Without a session every address gets the same answer; only the
	// unverified user gets mail.
	before := len(rec.all())
	for _, addr := range []string{"alice@example.com", "bob@example.com", "nobody@example.com"} {
		r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": addr, "callbackURL": "http://localhost:5173/welcome"})
		if r.status != 200 || string(r.body) != `{"status":true}` {
			t.Errorf("%s without a session: got %d %s", addr, r.status, r.body)
		}
	}
	e.iss.Wait()
	if got := rec.all()[before:]; len(got) != 1 || got[0].To != "bob@example.com" {
		t.Fatalf("got %+v, want one mail to bob", got)
	}
	tok, _ = verifyToken(t, rec, "bob@example.com")
	r = e.do("GET", "/api/auth/verify-email?token="+tok+"&callbackURL="+url.QueryEscape("http://localhost:5173/welcome"), "", "")
	if r.status != 302 || r.header.Get("Location") != "http://localhost:5173/welcome" || r.cookie("auth.session_token") == nil {
		t.Errorf("verify with callback: got %d %q cookie %v", r.status, r.header.Get("Location"), r.cookie("auth.session_token"))
	}
}

func TestVerificationTokenExpiresAndIsReplaced(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.VerificationTokenTTL = time.Second })
	e.signUp("alice@example.com", "password-1")
	send := func() string {
		e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "alice@example.com"})
		e.iss.Wait()
		tok, _ := verifyToken(t, rec, "alice@example.com")
		return tok
	}
	old := send()
	newer := send()
	if old == newer {
		t.Fatal("the same token twice")
	}
	if r := e.do("GET", "/api/auth/verify-email?token="+old, "", ""); r.status != 401 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("replaced: got %d %s", r.status, r.body)
	}
	e.clock.Add(2 * time.Second)
	if r := e.do("GET", "/api/auth/verify-email?token="+newer, "", ""); r.status != 401 || r.code(t) != "INVALID_TOKEN" {
		t.Errorf("expired: got %d %s", r.status, r.body)
	}
}

func TestRequireEmailVerification(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) {
		o.Recovery.RequireEmailVerification = true
		o.Recovery.SendOnSignin = true
		o.Recovery.SignInAfterVerification = true
	})
	r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Alice", "email": "alice@example.com", "password": "password-1", "callbackURL": "/welcome"})
	if r.status != 200 || r.cookie("auth.session_token") != nil {
		t.Fatalf("sign-up: got %d %s cookie %v", r.status, r.body, r.cookie("auth.session_token"))
	}
	body := r.json(t)
	if body["token"] != nil || body["user"].(map[string]any)["emailVerified"] != false {
		t.Errorf("sign-up body: %s", r.body)
	}
	if e.count("session") != 0 {
		t.Error("sign-up made a session")
	}
	e.iss.Wait() // the link is queued after the answer
	tok, cb := verifyToken(t, rec, "alice@example.com")
	if cb != "/welcome" {
		t.Errorf("sign-up callbackURL in the link: %q", cb)
	}
	// Signing up again: the same answer, a made-up user, no mail.
	n := len(rec.all())
	again := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Mallory", "email": "alice@example.com", "password": "password-9"})
	e.iss.Wait()
	if again.status != 200 || again.json(t)["token"] != nil || again.json(t)["user"].(map[string]any)["id"] == body["user"].(map[string]any)["id"] {
		t.Errorf("second sign-up: got %d %s", again.status, again.body)
	}
	if len(rec.all()) != n {
		t.Error("second sign-up queued mail")
	}
	// Wrong password: 401, no mail. Right password: 403, a fresh link.
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "wrong-pass"}); r.status != 401 {
		t.Errorf("wrong password: got %d %s", r.status, r.body)
	}
	if len(rec.all()) != n {
		t.Error("a wrong password queued mail")
	}
	r = e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-1"})
	if r.status != 403 || r.code(t) != "EMAIL_NOT_VERIFIED" || r.cookie("auth.session_token") != nil {
		t.Errorf("unverified sign-in: got %d %s", r.status, r.body)
	}
	if len(rec.all()) != n+1 {
		t.Errorf("send_verification_on_signin: %d new messages, want 1", len(rec.all())-n)
	}
	// The sign-up link was replaced by the sign-in one.
	if r := e.do("GET", "/api/auth/verify-email?token="+tok, "", ""); r.status != 401 {
		t.Errorf("replaced sign-up link: got %d %s", r.status, r.body)
	}
	tok, _ = verifyToken(t, rec, "alice@example.com")
	if r := e.do("GET", "/api/auth/verify-email?token="+tok+"&callbackURL=/", "", ""); r.status != 302 || r.cookie("auth.session_token") == nil {
		t.Errorf("verify: got %d %v", r.status, r.header)
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-1"}); r.status != 200 {
		t.Errorf("verified sign-in: got %d %s", r.status, r.body)
	}
}

func TestRecoveryLimits(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) {
		o.MailPerEmail = issuer.Rate{N: 2, Per: time.Hour}
		o.MailPerIP = issuer.Rate{N: 5, Per: time.Hour}
		o.TokenPerIP = issuer.Rate{N: 3, Per: time.Minute}
	})
	e.signUp("alice@example.com", "password-1")
	ask := func(addr string) resp {
		return e.postJSON("/api/auth/request-password-reset", map[string]any{"email": addr})
	}
	// Per address: the third request is answered the same and queues nothing.
	for i := 0; i < 3; i++ {
		if r := ask("alice@example.com"); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	e.iss.Wait()
	if n := rec.count(mail.PasswordReset, "alice@example.com"); n != 2 {
		t.Errorf("per-address limit 2/h: %d mails queued", n)
	}
	// Unknown addresses spend their budget the same way (the limit is not
	// an oracle); two requests left for this IP.
	ask("nobody@example.com")
	ask("nobody@example.com")
	r := ask("nobody@example.com")
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-Retry-After") == "" {
		t.Errorf("per-IP limit: got %d %v, want 429 with Retry-After and X-Retry-After", r.status, r.header)
	}
	// The verification budget is its own: spending it (as anyone can, for
	// any address) leaves the resets alone.
	e2, rec2 := newRecoveryEnv(t, func(o *issuer.Options) { o.MailPerEmail = issuer.Rate{N: 1, Per: time.Hour} })
	e2.signUp("bob@example.com", "password-1")
	for range 3 {
		e2.postJSON("/api/auth/send-verification-email", map[string]any{"email": "bob@example.com"})
	}
	e2.resetToken(rec2, "bob@example.com", "")
	if n := rec2.count(mail.EmailVerification, "bob@example.com"); n != 1 {
		t.Errorf("verification mails with a budget of 1/h: %d", n)
	}
	for i := 0; i < 3; i++ {
		e.postJSON("/api/auth/reset-password", map[string]any{"newPassword": "password-2", "token": "guess"})
	}
	if r := e.do("GET", "/api/auth/verify-email?token=guess", "", ""); r.status != 429 {
		t.Errorf("token guessing past the per-IP limit: got %d %s", r.status, r.body)
	}
}

func TestResetPage(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	cookie, _ := e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "")
	r := e.do("GET", "/api/auth/reset-password-page?token="+tok, "", "")
	csp := r.header.Get("Content-Security-Policy")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("page: got %d %v", r.status, r.header)
	}
	if !bytes.Contains(r.body, []byte(`name="token" value="`+tok+`"`)) || bytes.Contains(r.body, []byte("<script")) || bytes.Contains(r.body, []byte("http")) {
		t.Errorf("page body: want the token in a form, no script and no external reference:\n%s", r.body)
	}
	post := func(v map[string]string) resp {
		return e.do("POST", "/api/auth/reset-password-page", "application/x-www-form-urlencoded", form(v), "Origin", "http://localhost:8080")
	}
	if r := post(map[string]string{"token": tok, "newPassword": "password-2", "confirmPassword": "password-3"}); r.status != 400 || !bytes.Contains(r.body, []byte("differ")) {
		t.Errorf("mismatched passwords: got %d", r.status)
	}
	if r := post(map[string]string{"token": tok, "newPassword": "short", "confirmPassword": "short"}); r.status != 400 {
		t.Errorf("short password: got %d", r.status)
	}
	if r := post(map[string]string{"token": tok, "newPassword": "password-2", "confirmPassword": "password-2"}); r.status != 200 || !bytes.Contains(r.body, []byte(`id="done"`)) {
		t.Fatalf("reset by page: got %d %s", r.status, r.body)
	}
	if r := post(map[string]string{"token": tok, "newPassword": "password-3", "confirmPassword": "password-3"}); r.status != 400 || !bytes.Contains(r.body, []byte(`id="error"`)) {
		t.Errorf("used link on the page: got %d", r.status)
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "alice@example.com", "password": "password-2"}); r.status != 200 {
		t.Errorf("sign-in with the password set on the page: %d", r.status)
	}
	if s := e.getSession(cookie); string(s.body) != "null" {
		t.Errorf("old session after a reset on the page: %s", s.body)
	}
	if r := e.do("GET", "/api/auth/reset-password-page?error=INVALID_TOKEN", "", ""); r.status != 200 || bytes.Contains(r.body, []byte("<form")) {
		t.Errorf("error page: got %d with a form", r.status)
	}
	// Cross-site posts are refused before anything is read.
	if r := e.do("POST", "/api/auth/reset-password-page", "application/x-www-form-urlencoded", "token=x", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); r.status != 403 {
		t.Errorf("cross-site post: got %d", r.status)
	}
}

// TestNoUsableTokenInTheDatabase: the database files hold neither a link
// token nor the link itself, only the token's hash and a sealed payload.
func TestNoUsableTokenInTheDatabase(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	e.signUp("alice@example.com", "password-1")
	tok := e.resetToken(rec, "alice@example.com", "/reset")
	e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "alice@example.com"})
	e.iss.Wait()
	vtok, _ := verifyToken(t, rec, "alice@example.com")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(e.dbPath + suffix)
		if err != nil {
			if suffix != "" && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, secret := range []string{tok, vtok, "reset-password/", "verify-email?token"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %q in plain text", e.dbPath+suffix, secret)
			}
		}
	}
	if n := e.count("outbox"); n != 2 {
		t.Errorf("outbox rows: %d, want 2", n)
	}
}

// FuzzRecoveryEndpoints: no body or query makes a recovery endpoint answer
// 5xx or panic, and every non-redirect answer is JSON or the HTML page.
func FuzzRecoveryEndpoints(f *testing.F) {
	e, _ := newRecoveryEnv(f)
	e.signUp("alice@example.com", "password-1")
	paths := []string{"/api/auth/request-password-reset", "/api/auth/reset-password", "/api/auth/send-verification-email",
		"/api/auth/verify-email", "/api/auth/reset-password/abc", "/api/auth/reset-password-page"}
	f.Add(uint8(0), `{"email":"alice@example.com","redirectTo":"/x"}`, "")
	f.Add(uint8(1), `{"newPassword":"password-2","token":"x"}`, "token=y")
	f.Add(uint8(2), `{"email":"a@b.co","callbackURL":"//evil"}`, "")
	f.Add(uint8(3), "", "token=abc&callbackURL=%2Fx")
	f.Add(uint8(4), "", "callbackURL=http%3A%2F%2Flocalhost%3A5173%2F")
	f.Add(uint8(5), "token=a&newPassword=b&confirmPassword=b", "token=<script>")
	f.Add(uint8(0), `{"email":"alice@example.com","redirectTo":123}`, "")
	f.Add(uint8(1), `{"newPassword":"\u0000\ud800","token":null}`, "")
	f.Fuzz(func(t *testing.T, which uint8, body, query string) {
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return // net/http refuses such a request line before any handler sees it
		}
		path := paths[int(which)%len(paths)]
		method, ct := "POST", "application/json"
		switch {
		case strings.Contains(path, "verify-email"), strings.HasSuffix(path, "/abc"):
			method, ct = "GET", ""
		case strings.HasSuffix(path, "-page"):
			ct = "application/x-www-form-urlencoded"
			if which%2 == 0 {
				method = "GET"
			}
		}
		req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.URL.RawQuery = query
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Origin", "http://localhost:8080")
		res, err := noRedirects.Do(req)
		if err != nil {
			return // a query Go's client refuses to send
		}
		res.Body.Close()
		if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s %s?%s body %q: %d", method, path, query, body, res.StatusCode)
		}
		if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After")
		}
		ctype := res.Header.Get("Content-Type")
		if res.StatusCode != 302 && !strings.HasPrefix(ctype, "application/json") && !strings.HasPrefix(ctype, "text/html") {
			t.Fatalf("%s %s: %d with content type %q", method, path, res.StatusCode, ctype)
		}
	})
}
