package issuer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// jwtClaims decodes a JWT's payload (the signature is the verifier's
// business, tested in proxy).
func jwtClaims(t testing.TB, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT %q has %d parts", jwt, len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// revoked reads the revocations after id as "kind:subject" strings, and
// the last id.
func (e *env) revoked(after int64) ([]string, int64) {
	e.t.Helper()
	recs, err := e.db.RevocationsSince(context.Background(), after, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind.String()+":"+r.Subject)
		after = r.ID
	}
	return out, after
}

func (e *env) jwt(cookie string) string {
	e.t.Helper()
	r := e.getSession(cookie)
	j := r.header.Get("Set-Auth-Jwt")
	if r.status != 200 || j == "" {
		e.t.Fatalf("get-session: got %d %s and no JWT", r.status, r.body)
	}
	return j
}

func (e *env) sessionID(cookie string) string {
	e.t.Helper()
	return e.getSession(cookie).json(e.t)["session"].(map[string]any)["id"].(string)
}

// TestJWTNamesItsSession: sid is the session's id, never its cookie token,
// and iat_ms is the issue time to the millisecond, within iat's second.
func TestJWTNamesItsSession(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("ann@example.com", pw)
	s := e.getSession(cookie)
	sess := s.json(t)["session"].(map[string]any)
	c := jwtClaims(t, s.header.Get("Set-Auth-Jwt"))
	if c["sid"] != sess["id"] || c["sid"] == sess["token"] {
		t.Errorf("sid %v: want the session id %v, never its token", c["sid"], sess["id"])
	}
	iat, iatMS := int64(c["iat"].(float64)), int64(c["iat_ms"].(float64))
	if iatMS/1000 != iat || iatMS != e.clock.Now().UnixMilli() {
		t.Errorf("iat_ms %d with iat %d: want the issue time in ms (%d)", iatMS, iat, e.clock.Now().UnixMilli())
	}
}

// TestIssuedAfterACutoff: a JWT minted in the very millisecond of a
// cutoff that left its session alive is stamped past it; a cutoff further
// ahead (a fast clock elsewhere) is not followed.
func TestIssuedAfterACutoff(t *testing.T) {
	set := revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})
	e := newEnv(t, func(o *issuer.Options) { o.Accounts.Cutoffs = set })
	cookie, user := e.signUp("ann@example.com", pw)
	now := e.clock.Now().UnixMilli()
	for _, tc := range []struct {
		cut, want int64
	}{{now, now + 1}, {now + 500, now + 501}, {now + 5000, now}} {
		set.Add(revocation.Entry{Kind: revocation.KindUser, Key: revocation.UserKey(user["id"].(string)), At: tc.cut})
		c := jwtClaims(t, e.jwt(cookie))
		if got := int64(c["iat_ms"].(float64)); got != tc.want {
			t.Errorf("cutoff %+dms: got iat_ms %+dms, want %+dms", tc.cut-now, got-now, tc.want-now)
		}
	}
}

func TestSignOutRevokesItsSession(t *testing.T) {
	for _, keep := range []bool{false, true} {
		e := newEnv(t, func(o *issuer.Options) { o.Accounts.KeepJWTsOnSignOut = keep })
		cookie, _ := e.signUp("ann@example.com", pw)
		sid := e.sessionID(cookie)
		if r := e.postJSON("/api/auth/sign-out", map[string]any{}, "Cookie", cookie, "Origin", testBase); r.status != 200 {
			t.Fatalf("sign-out: got %d %s", r.status, r.body)
		}
		got, _ := e.revoked(0)
		want := []string{"session:" + sid}
		if keep {
			want = nil
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("KeepJWTsOnSignOut=%v: got revocations %q, want %q", keep, got, want)
		}
	}
}

