package issuer_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/oidctest"
	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
)

// Account integrity (issue 30): no provider link, unverified address or
// change of address takes an account.

// integrityEnv is a socialEnv with mail on, metrics and a log to read.
type integrityEnv struct {
	*socialEnv
	rec *recorder
	reg *prometheus.Registry
	log *syncbuf.Buffer
}

func newIntegrityEnv(t *testing.T, cfg func(map[string]*idp.Config)) *integrityEnv {
	t.Helper()
	box, err := mail.NewBox([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	ie := &integrityEnv{rec: &recorder{box: box}, reg: prometheus.NewRegistry(), log: &syncbuf.Buffer{}}
	ie.socialEnv = newSocialEnv(t, cfg, func(o *issuer.Options) {
		o.Recovery.Sealer = ie.rec
		o.Registerer = ie.reg
		o.Logger = slog.New(slog.NewJSONHandler(ie.log, nil))
	})
	return ie
}

// signedUp signs a password user up, marks the address verified when
// verified (as a followed link would), and returns a browser signed in
// as it.
func (ie *integrityEnv) signedUp(t *testing.T, email, password string, verified bool) *browser {
	t.Helper()
	ie.signUp(email, password)
	if verified {
		if _, err := ie.rawDB(t).Exec(`UPDATE "user" SET email_verified = 1 WHERE email = ?`, email); err != nil {
			t.Fatal(err)
		}
	}
	b := ie.browser(t)
	b.signIn(email, password)
	return b
}

// link runs a link-social flow at the provider (its stand-in or the OP as
// u) and returns where the callback sends the browser, and its error.
func (b *browser) link(body map[string]any, u oidctest.User) (string, string) {
	b.t.Helper()
	r := b.post("/api/auth/link-social", body)
	if r.status != http.StatusOK {
		b.t.Fatalf("link-social: got %d %s", r.status, r.body)
	}
	return location(b.t, b.callback(b.login(r.json(b.t)["url"].(string), u)))
}

// signIn signs the browser in with a password.
func (b *browser) signIn(email, password string) {
	b.t.Helper()
	if r := b.post("/api/auth/sign-in/email", map[string]any{"email": email, "password": password}); r.status != http.StatusOK {
		b.t.Fatalf("sign-in %s: got %d %s", email, r.status, r.body)
	}
}

// user is get-session's user, or nil without a session.
func (b *browser) user() map[string]any {
	b.t.Helper()
	m, _ := b.send(http.MethodGet, testBase+"/api/auth/get-session", "", "").json(b.t)["user"].(map[string]any)
	return m
}

// open follows a mailed link in the browser.
func (b *browser) open(link string) resp {
	b.t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.send(http.MethodGet, testBase+u.RequestURI(), "", "")
}

const (
	malPW, annPW = "mallory-password-1", "victim-password-1"
	victimAddr   = "victim@corp.test"
)

// TestLinkSocialNeedsVerifiedAddress: link-social, by redirect or with an
// id token, refuses a user whose own address is unverified (403
// EMAIL_NOT_VERIFIED), before anything is stored; a verified user links.
func TestLinkSocialNeedsVerifiedAddress(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-mal", Email: "mallory@evil.test", EmailVerified: true}
	b := ie.signedUp(t, "mallory@evil.test", malPW, false)
	before := ie.counts()
	for _, body := range []map[string]any{
		{"provider": "google", "callbackURL": "/settings"},
		{"provider": "corp", "callbackURL": "/settings"},
		{"provider": "google", "idToken": map[string]any{"token": ie.si.IDTokenFor("n-1"), "nonce": "n-1"}},
	} {
		r := b.post("/api/auth/link-social", body)
		if r.status != http.StatusForbidden || r.code(t) != "EMAIL_NOT_VERIFIED" {
			t.Errorf("link-social %v, unverified: got %d %s, want 403 EMAIL_NOT_VERIFIED", body, r.status, r.body)
		}
		if r.header.Get("Location") != "" || r.cookie("auth.state") != nil {
			t.Errorf("link-social %v, unverified: a flow began (Location %q)", body, r.header.Get("Location"))
		}
	}
	if after := ie.counts(); after != before || ie.count("oauth_state") != 0 {
		t.Errorf("rows changed: %v -> %v, %d flows", before, after, ie.count("oauth_state"))
	}
	// Verified: the same link goes through.
	if _, err := ie.rawDB(t).Exec(`UPDATE "user" SET email_verified = 1`); err != nil {
		t.Fatal(err)
	}
	if loc, code := b.link(map[string]any{"provider": "google", "callbackURL": "/settings"}, oidctest.User{}); code != "" || loc != "/settings" {
		t.Fatalf("link callback, verified: got %q", loc)
	}
	if n := ie.count("account"); n != 2 {
		t.Errorf("accounts: got %d, want the credential and google", n)
	}
}

// TestLinkCallbackNeedsVerifiedAddress: a link flow whose user is not
// verified when the provider answers (a flow stored before this rule, or
// an address that became unverified since) links nothing:
// error=email_not_verified.
func TestLinkCallbackNeedsVerifiedAddress(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-ann", Email: "ann@example.com", EmailVerified: true}
	b := ie.signedUp(t, "ann@example.com", annPW, true)
	r := b.post("/api/auth/link-social", map[string]any{"provider": "google", "callbackURL": "/settings", "errorCallbackURL": "/oops"})
	if r.status != http.StatusOK {
		t.Fatalf("link-social: got %d %s", r.status, r.body)
	}
	if _, err := ie.rawDB(t).Exec(`UPDATE "user" SET email_verified = 0`); err != nil {
		t.Fatal(err)
	}
	if loc, code := location(t, b.callback(b.login(r.json(t)["url"].(string), oidctest.User{}))); code != "email_not_verified" || !strings.HasPrefix(loc, "/oops") {
		t.Errorf("link callback of an unverified user: got %q, want /oops?error=email_not_verified", loc)
	}
	if n := ie.count("account"); n != 1 {
		t.Errorf("accounts: got %d, want only the credential", n)
	}
}

// TestChangeEmailRefusedWithProviderLinked: an account with a provider
// linked cannot move its address (the provider account would follow it,
// and the new address's owner proving it would hand it to whoever linked
// it); nothing is mailed or changed. Unlinked, it can.
func TestChangeEmailRefusedWithProviderLinked(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-ann", Email: "ann@example.com", EmailVerified: true}
	b := ie.signedUp(t, "ann@example.com", annPW, true)
	b.link(map[string]any{"provider": "google"}, oidctest.User{})
	r := b.post("/api/auth/change-email", map[string]any{"newEmail": victimAddr})
	if r.status != http.StatusBadRequest || r.code(t) != "EMAIL_CAN_NOT_BE_UPDATED" {
		t.Errorf("change-email with google linked: got %d %s, want 400 EMAIL_CAN_NOT_BE_UPDATED", r.status, r.body)
	}
	ie.iss.Wait()
	if n := ie.rec.count(mail.EmailVerification, victimAddr); n != 0 {
		t.Errorf("%d messages to the new address, want none", n)
	}
	if u := b.user(); u["email"] != "ann@example.com" {
		t.Errorf("user after the refusal: %v", u)
	}
	// Unlinked: the change goes by mail as usual.
	accts := b.send(http.MethodGet, testBase+"/api/auth/list-accounts", "", "")
	var list []map[string]any
	if err := jsonUnmarshal(accts.body, &list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if a["providerId"] == "google" {
			if r := b.post("/api/auth/unlink-account", map[string]any{"accountId": a["id"]}); r.status != 200 {
				t.Fatalf("unlink: got %d %s", r.status, r.body)
			}
		}
	}
	if r := b.post("/api/auth/change-email", map[string]any{"newEmail": "ann.new@example.com"}); r.status != 200 {
		t.Fatalf("change-email once unlinked: got %d %s", r.status, r.body)
	}
	ie.iss.Wait()
	b.open(ie.rec.last(t, mail.EmailVerification, "ann.new@example.com").URL)
	if u := b.user(); u["email"] != "ann.new@example.com" {
		t.Errorf("after the link: %v", u)
	}
}

// TestPreRegistrationTakeover is issue 30's first sequence, on a store
// where it had already begun (an unverified account with the attacker's
// provider linked, as the previous rules allowed): the victim's reset
// proves the address, which removes the attacker's provider account, so
// the attacker's next provider sign-in lands on a user of her own. Each
// step the new rules refuse is tried on the way.
func TestPreRegistrationTakeover(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-mal", Email: "mallory@evil.test", EmailVerified: true}
	mal := ie.signedUp(t, "mallory@evil.test", malPW, false)

	// 2. link-social with her own provider account: refused now.
	r := mal.post("/api/auth/link-social", map[string]any{"provider": "google"})
	if r.status != http.StatusForbidden {
		t.Fatalf("link-social of an unverified account: got %d %s, want 403", r.status, r.body)
	}
	// The store as the old rules left it: linked all the same.
	db := ie.rawDB(t)
	if _, err := db.Exec(`INSERT INTO account (id, account_id, provider_id, user_id, created_at, updated_at)
		SELECT 'old-link', 'g-mal', 'google', id, 0, 0 FROM "user" WHERE email = 'mallory@evil.test'`); err != nil {
		t.Fatal(err)
	}
	// 3. change-email to the victim's address: refused (a provider is
	// linked); and it would only have mailed the victim anyway.
	if r := mal.post("/api/auth/change-email", map[string]any{"newEmail": victimAddr}); r.status != http.StatusBadRequest {
		t.Fatalf("change-email with a provider linked: got %d %s, want 400", r.status, r.body)
	}
	// The old rules applied it at once: so does the store here.
	if _, err := db.Exec(`UPDATE "user" SET email = 'victim@corp.test' WHERE email = 'mallory@evil.test'`); err != nil {
		t.Fatal(err)
	}
	var victimID string
	if err := db.QueryRow(`SELECT id FROM "user" WHERE email = 'victim@corp.test'`).Scan(&victimID); err != nil {
		t.Fatal(err)
	}

	// 4. The victim's sign-up is refused (the address is taken); she
	// resets by mail, and signs in.
	if r := ie.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Victim", "email": victimAddr, "password": annPW}); r.status != 422 {
		t.Fatalf("victim's sign-up: got %d %s, want 422", r.status, r.body)
	}
	tok := ie.resetToken(ie.rec, victimAddr, "")
	if r := ie.postJSON("/api/auth/reset-password", map[string]any{"newPassword": annPW, "token": tok}); r.status != 200 {
		t.Fatalf("reset: got %d %s", r.status, r.body)
	}
	victim := ie.browser(t)
	victim.signIn(victimAddr, annPW)
	if u := victim.user(); u["id"] != victimID || u["emailVerified"] != true {
		t.Fatalf("victim: got %v", u)
	}
	if u := mal.user(); u != nil {
		t.Errorf("mallory's session survived the reset: %v", u)
	}
	if got := metricSum(t, ie.reg, "authsidecar_provider_accounts_unlinked_total"); got != 1 {
		t.Errorf("unlinked metric: got %v, want 1", got)
	}
	if !strings.Contains(ie.log.String(), `"msg":"provider accounts linked before the address was proven were removed"`) ||
		!strings.Contains(ie.log.String(), `"providers":["google"]`) {
		t.Errorf("no log line for the removed link in:\n%s", ie.log.String())
	}

	// 5. Mallory signs in with her provider again: a user of her own.
	again := ie.browser(t)
	if _, code := location(t, again.flow("google", oidctest.User{}, nil)); code != "" {
		t.Fatalf("mallory's provider sign-in: error %q", code)
	}
	u := again.user()
	if u == nil || u["id"] == victimID || u["email"] != "mallory@evil.test" {
		t.Fatalf("mallory's provider sign-in landed on %v, want a user of her own (victim is %s)", u, victimID)
	}
	if jwtClaims(t, again.jwt())["sub"] == victimID {
		t.Fatal("mallory's JWT names the victim")
	}
}

// TestUnverifiedProviderAddress: by default a provider that does not say
// the address is verified creates no user and links nothing
// (email_not_verified, nothing stored), by redirect or id token, Google,
// GitHub (its primary address unverified, another verified) or OpenID.
func TestUnverifiedProviderAddress(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-squat", Email: victimAddr, EmailVerified: false}
	ie.si.GitHub = oidctest.GitHubUser{ID: 4242, Login: "squat", Emails: []oidctest.GitHubEmail{
		{Email: victimAddr, Primary: true, Verified: false}, {Email: "squat@evil.test", Verified: true}}}
	bob := oidctest.User{ID: "sub-bob", Username: "bob", Password: "bob-password"} // the OP's unverified user
	for _, tc := range []struct {
		name     string
		provider string
		user     oidctest.User
	}{
		{"google", "google", oidctest.User{}},
		{"github primary unverified", "github", oidctest.User{}},
		{"oidc email_verified false", "corp", bob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ie.counts()
			if _, code := location(t, ie.browser(t).flow(tc.provider, tc.user, nil)); code != "email_not_verified" {
				t.Errorf("got error %q, want email_not_verified", code)
			}
			if after := ie.counts(); after != before {
				t.Errorf("rows changed: %v -> %v", before, after)
			}
		})
	}
	before := ie.counts()
	r := ie.browser(t).post("/api/auth/sign-in/social", map[string]any{"provider": "google", "idToken": map[string]any{"token": ie.si.IDTokenFor("n-1"), "nonce": "n-1"}})
	if r.status != http.StatusForbidden || r.code(t) != "EMAIL_NOT_VERIFIED" {
		t.Errorf("id token, unverified: got %d %s, want 403 EMAIL_NOT_VERIFIED", r.status, r.body)
	}
	if after := ie.counts(); after != before {
		t.Errorf("id token: rows changed: %v -> %v", before, after)
	}
}

