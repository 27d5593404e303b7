package main

// The contract's client rules checked where they matter: in a real browser.
// Debian's Chromium runs headless and is driven over the DevTools protocol
// (chromedp) against the real serve command; the pages use the client the
// sidecar itself serves at /api/auth/client.js, and every server-side claim
// ("the upstream saw X-User-Id", "nothing authenticated reached it") is
// checked in an upstream this test controls.
//
// Origins. The app pages are served on http://127.0.0.1:A and the sidecar
// listens on http://127.0.0.1:B: two origins (the port differs), so every
// call is a real CORS request and the JWT is readable only because the
// sidecar exposes set-auth-jwt to trusted origins. They are one site
// (cookies ignore ports), so the default cookie_same_site: lax cookie is
// sent on the page's credentialed fetches, as it is for a frontend and an
// API on sibling subdomains of one registrable domain. A frontend on
// another site needs cookie_same_site: none, which needs https; that
// configuration is not reproducible on plain-http loopback, so these tests
// keep lax and check the cross-site case only where it must fail.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/authsidecar/authsidecar/sidecar"
	"github.com/authsidecar/authsidecar/webclient"
)

const browserPassword = "correct-horse-battery"

// chromium finds the browser. Under CI a missing browser fails the test:
// .ci/run installs it, so its absence is a broken setup, not a reason to
// pass silently.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium not found; CI must install it (apt-get install -y chromium)")
	}
	t.Skip("Chromium not found: apt-get install -y chromium to run the browser tests")
	return ""
}

// startBrowser starts one headless Chromium for the test and returns its
// context; it is killed when the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.WindowSize(1100, 800),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run binds the browser to ctx, so it gets no timeout; each
	// scenario bounds its own steps.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start Chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Chromium did not start within 60s")
	}
	return ctx
}

// newTab opens a tab in a fresh browser context (its own cookies and
// storage, like a new profile), bounded in time.
func newTab(t *testing.T, browser context.Context, timeout time.Duration) context.Context {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tab, timeout)
	t.Cleanup(func() { cancel(); cancelTab() })
	return ctx
}

// seen is one request as the upstream received it.
type seen struct {
	Method, Path, Query, UserID string
	Upgrade                     bool
}