func TestListAndRevokeSessions(t *testing.T) {
	e := newEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	signIn := func(email string) string {
		r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": email, "password": pw})
		c := r.cookie("auth.session_token")
		return c.Name + "=" + c.Value
	}
	b, c := signIn("ann@example.com"), signIn("ann@example.com")
	bob, _ := e.signUp("bob@example.com", pw)

	r := e.do(http.MethodGet, "/api/auth/list-sessions", "", "", "Cookie", a)
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil || len(list) != 3 {
		t.Fatalf("list-sessions: got %d %s, want ann's three sessions", r.status, r.body)
	}
	for _, s := range list {
		for _, k := range []string{"id", "token", "userId", "expiresAt", "createdAt", "updatedAt", "ipAddress", "userAgent"} {
			if _, ok := s[k]; !ok {
				t.Errorf("session %v has no %s", s, k)
			}
		}
	}
	if r := e.do(http.MethodGet, "/api/auth/list-sessions", "", ""); r.status != 401 || r.code(t) != "UNAUTHORIZED" {
		t.Errorf("list-sessions without a session: got %d %s, want 401 UNAUTHORIZED", r.status, r.body)
	}

	// revoke-session: another user's token changes nothing and answers the
	// same; one's own ends it and revokes its JWTs.
	tokenOf := func(cookie string) string {
		return e.getSession(cookie).json(t)["session"].(map[string]any)["token"].(string)
	}
	bobToken, bSID := tokenOf(bob), e.sessionID(b)
	for _, body := range []map[string]any{{"token": bobToken}, {"token": tokenOf(b)}} {
		if r := e.postJSON("/api/auth/revoke-session", body, "Cookie", a, "Origin", testBase); r.status != 200 || string(r.body) != `{"status":true}` {
			t.Fatalf("revoke-session: got %d %s", r.status, r.body)
		}
	}
	if e.getSession(bob).status != 200 || string(e.getSession(bob).body) == "null" {
		t.Error("revoke-session with another user's token ended it")
	}
	if string(e.getSession(b).body) != "null" {
		t.Error("revoke-session left the session")
	}
	got, after := e.revoked(0)
	if strings.Join(got, ",") != "session:"+bSID {
		t.Errorf("revoke-session: got revocations %q, want session:%s", got, bSID)
	}
	if r := e.postJSON("/api/auth/revoke-session", map[string]any{}, "Cookie", a, "Origin", testBase); r.status != 400 || r.code(t) != "VALIDATION_ERROR" {
		t.Errorf("revoke-session without a token: got %d %s, want 400 VALIDATION_ERROR", r.status, r.body)
	}

	// revoke-other-sessions: c goes, a stays, each session revoked alone.
	cSID := e.sessionID(c)
	if r := e.postJSON("/api/auth/revoke-other-sessions", map[string]any{}, "Cookie", a, "Origin", testBase); r.status != 200 {
		t.Fatalf("revoke-other-sessions: got %d %s", r.status, r.body)
	}
	if string(e.getSession(c).body) != "null" || string(e.getSession(a).body) == "null" {
		t.Error("revoke-other-sessions: want c ended and a alive")
	}
	if got, after = e.revoked(after); strings.Join(got, ",") != "session:"+cSID {
		t.Errorf("revoke-other-sessions: got revocations %q, want session:%s", got, cSID)
	}

	// revoke-sessions: everything, the caller's too, as one cutoff, and
	// each session it ended (a get-session racing it names one of them).
	aSID := e.sessionID(a)
	r = e.postJSON("/api/auth/revoke-sessions", map[string]any{}, "Cookie", a, "Origin", testBase)
	if r.status != 200 || r.cookie("auth.session_token") == nil || r.cookie("auth.session_token").MaxAge >= 0 {
		t.Fatalf("revoke-sessions: got %d %s, want 200 expiring the cookie", r.status, r.body)
	}
	if string(e.getSession(a).body) != "null" {
		t.Error("revoke-sessions left the caller's session")
	}
	annID := list[0]["userId"].(string)
	if got, _ = e.revoked(after); strings.Join(got, ",") != "session:"+aSID+",user:"+annID {
		t.Errorf("revoke-sessions: got revocations %q, want session:%s,user:%s", got, aSID, annID)
	}
}

// TestListSessionsWantsAFreshSession: as Better Auth's freshAge (a day).
func TestListSessionsWantsAFreshSession(t *testing.T) {
	e := newEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	e.clock.Add(25 * time.Hour)
	if r := e.do(http.MethodGet, "/api/auth/list-sessions", "", "", "Cookie", a); r.status != 403 || r.code(t) != "SESSION_NOT_FRESH" {
		t.Errorf("list-sessions from a day-old session: got %d %s, want 403 SESSION_NOT_FRESH", r.status, r.body)
	}
}

