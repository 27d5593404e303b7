package issuer_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// TestSocialSignInOIDC: a first sign-in at a real OpenID provider creates
// the user, its account and a session, lands on newUserCallbackURL, and
// get-session then hands out the JWT as after a password sign-in; a second
// sign-in finds the same user and lands on callbackURL.
func TestSocialSignInOIDC(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	r := b.flow("corp", oidctest.Alice, nil)
	if loc, errCode := location(t, r); loc != "/welcome" || errCode != "" {
		t.Fatalf("first sign-in: got Location %q, want /welcome", loc)
	}
	if c := r.cookie("auth.session_token"); c == nil || c.MaxAge <= 0 {
		t.Errorf("got cookies %v, want a persistent session cookie", r.header.Values("Set-Cookie"))
	}
	if c := r.cookie("auth.state"); c == nil || c.MaxAge >= 0 {
		t.Errorf("got state cookie %v, want it expired", c)
	}
	if b.jwt() == "" {
		t.Fatal("no JWT")
	}
	s := b.send(http.MethodGet, testBase+"/api/auth/get-session", "", "").json(t)
	user := s["user"].(map[string]any)
	if user["email"] != "alice@example.com" || user["emailVerified"] != true || user["name"] != "Alice Example" {
		t.Errorf("got user %v, want alice@example.com, verified, Alice Example (from userinfo)", user)
	}
	if got := se.counts(); got != [3]int{1, 1, 1} {
		t.Errorf("got user/account/session rows %v, want 1 each", got)
	}
	// The provider's tokens are stored sealed: no JWT in the clear.
	var idTok, access []byte
	if err := se.rawDB(t).QueryRow(`SELECT id_token, access_token FROM account WHERE provider_id = 'corp'`).Scan(&idTok, &access); err != nil {
		t.Fatal(err)
	}
	if len(idTok) == 0 || len(access) == 0 || bytes.Contains(idTok, []byte("eyJ")) {
		t.Errorf("got id_token %q, want sealed bytes", idTok)
	}

	b2 := se.browser(t)
	if loc, _ := location(t, b2.flow("corp", oidctest.Alice, nil)); loc != "/dashboard" {
		t.Errorf("second sign-in: got Location %q, want /dashboard", loc)
	}
	if got := se.counts(); got != [3]int{1, 1, 2} {
		t.Errorf("got rows %v, want the same user and account, a second session", got)
	}
}

// TestSocialFlowDefaults: without callback URLs a flow ends at the base
// URL's origin; disableRedirect answers redirect:false without Location.
func TestSocialFlowDefaults(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	r := b.post("/api/auth/sign-in/social", map[string]any{"provider": "corp", "disableRedirect": true})
	m := r.json(t)
	if r.status != 200 || m["redirect"] != false || r.header.Get("Location") != "" || !strings.Contains(m["url"].(string), "code_challenge_method=S256") {
		t.Fatalf("got %d %s Location %q, want 200 redirect:false, no Location, a PKCE S256 URL", r.status, r.body, r.header.Get("Location"))
	}
	for _, p := range []string{"nonce=", "state=", "redirect_uri=http%3A%2F%2Flocalhost%3A8080%2Fapi%2Fauth%2Fcallback%2Fcorp", "scope=openid+email+profile"} {
		if !strings.Contains(m["url"].(string), p) {
			t.Errorf("got URL %s, want %s in it", m["url"], p)
		}
	}
	if loc, _ := location(t, b.callback(b.login(m["url"].(string), oidctest.Alice))); loc != testBase {
		t.Errorf("got Location %q, want the base URL's origin", loc)
	}
}

// TestSocialFormPost: a form_post callback is bounced to GET with the same
// parameters, whatever the page's origin; the GET finishes the flow.
func TestSocialFormPost(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	cb := b.login(b.start(map[string]any{"provider": "corp", "callbackURL": "/dashboard"}), oidctest.Alice)
	path, query, _ := strings.Cut(cb, "?")
	r := b.send(http.MethodPost, path, "application/x-www-form-urlencoded", query, "Origin", se.op.Issuer, "Sec-Fetch-Site", "cross-site")
	loc, _ := location(t, r)
	if !strings.HasPrefix(loc, testBase+"/api/auth/callback/corp?") || !strings.Contains(loc, "code=") {
		t.Fatalf("got Location %q, want the GET callback with the code", loc)
	}
	if got := se.counts(); got != [3]int{0, 0, 0} {
		t.Errorf("the POST wrote rows %v, want none", got)
	}
	if loc, _ := location(t, b.callback(loc)); loc != "/dashboard" {
		t.Errorf("got Location %q, want /dashboard", loc)
	}
}