// recordingUpstream is the app behind the sidecar: it records every request
// and answers like a small app would.
type recordingUpstream struct {
	mu   sync.Mutex
	reqs []seen
	srv  *httptest.Server
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	ws := webclient.EchoWebSocket()
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid := r.Header.Get("X-User-Id")
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, uid, r.Header.Get("Upgrade") != ""})
		u.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/ws/"):
			ws.ServeHTTP(w, r)
		case r.URL.Path == "/api/mcp-oauth/authorize":
			// An OAuth authorize endpoint sends the browser on; the
			// landing page is this app's too (a public route).
			http.Redirect(w, r, "/oauth/landing?user="+uid+"&state="+r.URL.Query().Get("state"), http.StatusFound)
		case r.URL.Path == "/oauth/landing":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>landing</title><h1>Consent for <span id="user">%s</span></h1>`, html.EscapeString(r.URL.Query().Get("user")))
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "x_user_id": uid})
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) since(n int) []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs[n:]...)
}

func (u *recordingUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// appPage is the test's web app: the same pages on every origin it is
// served from. "/" loads the client from the sidecar; "/app" is the page a
// login redirects to, which calls the API as soon as it loads.
const appPage = `<!doctype html><meta charset="utf-8"><title>app</title>
<p id="state">loading</p>
<script type="module">
const base = %q;
try {
  const { createAuthClient } = await import(base + "/api/auth/client.js");
  window.auth = createAuthClient({ baseURL: base, onUnauthorized: () => { window.unauthorized = (window.unauthorized || 0) + 1; } });
  window.loginThenGo = async (email, password) => { await auth.signIn({ email, password }); location.assign("/app"); };
  document.getElementById("state").textContent = "ready";
} catch (err) {
  window.importError = String(err);
  document.getElementById("state").textContent = "client not loaded";
}
document.documentElement.dataset.ready = "1";
</script>`

const appAfterLogin = `<!doctype html><meta charset="utf-8"><title>app</title>
<script type="module">
const base = %q;
const tokenAtLoad = localStorage.getItem("authToken") !== null;
const { createAuthClient } = await import(base + "/api/auth/client.js");
const res = await createAuthClient({ baseURL: base }).fetch("/api/tasks?from=app");
const pre = document.createElement("pre");
pre.id = "result";
pre.textContent = await res.text();
pre.dataset.status = res.status;
pre.dataset.tokenAtLoad = tokenAtLoad;
document.body.append(pre);
</script>`

// newAppServer serves the app pages; the sidecar's URL is filled in before
// the server starts (so no request can race with it).
func newAppServer(t *testing.T) (srv *httptest.Server, origin string, start func(sidecar string)) {
	srv = httptest.NewUnstartedServer(nil)
	origin = "http://" + srv.Listener.Addr().String()
	return srv, origin, func(sidecar string) {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, appPage, sidecar)
		})
		mux.HandleFunc("GET /app", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, appAfterLogin, sidecar)
		})
		srv.Config.Handler = mux
		srv.Start()
		t.Cleanup(srv.Close)
	}
}

// openApp loads the app page at origin and waits for its script.
func openApp(t *testing.T, ctx context.Context, origin string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(origin+"/"),
		chromedp.WaitReady(chromedp.CSS("html[data-ready]")),
	); err != nil {
		t.Fatalf("open %s: %v", origin, err)
	}
}

// eval runs an async function body in the page and decodes its result.
func eval[T any](t *testing.T, ctx context.Context, body string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T]("(async () => {"+body+"})()", chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("in the page: %v\n%s", err, body)
	}
	return v
}

// jwtSubject reads the sub claim (no verification: the sidecar did that).
func jwtSubject(t *testing.T, jwt string) string {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct{ Sub string }
	if err != nil || json.Unmarshal(raw, &claims) != nil || claims.Sub == "" {
		t.Fatalf("JWT payload without sub: %s", raw)
	}
	return claims.Sub
}

// signUpInPage signs up through the page's client and returns the JWT the
// client stored in localStorage.authToken.
func signUpInPage(t *testing.T, ctx context.Context, email string) string {
	t.Helper()
	got := eval[struct{ Returned, Stored string }](t, ctx, fmt.Sprintf(`
		const s = await auth.signUp({ name: "Browser", email: %q, password: %q });
		return { returned: s.token, stored: localStorage.getItem("authToken") };`, email, browserPassword))
	if got.Stored == "" || got.Stored != got.Returned {
		t.Fatalf("after signUp: localStorage.authToken=%q, returned %q", got.Stored, got.Returned)
	}
	return got.Stored
}

// TestBrowser runs the six scenarios in headless Chromium.
func TestBrowser(t *testing.T) {
	browser := startBrowser(t)
	up := newRecordingUpstream(t)
	_, trusted, startTrusted := newAppServer(t)
	untrustedSrv, untrusted, startUntrusted := newAppServer(t)
	// The same untrusted server reached by name: another site as well as
	// another origin.
	_, untrustedPort, _ := net.SplitHostPort(untrustedSrv.Listener.Addr().String())
	otherSite := "http://localhost:" + untrustedPort

	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf(`upstream: %q