// TestTrustedUnverifiedAddressReservesNothing is issue 30's second
// sequence with trust_unverified_email on: the squatter's provider user
// is made, its address unclaimed; the owner signs up with a password all
// the same, resets, gets no verification mail on the squatter's behalf,
// and her own verified provider account joins her user, not the
// squatter's.
func TestTrustedUnverifiedAddressReservesNothing(t *testing.T) {
	ie := newIntegrityEnv(t, func(c map[string]*idp.Config) { c["corp"].TrustUnverifiedEmail = true })
	// The OP's bob says his address is not verified: he is the squatter
	// of bob@example.com, whose owner has a verified Google account.
	const addr = "bob@example.com"
	squatter := oidctest.User{ID: "sub-bob", Username: "bob", Password: "bob-password"}
	ie.si.Google = oidctest.GoogleUser{Sub: "g-owner", Email: addr, EmailVerified: true}

	sq := ie.browser(t)
	if loc, code := location(t, sq.flow("corp", squatter, nil)); code != "" || loc != "/welcome" {
		t.Fatalf("squatter's sign-in, trusted: got %q", loc)
	}
	squat := sq.user()
	if squat["email"] != addr || squat["emailVerified"] != false {
		t.Fatalf("squatter: got %v, want the address unverified", squat)
	}
	// The squatter asks for a verification mail: never sent, with a
	// session or without.
	if r := sq.post("/api/auth/send-verification-email", map[string]any{"email": addr}); r.status != http.StatusForbidden || r.code(t) != "EMAIL_NOT_VERIFIABLE" {
		t.Errorf("send-verification-email by the squatter: got %d %s, want 403 EMAIL_NOT_VERIFIABLE", r.status, r.body)
	}
	if r := ie.postJSON("/api/auth/send-verification-email", map[string]any{"email": addr}); r.status != 200 {
		t.Errorf("send-verification-email without a session: got %d %s, want the usual 200", r.status, r.body)
	}
	if r := ie.postJSON("/api/auth/request-password-reset", map[string]any{"email": addr}); r.status != 200 {
		t.Errorf("request-password-reset: got %d %s", r.status, r.body)
	}
	ie.iss.Wait()
	if msgs := ie.rec.all(); len(msgs) != 0 {
		t.Errorf("%d messages sent for an unclaimed address, want none: %+v", len(msgs), msgs)
	}
	// A link-social from the squatter (her address unverified) is refused.
	if r := sq.post("/api/auth/link-social", map[string]any{"provider": "google"}); r.status != http.StatusForbidden {
		t.Errorf("link-social by the squatter: got %d %s, want 403", r.status, r.body)
	}
	// change-email: refused (a provider is linked).
	if r := sq.post("/api/auth/change-email", map[string]any{"newEmail": "elsewhere@corp.test"}); r.status != http.StatusBadRequest {
		t.Errorf("change-email by the squatter: got %d %s, want 400", r.status, r.body)
	}

	// The owner signs up: not blocked.
	r := ie.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Victim", "email": addr, "password": annPW})
	if r.status != 200 {
		t.Fatalf("owner's sign-up: got %d %s, want 200", r.status, r.body)
	}
	ownerID := r.json(t)["user"].(map[string]any)["id"]
	if ownerID == squat["id"] {
		t.Fatal("the owner's sign-up returned the squatter's user")
	}
	// She verifies her address and resets her password: both reach her.
	if r := ie.postJSON("/api/auth/send-verification-email", map[string]any{"email": addr}); r.status != 200 {
		t.Fatal(r.status)
	}
	ie.iss.Wait()
	owner := ie.browser(t)
	owner.open(ie.rec.last(t, mail.EmailVerification, addr).URL)
	tok := ie.resetToken(ie.rec, addr, "")
	if r := ie.postJSON("/api/auth/reset-password", map[string]any{"newPassword": annPW + "-2", "token": tok}); r.status != 200 {
		t.Fatalf("owner's reset: got %d %s", r.status, r.body)
	}
	owner.signIn(addr, annPW+"-2")
	if u := owner.user(); u["id"] != ownerID || u["emailVerified"] != true {
		t.Fatalf("owner: got %v", u)
	}
	// Her own Google account (verified) joins her user, not the squatter's.
	g := ie.browser(t)
	location(t, g.flow("google", oidctest.User{}, nil))
	if u := g.user(); u == nil || u["id"] != ownerID {
		t.Errorf("owner's Google sign-in landed on %v, want %v", u, ownerID)
	}
	// The squatter still signs in, to her own user.
	sq2 := ie.browser(t)
	location(t, sq2.flow("corp", squatter, nil))
	if u := sq2.user(); u == nil || u["id"] != squat["id"] {
		t.Errorf("squatter's sign-in landed on %v, want %v", u, squat["id"])
	}
}