func TestUpdateUser(t *testing.T) {
	e := newEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	for _, tc := range []struct {
		name     string
		body     string
		status   int
		code     string
		wantName string
		wantImg  any
	}{
		{"name and image", `{"name":"Annie","image":"https://example.com/a.png"}`, 200, "", "Annie", "https://example.com/a.png"},
		{"image cleared", `{"image":null}`, 200, "", "Annie", nil},
		{"nothing", `{}`, 400, "NO_FIELDS_TO_UPDATE", "Annie", nil},
		{"unknown field only", `{"role":"admin"}`, 400, "NO_FIELDS_TO_UPDATE", "Annie", nil},
		{"email", `{"email":"x@example.com"}`, 400, "EMAIL_CAN_NOT_BE_UPDATED", "Annie", nil},
		{"name not a string", `{"name":5}`, 400, "VALIDATION_ERROR", "Annie", nil},
		{"name too long", `{"name":"` + strings.Repeat("n", 300) + `"}`, 400, "VALIDATION_ERROR", "Annie", nil},
		{"not an object", `[1]`, 400, "VALIDATION_ERROR", "Annie", nil},
	} {
		r := e.do(http.MethodPost, "/api/auth/update-user", "application/json", tc.body, "Cookie", a, "Origin", testBase)
		if r.status != tc.status || (tc.code != "" && r.code(t) != tc.code) {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
		u := e.getSession(a).json(t)["user"].(map[string]any)
		if u["name"] != tc.wantName || u["image"] != tc.wantImg {
			t.Errorf("%s: user is now %v / %v, want %v / %v", tc.name, u["name"], u["image"], tc.wantName, tc.wantImg)
		}
	}
	if r := e.postJSON("/api/auth/update-user", map[string]any{"name": "X"}); r.status != 401 {
		t.Errorf("update-user without a session: got %d, want 401", r.status)
	}
}

func TestChangeEmail(t *testing.T) {
	e, rec := newRecoveryEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	e.signUp("bob@example.com", pw)
	post := func(body map[string]any) resp {
		return e.postJSON("/api/auth/change-email", body, "Cookie", a, "Origin", testBase)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"not an address", map[string]any{"newEmail": "nope"}, 400, "VALIDATION_ERROR"},
		{"the same", map[string]any{"newEmail": "ANN@example.com"}, 400, "EMAIL_IS_THE_SAME"},
		{"untrusted callback", map[string]any{"newEmail": "new@example.com", "callbackURL": "https://evil.example.net/"}, 403, "INVALID_CALLBACK_URL"},
	} {
		if r := post(tc.body); r.status != tc.status || r.code(t) != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	// Another account's address: the same answer, nothing changes, no mail.
	if r := post(map[string]any{"newEmail": "bob@example.com"}); r.status != 200 || string(r.body) != `{"status":true}` {
		t.Errorf("taken address: got %d %s, want 200", r.status, r.body)
	}
	e.iss.Wait()
	if n := rec.count(mail.EmailVerification, "bob@example.com"); n != 0 {
		t.Errorf("taken address: %d messages to it, want none", n)
	}
	// Unverified: nothing changes until the link mailed to the new address
	// is followed either (issue 30: an address applied at once told a
	// free one from a taken one, and moved an account nobody proved onto
	// it); the link moves and verifies.
	if r := post(map[string]any{"newEmail": "Ann.New@example.com"}); r.status != 200 || string(r.body) != `{"status":true}` {
		t.Fatalf("change-email, unverified: got %d %s", r.status, r.body)
	}
	e.iss.Wait()
	u := e.getSession(a).json(t)["user"].(map[string]any)
	if u["email"] != "ann@example.com" || u["emailVerified"] != false {
		t.Errorf("unverified change before the link: user is %v, want unchanged", u)
	}
	m := rec.last(t, mail.EmailVerification, "ann.new@example.com")
	e.follow(t, m.URL)
	if u := e.getSession(a).json(t)["user"].(map[string]any); u["email"] != "ann.new@example.com" || u["emailVerified"] != true {
		t.Fatalf("change link: user is %v, want ann.new@example.com verified", u)
	}
	// Verified: nothing changes until the link mailed to the new address
	// is followed.
	if r := post(map[string]any{"newEmail": "ann.third@example.com", "callbackURL": "/settings"}); r.status != 200 {
		t.Fatalf("change-email, verified: got %d %s", r.status, r.body)
	}
	e.iss.Wait()
	if u := e.getSession(a).json(t)["user"].(map[string]any); u["email"] != "ann.new@example.com" {
		t.Errorf("a verified address changed before the link was followed: %v", u)
	}
	m = rec.last(t, mail.EmailVerification, "ann.third@example.com")
	if !strings.Contains(m.URL, "callbackURL=%2Fsettings") {
		t.Errorf("link %s: want callbackURL /settings", m.URL)
	}
	e.follow(t, m.URL)
	if u := e.getSession(a).json(t)["user"].(map[string]any); u["email"] != "ann.third@example.com" || u["emailVerified"] != true {
		t.Errorf("after the change link: user is %v, want ann.third@example.com verified", u)
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann.third@example.com", "password": pw}); r.status != 200 {
		t.Errorf("sign-in with the new address: got %d", r.status)
	}
}

// follow opens a mailed verification link (without following redirects).
func (e *env) follow(t *testing.T, link string) resp {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodGet, u.RequestURI(), "", "")
	if r.status != 200 && r.status != 302 {
		t.Fatalf("link %s: got %d %s", link, r.status, r.body)
	}
	if loc := r.header.Get("Location"); strings.Contains(loc, "error=") {
		t.Fatalf("link %s: redirected to %s", link, loc)
	}
	return r
}