// TestSocialGitHub: the email is GitHub's primary one with its verified
// flag from /user/emails, not the public profile email; the account id
// is the numeric id.
func TestSocialGitHub(t *testing.T) {
	se := newSocialEnv(t, nil)
	se.si.GitHub = oidctest.GitHubUser{ID: 777, Login: "bob", PublicEmail: "bob-public@example.com", Emails: []oidctest.GitHubEmail{
		{Email: "bob-public@example.com", Verified: false}, {Email: "Bob@Example.com", Primary: true, Verified: true}}}
	b := se.browser(t)
	if loc, _ := location(t, b.flow("github", oidctest.User{}, nil)); loc != "/welcome" {
		t.Fatalf("got Location %q, want /welcome", loc)
	}
	u := b.send(http.MethodGet, testBase+"/api/auth/get-session", "", "").json(t)["user"].(map[string]any)
	if u["email"] != "bob@example.com" || u["emailVerified"] != true || u["name"] != "bob" {
		t.Errorf("got %v, want bob@example.com verified, named by login", u)
	}
	accts := b.send(http.MethodGet, testBase+"/api/auth/list-accounts", "", "")
	if !strings.Contains(string(accts.body), `"accountId":"777","providerId":"github"`) || !strings.Contains(string(accts.body), `"scopes":["read:user","user:email"]`) {
		t.Errorf("list-accounts: got %s", accts.body)
	}
}

// TestSocialIDToken: sign-in/social with an id token the client holds
// verifies it and signs in without a redirect; GitHub has none.
func TestSocialIDToken(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	r := b.post("/api/auth/sign-in/social", map[string]any{"provider": "google", "idToken": map[string]any{"token": se.si.IDTokenFor("n-1"), "nonce": "n-1"}})
	if r.status != 200 || r.json(t)["redirect"] != false || r.cookie("auth.session_token") == nil {
		t.Fatalf("got %d %s, want 200 redirect:false and a session", r.status, r.body)
	}
	for _, tc := range []struct {
		name, provider, token, nonce string
		status                       int
		code                         string
	}{
		{"nonce differs", "google", se.si.IDTokenFor("n-1"), "n-2", 401, "INVALID_TOKEN"},
		{"not a token", "google", "eyJhbGciOiJub25lIn0.e30.", "", 401, "INVALID_TOKEN"},
		{"github has none", "github", "x.y.z", "", 404, "ID_TOKEN_NOT_SUPPORTED"},
		{"unknown provider", "nope", "x.y.z", "", 404, "PROVIDER_NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := se.counts()
			r := se.browser(t).post("/api/auth/sign-in/social", map[string]any{"provider": tc.provider, "idToken": map[string]any{"token": tc.token, "nonce": tc.nonce}})
			if r.status != tc.status || r.code(t) != tc.code {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if se.counts() != before {
				t.Errorf("rows changed: %v -> %v", before, se.counts())
			}
		})
	}
}

// TestSocialLinking: a provider identity joins an existing user with the
// same email only when both the provider and the local user have the
// email verified (Better Auth's takeover fix), and link_by_email allows it.
func TestSocialLinking(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		localVerified, idpVerified bool
		linkByEmail                bool
		want                       string // the error code, or "" for linked
	}{
		{"both verified", true, true, true, ""},
		{"local unverified (pre-registration takeover)", false, true, true, "account_not_linked"},
		{"provider unverified", true, false, true, "email_not_verified"},
		{"link_by_email false", true, true, false, "account_not_linked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			se := newSocialEnv(t, func(c map[string]*idp.Config) { c["google"].LinkByEmail = tc.linkByEmail })
			se.signUp("alice@example.com", "correct horse battery")
			if tc.localVerified {
				if _, err := se.rawDB(t).Exec(`UPDATE "user" SET email_verified = 1`); err != nil {
					t.Fatal(err)
				}
			}
			se.si.Google.EmailVerified = tc.idpVerified
			before := se.counts()
			loc, code := location(t, se.browser(t).flow("google", oidctest.User{}, nil))
			if code != tc.want {
				t.Fatalf("got Location %q, want error %q", loc, tc.want)
			}
			if tc.want != "" {
				if se.counts() != before {
					t.Errorf("rows changed on refusal: %v -> %v", before, se.counts())
				}
				return
			}
			if loc != "/dashboard" || se.count("account") != 2 || se.count("user") != 1 {
				t.Errorf("got %q and %d accounts, want /dashboard (not /welcome) and the credential plus google", loc, se.count("account"))
			}
		})
	}
}

