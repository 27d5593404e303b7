package issuer_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/oidctest"
	"github.com/authsidecar/authsidecar/issuer"
)

// socialEnv is an issuer on SQLite with three identity providers: "corp",
// a real OpenID provider (zitadel's example OP, login form and all), and
// "google" and "github", stand-ins that answer as those services document.
type socialEnv struct {
	*env
	op  *oidctest.OP
	si  *oidctest.StandIn
	set *idp.Set
	// baseline, when set, is the row counts a hostile case starts from.
	baseline *[3]int
}

// rebase makes the row counts now the baseline.
func (se *socialEnv) rebase() {
	c := se.counts()
	se.baseline = &c
}

const testBase = "http://localhost:8080"

// newSocialEnv starts it; cfg may change the providers' configs before
// they are built, opts the issuer's.
func newSocialEnv(t testing.TB, cfg func(map[string]*idp.Config), opts ...func(*issuer.Options)) *socialEnv {
	t.Helper()
	se := &socialEnv{}
	se.op = oidctest.StartOP(t, []string{testBase + "/api/auth/callback/corp"}, oidctest.Alice,
		oidctest.User{ID: "sub-bob", Username: "bob", Password: "bob-password", Email: "bob@example.com", EmailVerified: false, First: "Bob"})
	se.si = oidctest.StartStandIn(t)
	cfgs := map[string]*idp.Config{
		"corp": {ID: "corp", Kind: idp.KindOIDC, Issuer: se.op.Issuer, ClientID: se.op.ClientID, ClientSecret: se.op.ClientSecret, SignUp: true, LinkByEmail: true},
		"google": {ID: "google", Kind: idp.KindGoogle, ClientID: se.si.ClientID, ClientSecret: se.si.ClientSecret, SignUp: true, LinkByEmail: true,
			Endpoints: idp.Endpoints{Authorization: se.si.URL + "/o/oauth2/v2/auth", Token: se.si.URL + "/token", Userinfo: se.si.URL + "/v1/userinfo", JWKS: se.si.URL + "/oauth2/v3/certs"}},
		"github": {ID: "github", Kind: idp.KindGitHub, ClientID: se.si.ClientID, ClientSecret: se.si.ClientSecret, SignUp: true, LinkByEmail: true,
			Endpoints: idp.Endpoints{Authorization: se.si.URL + "/login/oauth/authorize", Token: se.si.URL + "/login/oauth/access_token", API: se.si.URL + "/api"}},
	}
	if cfg != nil {
		cfg(cfgs)
	}
	var list []idp.Config
	for _, id := range []string{"corp", "google", "github"} {
		if c := cfgs[id]; c != nil {
			list = append(list, *c)
		}
	}
	clk := &clock{t: time.Now().UTC()}
	set, err := idp.NewSet(list, idp.Options{Timeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	se.set = set
	se.env = newEnvClock(t, clk, append([]func(*issuer.Options){func(o *issuer.Options) {
		o.Providers = set.Providers()
		o.BaseURL = testBase
	}}, opts...)...)
	return se
}

// newEnvClock is newEnv with a given clock (shared with the providers).
func newEnvClock(t testing.TB, clk *clock, mutate ...func(*issuer.Options)) *env {
	t.Helper()
	return newEnv(t, append([]func(*issuer.Options){func(o *issuer.Options) { o.Now = clk.Now }}, mutate...)...).withClock(clk)
}

func (e *env) withClock(c *clock) *env { e.clock = c; return e }

// browser is one browser: its own cookies, redirects shown, not followed.
type browser struct {
	t   testing.TB
	e   *socialEnv
	c   *http.Client
	jar *cookiejar.Jar
}

func (se *socialEnv) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, e: se, jar: jar, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// local maps a URL on testBase to the test server.
func (b *browser) local(u string) string {
	if rest, ok := strings.CutPrefix(u, testBase); ok {
		return b.e.srv.URL + rest
	}
	return u
}

func (b *browser) send(method, u, contentType, body string, hdr ...string) resp {
	b.t.Helper()
	req, err := http.NewRequest(method, b.local(u), strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: data}
}

func (b *browser) post(path string, v any) resp {
	b.t.Helper()
	body, _ := json.Marshal(v)
	return b.send(http.MethodPost, testBase+path, "application/json", string(body), "Origin", testBase)
}

// start begins a flow and returns the authorization URL.
func (b *browser) start(body map[string]any) string {
	b.t.Helper()
	r := b.post("/api/auth/sign-in/social", body)
	if r.status != http.StatusOK {
		b.t.Fatalf("sign-in/social: got %d %s, want 200", r.status, r.body)
	}
	m := r.json(b.t)
	u, _ := m["url"].(string)
	if u == "" || r.header.Get("Location") != u || m["redirect"] != true {
		b.t.Fatalf("sign-in/social: got %s (Location %q), want {url, redirect:true} and the same Location", r.body, r.header.Get("Location"))
	}
	return u
}

// login signs in at the provider and returns its redirect back.
func (b *browser) login(authURL string, u oidctest.User) string {
	b.t.Helper()
	if !strings.HasPrefix(authURL, b.e.op.Issuer) {
		// The stand-ins sign in at once.
		r := b.send(http.MethodGet, authURL, "", "")
		if r.status != http.StatusFound {
			b.t.Fatalf("stand-in authorize: got %d %s", r.status, r.body)
		}
		return r.header.Get("Location")
	}
	cb, err := oidctest.Login(context.Background(), authURL, u)
	if err != nil {
		b.t.Fatal(err)
	}
	return cb
}

// callback follows the provider's redirect back to the sidecar.
func (b *browser) callback(cb string) resp {
	b.t.Helper()
	return b.send(http.MethodGet, cb, "", "")
}

// flow is start, login and callback.
func (b *browser) flow(provider string, u oidctest.User, extra map[string]any) resp {
	b.t.Helper()
	body := map[string]any{"provider": provider, "callbackURL": "/dashboard", "errorCallbackURL": "/login-error", "newUserCallbackURL": "/welcome"}
	for k, v := range extra {
		body[k] = v
	}
	return b.callback(b.login(b.start(body), u))
}

// jwt calls get-session and returns the JWT it hands out.
func (b *browser) jwt() string {
	b.t.Helper()
	r := b.send(http.MethodGet, testBase+"/api/auth/get-session", "", "")
	if r.status != http.StatusOK || r.header.Get("Set-Auth-Jwt") == "" {
		b.t.Fatalf("get-session: got %d %s without a JWT", r.status, r.body)
	}
	return r.header.Get("Set-Auth-Jwt")
}

// location returns the redirect's target and its error parameter.
func location(t testing.TB, r resp) (string, string) {
	t.Helper()
	if r.status != http.StatusFound {
		t.Fatalf("got %d %s, want a 302", r.status, r.body)
	}
	loc := r.header.Get("Location")
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return loc, u.Query().Get("error")
}

// counts is the rows that sign-ins write.
func (se *socialEnv) counts() [3]int {
	return [3]int{se.count("user"), se.count("account"), se.count("session")}
}

// rawDB is a plain handle on the issuer's SQLite file, for what the
// store's API does not offer (marking a user verified).
func (se *socialEnv) rawDB(t testing.TB) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+se.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