auth: { trusted_origins: [%q] }
limits: { signin_per_email: 100/m, signin_per_ip: 100/m, signup_per_ip: 100/m }
`, up.srv.URL, trusted))
	s := startSidecar(t, cfgPath, port, e2eSecret)
	startTrusted(s.base)
	startUntrusted(s.base)
	if trusted == s.base || !strings.HasPrefix(trusted, "http://127.0.0.1:") {
		t.Fatalf("page origin %s must differ from the sidecar's %s", trusted, s.base)
	}

	t.Run("1 cross-origin sign-up and sign-in store the JWT; a business call reaches the upstream", func(t *testing.T) {
		ctx := newTab(t, browser, 60*time.Second)
		openApp(t, ctx, trusted)
		jwt := signUpInPage(t, ctx, "one@example.com")
		sub := jwtSubject(t, jwt)

		// Sign in again (the two-step login), then read set-auth-jwt
		// directly: possible only because the sidecar exposes it to this
		// origin (docs/protocol.md).
		got := eval[struct {
			SignInToken, Stored, HeaderSeen string
			Status                          int
			Body                            struct {
				Path   string
				UserID string `json:"x_user_id"`
			}
		}](t, ctx, fmt.Sprintf(`
			const s = await auth.signIn({ email: "one@example.com", password: %q });
			const raw = await fetch(%q + "/api/auth/get-session", { credentials: "include" });
			const res = await auth.fetch("/api/tasks");
			return {
				signInToken: s.token, stored: localStorage.getItem("authToken"),
				headerSeen: raw.headers.get("set-auth-jwt") ?? "",
				status: res.status, body: await res.json(),
			};`, browserPassword, s.base))
		if got.SignInToken == "" || got.Stored != got.SignInToken || jwtSubject(t, got.Stored) != sub {
			t.Errorf("after signIn: stored %q, returned %q, want the same JWT for %s", got.Stored, got.SignInToken, sub)
		}
		if got.HeaderSeen == "" {
			t.Error("set-auth-jwt not readable by the page: CORS does not expose it")
		}
		if got.Status != 200 || got.Body.UserID != sub || got.Body.Path != "/api/tasks" {
			t.Errorf("business call: got %d %+v, want 200 echoing X-User-Id %s", got.Status, got.Body, sub)
		}
		var hit bool
		for _, r := range up.since(0) {
			if r.Path == "/api/tasks" && r.UserID == sub {
				hit = true
			}
		}
		if !hit {
			t.Errorf("the upstream never saw /api/tasks with X-User-Id %s: %+v", sub, up.since(0))
		}
	})

	t.Run("2 an untrusted origin cannot obtain a JWT by any route", func(t *testing.T) {
		ctx := newTab(t, browser, 90*time.Second)
		// The victim signs in on the real app first, so this browser holds a
		// live session cookie for the sidecar's host: the worst case.
		openApp(t, ctx, trusted)
		victimJWT := signUpInPage(t, ctx, "victim@example.com")

		// The probe tries every route a script has to a JWT and reports any
		// string that looks like one. On the trusted origin it must find one
		// (so it can see a leak); on the others, nothing.
		probe := fmt.Sprintf(`
			const base = %q, jwt = /eyJ[\w-]+\.[\w-]+\.[\w-]+/;
			const r = { leaks: [], attempts: {}, imported: !window.importError };
			const look = (where, v) => { if (v && jwt.test(v)) r.leaks.push(where); };
			const attempt = async (name, path, init) => {
				try {
					const res = await fetch(base + path, init);
					for (const [k, v] of res.headers) look(name + " header " + k, v);
					look(name + " body", await res.text());
					r.attempts[name] = res.type + " " + res.status;
				} catch (err) { r.attempts[name] = "blocked"; }
			};
			const form = (o) => ({ method: "POST", credentials: "include", body: new URLSearchParams(o) });
			const json = (o) => ({ method: "POST", credentials: "include", headers: { "Content-Type": "application/json" }, body: JSON.stringify(o) });
			const victim = { email: "victim@example.com", password: %q };
			await attempt("sign-in json", "/api/auth/sign-in/email", json(victim));
			await attempt("sign-in form", "/api/auth/sign-in/email", form(victim));
			await attempt("sign-up", "/api/auth/sign-up/email", json({ name: "M", email: "m" + Date.now() + "@example.com", password: victim.password }));
			await attempt("get-session", "/api/auth/get-session", { credentials: "include" });
			await attempt("get-session post", "/api/auth/get-session", { method: "POST", credentials: "include" });
			await attempt("token", "/api/auth/token", { credentials: "include" });
			await attempt("get-session no-cors", "/api/auth/get-session", { mode: "no-cors", credentials: "include" });
			await attempt("business with cookie", "/api/tasks", { credentials: "include" });
			r.ws = await new Promise((resolve) => {
				const ws = new WebSocket(base.replace("http", "ws") + "/ws/echo");
				let state = "refused";
				ws.onopen = () => { state = "open"; };
				ws.onmessage = (e) => { look("websocket", e.data); state = "message"; ws.close(); };
				ws.onclose = () => resolve(state);
			});
			look("localStorage", JSON.stringify({ ...localStorage }));
			look("document.cookie", document.cookie);
			r.cookieVisible = document.cookie.includes("session_token");
			return r;`, s.base, browserPassword)
		type report struct {
			Leaks         []string
			Attempts      map[string]string
			Imported      bool
			WS            string
			CookieVisible bool
		}

		control := eval[report](t, ctx, probe)
		if len(control.Leaks) == 0 || control.Attempts["get-session"] != "cors 200" {
			t.Fatalf("the probe found no JWT on the trusted origin, so it proves nothing: %+v", control)
		}

		signInsOK := countLog(settledLog(s), "POST", "/api/auth/sign-in/email", 200)
		for _, tc := range []struct{ name, origin string }{
			{"same site, another port", untrusted}, // the browser sends the victim's cookie
			{"another site", otherSite},            // it does not (SameSite=Lax)
		} {
			origin := tc.origin
			t.Run(tc.name, func(t *testing.T) {
				before := up.count()
				openApp(t, ctx, origin)
				got := eval[report](t, ctx, probe)
				t.Logf("attempts from %s: %v", origin, got.Attempts)
				if len(got.Leaks) > 0 {
					t.Errorf("a JWT reached a script on %s via %v", origin, got.Leaks)
				}
				if got.Imported {
					t.Errorf("client.js loaded cross-origin on %s without CORS", origin)
				}
				for name, result := range got.Attempts {
					if result != "blocked" && result != "opaque 0" {
						t.Errorf("%s from %s: got %q, want blocked by CORS", name, origin, result)
					}
				}
				if got.WS != "refused" || got.CookieVisible {
					t.Errorf("websocket without token: %s; session cookie visible to script: %v", got.WS, got.CookieVisible)
				}
				// Server side: nothing authenticated reached the upstream.
				for _, r := range up.since(before) {
					if r.UserID != "" {
						t.Errorf("the upstream received an authenticated request from the untrusted page: %+v", r)
					}
				}
			})
		}
		// The sign-ins from untrusted origins were refused by the sidecar
		// (403 INVALID_ORIGIN for the form posts, which need no preflight),
		// not merely hidden from the script by the browser. The log is
		// flushed in batches (every 100 ms): give it time to arrive.
		for deadline := time.Now().Add(3 * time.Second); countLog(s.stderr.String(), "POST", "/api/auth/sign-in/email", 403) < 2 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		logs := settledLog(s)
		if n := countLog(logs, "POST", "/api/auth/sign-in/email", 200); n != signInsOK {
			t.Errorf("sign-ins accepted from untrusted origins: %d", n-signInsOK)
		}
		if n := countLog(logs, "POST", "/api/auth/sign-in/email", 403); n < 2 {
			t.Errorf("sign-ins refused with 403: got %d, want one per untrusted origin", n)
		}
		// The victim's token is untouched and still works.
		openApp(t, ctx, trusted)
		after := eval[struct {
			Stored string
			Status int
		}](t, ctx, `return { stored: localStorage.getItem("authToken"), status: (await auth.fetch("/api/tasks")).status };`)
		if after.Stored != victimJWT || after.Status != 200 {
			t.Errorf("the victim after the probes: token changed %v, business call %d, want the same token and 200", after.Stored != victimJWT, after.Status)
		}
	})

	t.Run("3 login then immediate navigation calls the API successfully", func(t *testing.T) {
		ctx := newTab(t, browser, 60*time.Second)
		openApp(t, ctx, trusted)
		signUpInPage(t, ctx, "three@example.com")
		// Start signed out: no cookie, no token; only what signIn stores.
		eval[bool](t, ctx, `await auth.signOut(); return true;`)

		// get-session answers slowly, as over a real network: a client
		// that redirected without awaiting it would lose the race every
		// time here, not only sometimes.
		paused := chromedp.Events(ctx, fetch.RequestPaused)
		if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{
			Patterns: []*fetch.RequestPattern{{URLPattern: "*/api/auth/get-session*"}},
		}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for ev, err := range paused {
				if err != nil {
					return
				}
				time.AfterFunc(500*time.Millisecond, func() {
					chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
				})
			}
		}()

		before, logBefore := up.count(), countLog(settledLog(s), "GET", "/api/tasks", 401)
		if err := chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`void loginThenGo("three@example.com", %q)`, browserPassword)),
			chromedp.WaitReady(chromedp.CSS("#result[data-status]")),
		); err != nil {
			t.Fatal(err)
		}
		attrs, err := chromedp.Run(ctx, chromedp.Attributes(chromedp.CSS("#result")))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#result")))
		if attrs["data-status"] != "200" || attrs["data-token-at-load"] != "true" {
			t.Fatalf("the page after login: got %s (token stored before the redirect: %s) %s, want 200 with the token already stored (get-session must be awaited)",
				attrs["data-status"], attrs["data-token-at-load"], body)
		}
		if n := countLog(settledLog(s), "GET", "/api/tasks", 401) - logBefore; n != 0 {
			t.Errorf("the post-login call needed the 401 retry (%d refusals): the token was not there in time", n)
		}
		var hit bool
		for _, r := range up.since(before) {
			hit = hit || r.Path == "/api/tasks" && r.Query == "from=app" && r.UserID != ""
		}
		if !hit {
			t.Errorf("the upstream did not see the post-login call with X-User-Id: %+v", up.since(before))
		}
	})

	t.Run("4 a WebSocket with ?token= connects and receives; without a token it fails", func(t *testing.T) {
		ctx := newTab(t, browser, 60*time.Second)
		openApp(t, ctx, trusted)
		sub := jwtSubject(t, signUpInPage(t, ctx, "four@example.com"))
		before := up.count()
		type wsResult struct {
			Opened   bool
			Messages []string
			Code     int
		}
		got := eval[struct{ WithToken, Without wsResult }](t, ctx, fmt.Sprintf(`
			const run = (ws) => new Promise((resolve) => {
				const r = { opened: false, messages: [], code: 0 };
				ws.onopen = () => { r.opened = true; ws.send("ping from the page"); };
				ws.onmessage = (e) => { r.messages.push(e.data); if (r.messages.length === 2) ws.close(1000); };
				ws.onclose = (e) => { r.code = e.code; resolve(r); };
			});
			return {
				withToken: await run(auth.webSocket("/ws/echo?room=1")),
				without: await run(new WebSocket(%q.replace("http", "ws") + "/ws/echo?room=1")),
			};`, s.base))
		w := got.WithToken
		var hello struct {
			UserID string `json:"x_user_id"`
		}
		if !w.Opened || len(w.Messages) != 2 || json.Unmarshal([]byte(w.Messages[0]), &hello) != nil ||
			hello.UserID != sub || w.Messages[1] != "ping from the page" || w.Code != 1000 {
			t.Errorf("with token: got %+v, want open, the upstream's greeting for %s, the echo, close 1000", w, sub)
		}
		if got.Without.Opened || len(got.Without.Messages) != 0 || got.Without.Code != 1006 {
			t.Errorf("without token: got %+v, want refused (1006)", got.Without)
		}
		var upgrades []seen
		for _, r := range up.since(before) {
			if r.Upgrade {
				upgrades = append(upgrades, r)
			}
		}
		if len(upgrades) != 1 || upgrades[0].UserID != sub || upgrades[0].Query != "room=1" {
			t.Errorf("upstream upgrades: got %+v, want one, with X-User-Id %s and the token removed from the query", upgrades, sub)
		}
	})

	t.Run("5 the cookie-only authorize route follows the upstream redirect, and is 401 after sign-out", func(t *testing.T) {
		ctx := newTab(t, browser, 60*time.Second)
		openApp(t, ctx, trusted)
		sub := jwtSubject(t, signUpInPage(t, ctx, "five@example.com"))
		authorize := s.base + "/api/mcp-oauth/authorize?client_id=test&state=xyz"
		// A top-level navigation started by the page, as a "Connect"
		// button would: no Authorization header is possible, the cookie is
		// the credential.
		navigate := chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.assign(%q)`, authorize))
		res, err := chromedp.RunResponse(ctx, navigate)
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		user, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#user")))
		if res.Status != 200 || loc != s.base+"/oauth/landing?user="+sub+"&state=xyz" || user != sub {
			t.Fatalf("authorize with the cookie: got %d at %s (user %q), want the upstream's landing page for %s", res.Status, loc, user, sub)
		}

		openApp(t, ctx, trusted)
		if tok := eval[*string](t, ctx, `await auth.signOut(); return localStorage.getItem("authToken");`); tok != nil {
			t.Fatalf("after signOut localStorage.authToken = %q, want none", *tok)
		}
		before := up.count()
		res, err = chromedp.RunResponse(ctx, navigate)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 401 {
			t.Errorf("authorize after sign-out: got %d, want 401", res.Status)
		}
		if got := up.since(before); len(got) != 0 {
			t.Errorf("the upstream was reached after sign-out: %+v", got)
		}
	})

	t.Run("6 demo page screenshot after sign-in", func(t *testing.T) {
		testDemoScreenshot(t, browser)
	})

	t.Run("7 demo page: sign in with the demo IdP", func(t *testing.T) {
		testDemoSocial(t, browser)
	})
}