// TestSocialAccounts: list-accounts, get-access-token (refreshed once the
// access token expires) and unlink-account, which never removes the last
// way to sign in.
func TestSocialAccounts(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	location(t, b.flow("google", oidctest.User{}, nil))
	var list []map[string]any
	r := b.send(http.MethodGet, testBase+"/api/auth/list-accounts", "", "")
	if err := jsonUnmarshal(r.body, &list); err != nil || len(list) != 1 {
		t.Fatalf("list-accounts: got %s", r.body)
	}
	id := list[0]["id"].(string)
	if strings.Contains(string(r.body), "ya29.") {
		t.Errorf("list-accounts shows a token: %s", r.body)
	}
	r = b.post("/api/auth/get-access-token", map[string]any{"accountId": id})
	first, _ := r.json(t)["accessToken"].(string)
	if r.status != 200 || !strings.HasPrefix(first, "ya29.") || r.json(t)["idToken"] == nil {
		t.Fatalf("get-access-token: got %d %s", r.status, r.body)
	}
	se.clock.Add(time.Hour) // past expires_in
	r = b.post("/api/auth/get-access-token", map[string]any{"accountId": id})
	if second, _ := r.json(t)["accessToken"].(string); r.status != 200 || second == first || !strings.HasPrefix(second, "ya29.") {
		t.Errorf("after expiry: got %d %s, want a refreshed token", r.status, r.body)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"1.6 body", map[string]any{"providerId": "google"}, 400, "VALIDATION_ERROR"},
		{"unknown account", map[string]any{"accountId": "nope"}, 400, "ACCOUNT_NOT_FOUND"},
	} {
		if r := b.post("/api/auth/get-access-token", tc.body); r.status != tc.status || r.code(t) != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	if r := b.post("/api/auth/unlink-account", map[string]any{"accountId": id}); r.status != 400 || r.code(t) != "FAILED_TO_UNLINK_LAST_ACCOUNT" {
		t.Errorf("unlink last: got %d %s", r.status, r.body)
	}
	// Link GitHub (same verified email), then Google can go.
	r = b.post("/api/auth/link-social", map[string]any{"provider": "github", "callbackURL": "/settings", "errorCallbackURL": "/settings-error"})
	if r.status != 200 {
		t.Fatalf("link-social: got %d %s", r.status, r.body)
	}
	if loc, _ := location(t, b.callback(b.login(r.json(t)["url"].(string), oidctest.User{}))); loc != "/settings" {
		t.Fatalf("link callback: got %q, want /settings", loc)
	}
	if r := b.post("/api/auth/unlink-account", map[string]any{"accountId": id}); r.status != 200 || string(r.body) != `{"status":true}` {
		t.Errorf("unlink: got %d %s", r.status, r.body)
	}
	if se.count("account") != 1 || se.count("user") != 1 {
		t.Errorf("got %d accounts %d users, want github's only", se.count("account"), se.count("user"))
	}
	if r := se.browser(t).send(http.MethodGet, testBase+"/api/auth/list-accounts", "", ""); r.status != 401 {
		t.Errorf("without a session: got %d, want 401", r.status)
	}
}

func jsonUnmarshal(b []byte, v any) error { return jsonDecode(bytes.NewReader(b), v) }

// TestSocialBanned: a banned user signing in through a provider, whether
// the provider account is known or would be linked by email, lands on the
// error page with error=banned (Better Auth's admin plugin), and nothing
// is written: no session, no account.
func TestSocialBanned(t *testing.T) {
	ban := func(se *socialEnv) {
		t.Helper()
		now := se.clock.Now()
		if _, _, err := se.db.BanUserByEmail(context.Background(), "alice@example.com", "spam", time.Time{}, now); err != nil {
			t.Fatal(err)
		}
		se.rebase()
	}
	t.Run("known account", func(t *testing.T) {
		se := newSocialEnv(t, nil)
		if _, errCode := location(t, se.browser(t).flow("corp", oidctest.Alice, nil)); errCode != "" {
			t.Fatalf("first sign-in: error %q", errCode)
		}
		ban(se)
		if _, errCode := location(t, se.browser(t).flow("corp", oidctest.Alice, nil)); errCode != "banned" {
			t.Errorf("banned user: got error %q, want banned", errCode)
		}
		if got := se.counts(); got != *se.baseline {
			t.Errorf("got rows %v, want %v: nothing written", got, *se.baseline)
		}
	})
	t.Run("linked by email", func(t *testing.T) {
		se := newSocialEnv(t, nil)
		se.signUp("alice@example.com", pw)
		if _, err := se.rawDB(t).Exec(`UPDATE "user" SET email_verified = 1`); err != nil {
			t.Fatal(err)
		}
		ban(se)
		if _, errCode := location(t, se.browser(t).flow("corp", oidctest.Alice, nil)); errCode != "banned" {
			t.Errorf("banned user: got error %q, want banned", errCode)
		}
		if got := se.counts(); got != *se.baseline {
			t.Errorf("got rows %v, want %v: no account linked, no session", got, *se.baseline)
		}
	})
}
