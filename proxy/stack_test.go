package proxy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/sqlstore"
)

const (
	secret = "proxy-test-secret-0123456789abcdefghijklmnop"
	origin = "http://localhost:8080"
	pw     = "correct-horse-battery"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// seen is one request as the upstream received it.
type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
}

// upstream is a real HTTP server that records what reaches it.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
	// handle, when set, answers instead of the default JSON echo.
	handle func(w http.ResponseWriter, r *http.Request)
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone()})
		h := u.handle
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.Close)
	return u
}

// take returns and forgets what the upstream received.
func (u *upstream) take() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.reqs
	u.reqs = nil
	return r
}

// counter counts store operations by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) observe(_ context.Context, op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *counter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, v := range c.n {
		t += v
	}
	return t
}

// stack is the whole sidecar: real SQLite, real issuer, real key cache and
// verifier, the proxy, and a real upstream behind it.
type stack struct {
	t        *testing.T
	db       *sqlstore.DB
	dbPath   string
	iss      *issuer.Issuer
	keys     *proxy.KeyCache
	proxy    *proxy.Proxy
	srv      *httptest.Server
	up       *upstream
	clock    *clock
	queries  *counter
	refreshe *counter
}

type issuerKeys struct{ iss *issuer.Issuer }

func (k *issuerKeys) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	pks, err := k.iss.PublicKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]proxy.Key, len(pks))
	for i, pk := range pks {
		out[i] = proxy.Key{KID: pk.KID, Public: pk.Key}
	}
	return out, nil
}

func newStack(t *testing.T, mutate ...func(*proxy.Options)) *stack {
	t.Helper()
	s := &stack{t: t, clock: &clock{t: time.Now().UTC()}, queries: &counter{n: map[string]int{}}, refreshe: &counter{n: map[string]int{}}}
	s.dbPath = filepath.Join(t.TempDir(), "auth.db")
	db, err := sqlstore.OpenSQLite(context.Background(), s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.Observe = s.queries.observe
	s.db = db
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := &issuerKeys{}
	s.keys = proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, Logger: log, Now: s.clock.Now,
		OnRefresh: func(trigger, result string) { s.refreshe.observe(nil, trigger+"/"+result) },
	})
	iss, err := issuer.New(context.Background(), issuer.Options{
		Store: db, Secret: []byte(secret), BaseURL: origin,
		PasswordCost: issuer.ScryptParams{N: 16, R: 1, P: 1},
		OnNewKey:     func(k issuer.PublicKey) { s.keys.Add(proxy.Key{KID: k.KID, Public: k.Key}) },
		Logger:       log, Now: s.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	src.iss, s.iss = iss, iss
	if err := s.keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.up = newUpstream(t)
	upURL, _ := url.Parse(s.up.URL)
	o := proxy.Options{
		Upstream: upURL,
		Auth:     iss,
		Verifier: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
			Keys: s.keys, Issuer: origin, Audience: origin, Leeway: 30 * time.Second,
			MaxTTL: 30 * 24 * time.Hour, Now: s.clock.Now,
		}),
		Sessions:             iss,
		Roles:                db,
		CookieOnly:           []string{"/api/mcp-oauth/authorize"},
		Passthrough:          []string{"/ws/browser"},
		WebSocketPrefixes:    []string{"/ws/"},
		Admin:                []proxy.AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}},
		SessionCookieNames:   []string{iss.CookieName()},
		TrustedOrigins:       []string{origin, "https://app.example.com"},
		CORSAllowCredentials: true,
		CORSMaxAge:           10 * time.Minute,
		Logger:               log,
	}
	for _, m := range mutate {
		m(&o)
	}
	p, err := proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	s.proxy = p
	s.srv = httptest.NewServer(p)
	t.Cleanup(s.srv.Close)
	return s
}

type resp struct {
	status int
	header http.Header
	body   string
}

func (s *stack) do(method, path string, body io.Reader, hdr ...string) resp {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, string(b)}
}

// user signs up and returns the session cookie pair, the user id and a JWT
// from get-session: the contract's two-step login.
func (s *stack) user(email string) (cookie, id, jwt string) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"name": "U", "email": email, "password": pw})
	r := s.do("POST", "/api/auth/sign-up/email", strings.NewReader(string(b)), "Content-Type", "application/json")
	if r.status != 200 {
		s.t.Fatalf("sign-up: %d %s", r.status, r.body)
	}
	var out struct{ User struct{ ID string } }
	json.Unmarshal([]byte(r.body), &out)
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	g := s.do("GET", "/api/auth/get-session", nil, "Cookie", cookie)
	jwt = g.header.Get("Set-Auth-Jwt")
	if jwt == "" {
		s.t.Fatalf("get-session gave no JWT: %d %s", g.status, g.body)
	}
	return cookie, out.User.ID, jwt
}

func bearer(jwt string) []string { return []string{"Authorization", "Bearer " + jwt} }

func withStoreTimeout(d time.Duration) func(*proxy.Options) {
	return func(o *proxy.Options) { o.StoreTimeout = d }
}

func withHeaderTimeout(d time.Duration) func(*proxy.Options) {
	return func(o *proxy.Options) { o.ResponseHeaderTimeout = d }
}

// newIssuerOn opens a second issuer on the stack's database, as another
// process (the CLI) would, without telling the running verifier anything.
func newIssuerOn(s *stack) (*issuer.Issuer, error) {
	return issuer.New(context.Background(), issuer.Options{
		Store: s.db, Secret: []byte(secret), BaseURL: origin,
		PasswordCost: issuer.ScryptParams{N: 16, R: 1, P: 1},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)), Now: s.clock.Now,
	})
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	var hdr struct{ Kid string }
	json.Unmarshal(h, &hdr)
	return hdr.Kid
}

// forgeKid swaps the kid in a token's header (the signature then no
// longer matters: the key is never found).
func forgeKid(t *testing.T, token, kid string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	h, _ := json.Marshal(map[string]string{"alg": "EdDSA", "kid": kid, "typ": "JWT"})
	return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
}