// testDemoSocial: the demo page's "Sign in with a demo IdP" button sends
// the browser to the demo's OpenID provider, whose login form sends it
// back to the page signed in: get-session's JWT reaches the upstream.
func testDemoSocial(t *testing.T, browser context.Context) {
	base, _, errOut := startDemo(t)
	ctx := newTab(t, browser, 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
		chromedp.Click(chromedp.ID("social")),
		// The provider's own page: another origin, its login form.
		chromedp.WaitVisible(chromedp.CSS(`form[action="/authorize"] #email`)),
	); err != nil {
		t.Fatalf("to the demo IdP: %v\n%s", err, errOut.String())
	}
	idpURL, _ := chromedp.Run(ctx, chromedp.Location())
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("name"), "Idp User"),
		chromedp.SetValue(chromedp.ID("email"), "idp-user@example.com"),
		chromedp.Click(chromedp.ID("signin")),
		// Back on the demo page, signed in by the cookie the callback set.
		chromedp.WaitReady(chromedp.CSS(`#status[data-state="in"]`)),
		chromedp.Click(chromedp.ID("call")),
		chromedp.WaitVisible(chromedp.ID("user-id")),
	); err != nil {
		t.Fatalf("demo IdP sign-in: %v\n%s", err, errOut.String())
	}
	if strings.HasPrefix(idpURL, base) || !strings.Contains(idpURL, "/authorize?") {
		t.Errorf("the login form was at %q, want the demo IdP's /authorize (another origin than %s)", idpURL, base)
	}
	result, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("account-result")))
	if !strings.Contains(result, "idp-user@example.com with the demo IdP") {
		t.Errorf("account card: got %q, want the demo IdP sign-in named", result)
	}
	userID, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("user-id")))
	token := eval[string](t, ctx, `return localStorage.getItem("authToken");`)
	if sub := jwtSubject(t, token); userID == "" || userID != sub {
		t.Errorf("the echo shows X-User-Id %q, want the JWT's sub %q", userID, sub)
	}
	if loc := eval[string](t, ctx, `return location.search;`); loc != "" {
		t.Errorf("the page kept %q in its address, want it cleaned", loc)
	}
}