func TestChangeEmailVerifiedWithoutMail(t *testing.T) {
	e := newEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	e.verify(t, "ann@example.com")
	if r := e.postJSON("/api/auth/change-email", map[string]any{"newEmail": "new@example.com"}, "Cookie", a, "Origin", testBase); r.status != 400 || r.code(t) != "VERIFICATION_EMAIL_NOT_ENABLED" {
		t.Errorf("verified address, mail off: got %d %s, want 400 VERIFICATION_EMAIL_NOT_ENABLED", r.status, r.body)
	}
}

// verify marks email verified through the store, as a followed link does.
func (e *env) verify(t *testing.T, email string) {
	t.Helper()
	u, _, err := e.db.CredentialByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	tok := issuer.RecoveryToken{Kind: mail.EmailVerification, UserID: u.ID, Email: email, ExpiresAt: e.clock.Now().Add(time.Hour), CreatedAt: e.clock.Now()}
	tok.Hash[0] = 1
	if err := e.db.IssueRecoveryToken(context.Background(), tok, mail.Queued{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.db.VerifyEmail(context.Background(), tok.Hash, e.clock.Now(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteUser(t *testing.T) {
	off := newEnv(t)
	a, _ := off.signUp("ann@example.com", pw)
	if r := off.postJSON("/api/auth/delete-user", map[string]any{"password": pw}, "Cookie", a, "Origin", testBase); r.status != 404 || r.code(t) != "NOT_FOUND" {
		t.Errorf("delete-user, not allowed: got %d %s, want 404 NOT_FOUND", r.status, r.body)
	}

	e := newEnv(t, func(o *issuer.Options) { o.Accounts.AllowDeleteUser = true })
	a, user := e.signUp("ann@example.com", pw)
	b, _ := e.signUp("bob@example.com", pw)
	for _, tc := range []struct {
		name   string
		cookie string
		body   map[string]any
		status int
		code   string
	}{
		{"no session", "", map[string]any{"password": pw}, 401, "UNAUTHORIZED"},
		{"wrong password", a, map[string]any{"password": "wrong-password-1"}, 400, "INVALID_PASSWORD"},
		{"a deletion token", a, map[string]any{"token": "abc"}, 404, "INVALID_TOKEN"},
	} {
		var hdr []string
		if tc.cookie != "" {
			hdr = []string{"Cookie", tc.cookie, "Origin", testBase}
		}
		if r := e.postJSON("/api/auth/delete-user", tc.body, hdr...); r.status != tc.status || r.code(t) != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	r := e.postJSON("/api/auth/delete-user", map[string]any{"password": pw}, "Cookie", a, "Origin", testBase)
	if r.status != 200 || string(r.body) != `{"success":true,"message":"User deleted"}` {
		t.Fatalf("delete-user: got %d %s", r.status, r.body)
	}
	if got, _ := e.revoked(0); len(got) != 2 || !strings.HasPrefix(got[0], "session:") || got[1] != "user:"+user["id"].(string) {
		t.Errorf("delete-user: got revocations %q, want its session's and the user's", got)
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": pw}); r.status != 401 {
		t.Errorf("sign-in after delete-user: got %d, want 401", r.status)
	}
	// Without a password only from a session under a day old.
	e.clock.Add(25 * time.Hour)
	if r := e.postJSON("/api/auth/delete-user", map[string]any{}, "Cookie", b, "Origin", testBase); r.status != 400 || r.code(t) != "SESSION_EXPIRED" {
		t.Errorf("delete-user without password from an old session: got %d %s, want 400 SESSION_EXPIRED", r.status, r.body)
	}
	fresh := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "bob@example.com", "password": pw}).cookie("auth.session_token")
	if r := e.postJSON("/api/auth/delete-user", map[string]any{}, "Cookie", fresh.Name+"="+fresh.Value, "Origin", testBase); r.status != 200 {
		t.Errorf("delete-user without password from a fresh session: got %d %s", r.status, r.body)
	}
}

func TestBannedUser(t *testing.T) {
	e := newEnv(t)
	a, _ := e.signUp("ann@example.com", pw)
	now := e.clock.Now()
	if _, _, err := e.db.BanUserByEmail(context.Background(), "ann@example.com", "spam", now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if string(e.getSession(a).body) != "null" {
		t.Error("a banned user's session still answers get-session")
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": "wrong-password-1"}); r.status != 401 {
		t.Errorf("banned user, wrong password: got %d %s, want 401 (a ban is no answer to a guess)", r.status, r.body)
	}
	r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": pw})
	if r.status != 403 || r.code(t) != "BANNED_USER" || r.cookie("auth.session_token") != nil {
		t.Errorf("banned user, right password: got %d %s, want 403 BANNED_USER and no cookie", r.status, r.body)
	}
	// The ban ends by itself.
	e.clock.Add(time.Hour)
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": pw}); r.status != 200 {
		t.Errorf("after the ban's end: got %d %s, want 200", r.status, r.body)
	}
}

func TestChangePasswordRevokes(t *testing.T) {
	e := newEnv(t)
	a, user := e.signUp("ann@example.com", pw)
	if r := e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": pw, "newPassword": "brand-new-password"}, "Cookie", a, "Origin", testBase); r.status != 200 {
		t.Fatal(r.status)
	}
	if got, _ := e.revoked(0); got != nil {
		t.Errorf("change-password without revokeOtherSessions: got revocations %q, want none", got)
	}
	if r := e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": "brand-new-password", "newPassword": "another-password", "revokeOtherSessions": true}, "Cookie", a, "Origin", testBase); r.status != 200 {
		t.Fatal(r.status)
	}
	if got, _ := e.revoked(0); strings.Join(got, ",") != "user:"+user["id"].(string) {
		t.Errorf("change-password with revokeOtherSessions: got revocations %q, want the user's", got)
	}
}

// TestBannedUserVerificationLink: with sign_in_after_verification, a
// banned user's verification link verifies the address and signs nobody
// in.
func TestBannedUserVerificationLink(t *testing.T) {
	e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.SignInAfterVerification = true })
	a, _ := e.signUp("ann@example.com", pw)
	if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "ann@example.com"}, "Cookie", a, "Origin", testBase); r.status != 200 {
		t.Fatalf("send-verification-email: got %d %s", r.status, r.body)
	}
	tok, _ := verifyToken(t, rec, "ann@example.com")
	now := e.clock.Now()
	if _, _, err := e.db.BanUserByEmail(context.Background(), "ann@example.com", "spam", time.Time{}, now); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/auth/verify-email?token="+tok, "", "")
	if r.status != 200 || r.cookie("auth.session_token") != nil {
		t.Errorf("banned user's link: got %d %s cookie %v, want 200 and no session", r.status, r.body, r.cookie("auth.session_token"))
	}
	if u, err := e.db.UserByEmail(context.Background(), "ann@example.com"); err != nil || !u.EmailVerified {
		t.Errorf("got %+v %v, want the address verified", u, err)
	}
}

