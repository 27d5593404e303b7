// Package oidctest runs identity providers inside tests, on loopback
// HTTP: a real OpenID provider (github.com/zitadel/oidc/v3's example OP,
// discovery, login form, code flow with PKCE, userinfo, refresh tokens)
// and stand-ins for Google and GitHub that answer as those services
// document, with switches for the ways a provider goes wrong.
package oidctest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"golang.org/x/text/language"
)

// OP is a running OpenID provider.
type OP struct {
	// Issuer is its issuer URL (discovery at Issuer/.well-known/...).
	Issuer                 string
	ClientID, ClientSecret string
	srv                    *httptest.Server
}

// User is one account at the OP. Username signs in with Password.
type User struct {
	ID, Username, Password string
	Email                  string
	EmailVerified          bool
	First, Last            string
}

// Alice is the OP's default user.
var Alice = User{ID: "sub-alice", Username: "alice", Password: "alice-password", Email: "alice@example.com", EmailVerified: true, First: "Alice", Last: "Example"}

type users map[string]*storage.User

func (u users) GetUserByID(id string) *storage.User { return u[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	for _, x := range u {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u users) ExampleClientID() string { return "service" }

// StartOP starts the OP on 127.0.0.1 with the users given (Alice when
// none) and one web client (client_secret_basic, PKCE) registered with
// redirectURIs. It stops when the test ends.
func StartOP(t testing.TB, redirectURIs []string, us ...User) *OP {
	t.Helper()
	if len(us) == 0 {
		us = []User{Alice}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	op := &OP{Issuer: "http://" + ln.Addr().String(), ClientID: "authsidecar", ClientSecret: "op-client-secret"}
	store := users{}
	for _, u := range us {
		store[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, FirstName: u.First, LastName: u.Last,
			Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: language.English}
	}
	client := storage.WebClient(op.ClientID, op.ClientSecret, redirectURIs...)
	st := storage.NewStorageWithClients(store, map[string]*storage.Client{op.ClientID: client})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	prev := slog.Default()
	h := exampleop.SetupServer(op.Issuer, st, quiet, false)
	slog.SetDefault(prev) // SetupServer sets its logger as the default
	op.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	op.srv.Start()
	t.Cleanup(op.srv.Close)
	return op
}

// Login follows an authorization URL as a browser would, signs in at the
// OP's form as u, and returns the URL the OP redirects back to (the
// sidecar's callback with code and state), without requesting it.
func Login(ctx context.Context, authURL string, u User) (string, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := authURL
	for range 10 {
		if strings.Contains(next, "/api/auth/callback/") {
			return next, nil
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if strings.Contains(next, "/login/username") {
			id := mustQuery(next, "authRequestID")
			form := url.Values{"id": {id}, "username": {u.Username}, "password": {u.Password}}
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, resolve(next, "/login/username"), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := c.Do(req)
		if err != nil {
			return "", err
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		loc := res.Header.Get("Location")
		if loc == "" {
			return "", fmt.Errorf("%s %s: status %d without a redirect: %.200s", req.Method, req.URL, res.StatusCode, body)
		}
		next = resolve(next, loc)
	}
	return "", fmt.Errorf("more than 10 redirects from %s", authURL)
}

func mustQuery(raw, key string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get(key)
}

func resolve(base, ref string) string {
	b, err := url.Parse(base)
	if err != nil {
		return ref
	}
	r, err := url.Parse(ref)
	if err != nil {
		return ref
	}
	return b.ResolveReference(r).String()
}