// TestClientJSServed: the sidecar serves the embedded client beside the
// issuer, cacheable and revalidated by ETag, under the same CORS rules as
// the rest of /api/auth.
func TestClientJSServed(t *testing.T) {
	const app = "http://127.0.0.1:1"
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("auth: { trusted_origins: [%q] }\n", app))
	s := startSidecar(t, cfgPath, port, e2eSecret)

	res, body := s.do(t, "GET", webclient.ClientPath, "", "Origin", app)
	etag := res.Header.Get("ETag")
	if res.StatusCode != 200 || !strings.Contains(string(body), "export function createAuthClient") {
		t.Fatalf("GET %s: got %d %.80s", webclient.ClientPath, res.StatusCode, body)
	}
	for name, want := range map[string]string{
		"Content-Type":                "text/javascript; charset=utf-8",
		"Cache-Control":               "public, max-age=300",
		"Access-Control-Allow-Origin": app,
	} {
		if got := res.Header.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if etag == "" {
		t.Error("no ETag")
	}
	if res, body := s.do(t, "GET", webclient.ClientPath, "", "If-None-Match", etag); res.StatusCode != 304 || len(body) != 0 {
		t.Errorf("If-None-Match: got %d with %d bytes, want 304", res.StatusCode, len(body))
	}
	if res, _ := s.do(t, "GET", webclient.ClientPath, "", "Origin", "http://evil.example"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("an untrusted origin got CORS headers on client.js")
	}
	// Only GET and HEAD of that one path: everything else is the issuer's.
	if res, body := s.do(t, "POST", webclient.ClientPath, "{}"); res.StatusCode == 200 || !strings.Contains(string(body), `"code"`) {
		t.Errorf("POST %s: got %d %s, want the issuer's JSON error", webclient.ClientPath, res.StatusCode, body)
	}
	if res, body := s.do(t, "GET", "/api/auth/ok", ""); res.StatusCode != 200 || !strings.Contains(string(body), `"ok":true`) {
		t.Errorf("/api/auth/ok: got %d %s", res.StatusCode, body)
	}
}