// TestAccountEndpointsNeedOrigin: as every cookie-bearing POST in Better
// Auth, the session and account endpoints refuse one that does not say it
// comes from a trusted origin, before they act.
func TestAccountEndpointsNeedOrigin(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.Accounts.AllowDeleteUser = true })
	a, _ := e.signUp("ann@example.com", pw)
	for _, path := range []string{"/revoke-session", "/revoke-sessions", "/revoke-other-sessions", "/update-user", "/change-email", "/delete-user"} {
		body := map[string]any{"token": "x", "name": "X", "newEmail": "new@example.com", "password": pw}
		if r := e.postJSON("/api/auth"+path, body, "Cookie", a); r.status != 403 || r.code(t) != "MISSING_OR_NULL_ORIGIN" {
			t.Errorf("%s without Origin: got %d %s, want 403 MISSING_OR_NULL_ORIGIN", path, r.status, r.body)
		}
		if r := e.postJSON("/api/auth"+path, body, "Cookie", a, "Origin", "https://evil.example"); r.status != 403 {
			t.Errorf("%s from another origin: got %d %s, want 403", path, r.status, r.body)
		}
	}
	if r := e.getSession(a); r.status != 200 || string(r.body) == "null" {
		t.Errorf("after the refusals: got %d %s, want the session alive", r.status, r.body)
	}
}