// TestChangeEmailSameAnswerTakenOrFree: an unverified account's
// change-email to a taken address and to a free one answer alike and
// change nothing visible; only the free one is mailed (issue 30, 7).
func TestChangeEmailSameAnswerTakenOrFree(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.signUp("bob@example.com", annPW)
	mal := ie.signedUp(t, "mallory@evil.test", malPW, false)
	taken := mal.post("/api/auth/change-email", map[string]any{"newEmail": "bob@example.com"})
	ie.iss.Wait()
	afterTaken := mal.user()
	free := mal.post("/api/auth/change-email", map[string]any{"newEmail": "free@example.com"})
	ie.iss.Wait()
	afterFree := mal.user()
	if taken.status != free.status || !bytes.Equal(taken.body, free.body) {
		t.Errorf("taken: %d %s; free: %d %s; want the same", taken.status, taken.body, free.status, free.body)
	}
	if afterTaken["email"] != "mallory@evil.test" || afterFree["email"] != "mallory@evil.test" {
		t.Errorf("get-session after: %v / %v, want unchanged both times", afterTaken["email"], afterFree["email"])
	}
	if n := ie.rec.count(mail.EmailVerification, "bob@example.com"); n != 0 {
		t.Errorf("%d messages to the taken address, want none", n)
	}
	if n := ie.rec.count(mail.EmailVerification, "free@example.com"); n != 1 {
		t.Errorf("%d messages to the free address, want 1", n)
	}
}

// metricSum adds up every series of a counter.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestResetGivesAPassword: a user without a password (one who only ever
// signed in with an identity provider) sets one through "Forgot
// password?", as docs/identity-providers.md tells such a user to before
// changing the address; the reset creates the credential, and the
// provider account stays (the address was proven already).
func TestResetGivesAPassword(t *testing.T) {
	ie := newIntegrityEnv(t, nil)
	ie.si.Google = oidctest.GoogleUser{Sub: "g-ann", Email: "ann@example.com", EmailVerified: true}
	g := ie.browser(t)
	location(t, g.flow("google", oidctest.User{}, nil))
	id := g.user()["id"]
	tok := ie.resetToken(ie.rec, "ann@example.com", "")
	if r := ie.postJSON("/api/auth/reset-password", map[string]any{"newPassword": annPW, "token": tok}); r.status != 200 {
		t.Fatalf("reset: got %d %s", r.status, r.body)
	}
	b := ie.browser(t)
	b.signIn("ann@example.com", annPW)
	if u := b.user(); u["id"] != id {
		t.Errorf("password sign-in after the reset: %v, want user %v", u, id)
	}
	if n := ie.count("account"); n != 2 {
		t.Errorf("accounts: got %d, want google's and the new password's", n)
	}
}