// countLog counts the sidecar's access-log lines for method and path
// answered with status.
func countLog(logs, method, path string, status int) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Msg, Method, Path string
			Status            int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Method == method && l.Path == path && l.Status == status {
			n++
		}
	}
	return n
}

// testDemoScreenshot runs "authsidecar demo" as a newcomer would, walks its
// page (sign up, call the API, open the WebSocket) and saves a screenshot:
// always under t.TempDir(), and to testdata/demo.png (shown in the README)
// with UPDATE_SCREENSHOT=1.
func testDemoScreenshot(t *testing.T, browser context.Context) {
	base, _, errOut := startDemo(t)

	ctx := newTab(t, browser, 60*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1100, 760),
		chromedp.Navigate(base+"/"),
		chromedp.WaitReady(chromedp.CSS("body[data-ready]")),
		chromedp.Click(chromedp.ID("signup")),
		chromedp.WaitReady(chromedp.CSS(`#status[data-state="in"]`)),
		chromedp.Click(chromedp.ID("call")),
		chromedp.WaitVisible(chromedp.ID("user-id")),
		chromedp.Click(chromedp.ID("ws")),
		chromedp.WaitReady(chromedp.CSS(`#ws-log[data-done]`)),
	); err != nil {
		t.Fatalf("demo page: %v\n%s", err, errOut.String())
	}
	userID, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("user-id")))
	token := eval[string](t, ctx, `return localStorage.getItem("authToken");`)
	if sub := jwtSubject(t, token); userID != sub {
		t.Errorf("demo page: the echo shows X-User-Id %q, want the JWT's sub %q", userID, sub)
	}
	wsDone, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("ws-log"), "data-done"))
	wsLog, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("ws-log")))
	if wsDone.Value != "ok" || !strings.Contains(wsLog, userID) || !strings.Contains(wsLog, "hello from the demo page") {
		t.Errorf("demo WebSocket: got %s:\n%s", wsDone.Value, wsLog)
	}

	// The pointer leaves the last button, so none is drawn hovered.
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1)); err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if shot, err = compactPNG(shot); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(t.TempDir(), "demo.png")}
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		paths = append(paths, filepath.Join("testdata", "demo.png"))
	}
	for _, p := range paths {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("demo screenshot (%d bytes): %s", len(shot), p)
	}
}

// compactPNG re-encodes a screenshot with a palette of its 256 most common
// colours: a flat UI loses nothing visible, and the file shrinks several
// times, small enough to commit.
func compactPNG(b []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	bounds := img.Bounds()
	counts := map[color.RGBA]int{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	common := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		common = append(common, c)
	}
	slices.SortFunc(common, func(a, b color.RGBA) int {
		if d := counts[b] - counts[a]; d != 0 {
			return d
		}
		return int(a.R)<<16 | int(a.G)<<8 | int(a.B) - (int(b.R)<<16 | int(b.G)<<8 | int(b.B))
	})
	pal := make(color.Palette, 0, 256)
	for _, c := range common[:min(256, len(common))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(bounds, pal)
	index := map[color.RGBA]uint8{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// settledLog returns the sidecar's log once every line written so far has
// been flushed (the log is written in batches every sidecar.LogFlushInterval).
func settledLog(s *instance) string {
	time.Sleep(3 * sidecar.LogFlushInterval)
	return s.stderr.String()
}