// pausingStore pauses get-session's session read, after it has read, until
// release is closed: the window in which a revocation can commit between
// the read and the signing.
type pausingStore struct {
	*sqlstore.DB
	read    chan struct{} // closed once the session was read
	release chan struct{}
}

func (p *pausingStore) SessionByToken(ctx context.Context, token string) (issuer.Session, issuer.User, error) {
	s, u, err := p.DB.SessionByToken(ctx, token)
	if p.read != nil {
		close(p.read)
		p.read = nil
		<-p.release
	}
	return s, u, err
}

// TestRevocationDuringGetSession: a get-session that read its session just
// before a ban committed signs a JWT after the ban's cutoff instant; the
// session it names no longer exists, and its JWT must be refused all the
// same (a thief polling get-session with a stolen cookie would otherwise
// keep one through any ban, revoke-sessions or password reset).
func TestRevocationDuringGetSession(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signUp("ann@example.com", pw)
	ps := &pausingStore{DB: e.db, read: make(chan struct{}), release: make(chan struct{})}
	e.opts.Store = ps
	iss, err := issuer.New(context.Background(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss)
	t.Cleanup(srv.Close)
	e.srv = srv
	read := ps.read
	got := make(chan resp, 1)
	go func() { got <- e.getSession(cookie) }()
	<-read
	if _, n, err := e.db.BanUserByEmail(context.Background(), "ann@example.com", "test", time.Time{}, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("ban: ended %d sessions, %v", n, err)
	}
	e.clock.Add(time.Second) // the signing comes after the cutoff's instant
	close(ps.release)
	r := <-got
	jwt := r.header.Get("Set-Auth-Jwt")
	if r.status != 200 || jwt == "" {
		t.Fatalf("get-session after its session was read: got %d %s, want 200 with a JWT (the race this test is about)", r.status, r.body)
	}
	set := revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})
	recs, err := e.db.RevocationsSince(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		set.Add(rec.Entry())
	}
	c := jwtClaims(t, jwt)
	tok := revocation.TokenOf(c["sid"].(string), c["sub"].(string), time.UnixMilli(int64(c["iat_ms"].(float64))))
	if !set.Revoked(tok) {
		t.Errorf("a JWT minted from a session the ban ended (iat_ms after the cutoff) passes the revocation set; revocations written: %v", recs)
	}
}
