package issuer_test

import (
	"context"
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
	"github.com/authsidecar/authsidecar/sqlstore"
)

const testSecret = "0123456789abcdefghijklmnopqrstuvwxyz-test-secret"

// clock is an injected, settable time source.
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

type env struct {
	t      testing.TB
	db     *sqlstore.DB
	dbPath string
	iss    *issuer.Issuer
	srv    *httptest.Server
	clock  *clock
	opts   issuer.Options
}

func openDB(t testing.TB, path string) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newEnv starts an issuer on a fresh SQLite file behind a real HTTP server.
func newEnv(t testing.TB, mutate ...func(*issuer.Options)) *env {
	t.Helper()
	e := &env{t: t, dbPath: filepath.Join(t.TempDir(), "auth.db"), clock: &clock{t: time.Now().UTC()}}
	e.opts = issuer.Options{
		Secret:       []byte(testSecret),
		BaseURL:      "http://localhost:8080",
		PasswordCost: issuer.ScryptParams{N: 16, R: 1, P: 1}, // cheap: the real cost is pinned in betterauth_test.go
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:          e.clock.Now,
	}
	for _, m := range mutate {
		m(&e.opts)
	}
	e.start()
	return e
}

// start (re)opens the database and issuer with e.opts.
func (e *env) start() {
	e.t.Helper()
	if e.srv != nil {
		e.srv.Close()
		e.db.Close()
	}
	e.db = openDB(e.t, e.dbPath)
	e.opts.Store = e.db
	iss, err := issuer.New(context.Background(), e.opts)
	if err != nil {
		e.t.Fatalf("issuer.New: %v", err)
	}
	e.iss = iss
	e.srv = httptest.NewServer(iss)
	e.t.Cleanup(e.srv.Close)
}

// noRedirects shows a test each redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// code returns the error code of a JSON error body.
func (r resp) code(t testing.TB) string {
	t.Helper()
	c, _ := r.json(t)["code"].(string)
	return c
}

// cookie returns the session cookie the response set, if any.
func (r resp) cookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (e *env) do(method, path, contentType, body string, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) postJSON(path string, v any, hdr ...string) resp {
	e.t.Helper()
	b, _ := json.Marshal(v)
	return e.do(http.MethodPost, path, "application/json", string(b), hdr...)
}

// signUp registers a user and returns the "name=value" cookie pair.
func (e *env) signUp(email, password string) (cookie string, user map[string]any) {
	e.t.Helper()
	r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Test User", "email": email, "password": password})
	if r.status != http.StatusOK {
		e.t.Fatalf("sign-up %s: got %d %s, want 200", email, r.status, r.body)
	}
	c := r.cookie("auth.session_token")
	if c == nil {
		e.t.Fatalf("sign-up set no session cookie: %v", r.header)
	}
	return c.Name + "=" + c.Value, r.json(e.t)["user"].(map[string]any)
}

func (e *env) getSession(cookie string) resp {
	e.t.Helper()
	return e.do(http.MethodGet, "/api/auth/get-session", "", "", "Cookie", cookie)
}

func (e *env) count(table string) int {
	e.t.Helper()
	n, err := e.db.Count(context.Background(), table)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func form(v map[string]string) string {
	q := url.Values{}
	for k, s := range v {
		q.Set(k, s)
	}
	return q.Encode()
}
