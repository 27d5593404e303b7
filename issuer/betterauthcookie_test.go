package issuer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// A session cookie a real Better Auth 1.7.25 set (issuer/betterauth_test.go
// pins the same vector): the session token, signed with the secret.
const (
	baSecret       = "test-secret-0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
	baSessionToken = "zSTbU7L7Re4aDEQOuDvjysHfDRhYJ7Fe"
	baCookieValue  = "zSTbU7L7Re4aDEQOuDvjysHfDRhYJ7Fe.vpqb7dNDIT7C5IHgUzVP6cY%2FyERFkj0%2F%2FaqxCvRHjbw%3D"
)

// baSession signs a user up and gives it a session with Better Auth's
// token, as "db import-better-auth" carries one over, last extended age
// ago (a day or more: get-session extends it); it returns the user's id.
func baSession(t *testing.T, e *env, age ...time.Duration) string {
	t.Helper()
	r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "Ann", "email": "ann@example.com", "password": "correct-horse-battery"})
	if r.status != http.StatusOK {
		t.Fatalf("sign-up: got %d %s", r.status, r.body)
	}
	u := r.json(t)["user"].(map[string]any)
	now := e.clock.Now().UTC().Truncate(time.Millisecond)
	updated := now.Add(-time.Hour)
	if len(age) > 0 {
		updated = now.Add(-age[0])
	}
	err := e.db.CreateSession(context.Background(), issuer.Session{
		ID: "ba-session", Token: baSessionToken, UserID: u["id"].(string),
		ExpiresAt: updated.Add(7 * 24 * time.Hour), CreatedAt: updated, UpdatedAt: updated, Remember: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return u["id"].(string)
}

// TestBetterAuthCookieSignedIn: with the old secret and cookie name
// configured, a browser holding Better Auth's session cookie for an
// imported session is signed in, and its get-session moves it onto the
// sidecar's own cookie; anything else is no session.
func TestBetterAuthCookieSignedIn(t *testing.T) {
	accept := issuer.BetterAuthCookie{Name: "better-auth.session_token", Secret: []byte(baSecret)}
	tests := []struct {
		name    string
		opts    func(*issuer.Options)
		age     time.Duration // since the session was last extended
		cookie  string        // sent, besides nothing else
		signed  bool
		ours    string // the sidecar's cookie name set in exchange
		expired string // the cookie expired in exchange; "" none
	}{
		{"accepted", func(o *issuer.Options) { o.BetterAuthCookie = accept },
			time.Hour, "better-auth.session_token=" + baCookieValue, true, "auth.session_token", "better-auth.session_token"},
		{"accepted and extended", func(o *issuer.Options) { o.BetterAuthCookie = accept },
			25 * time.Hour, "better-auth.session_token=" + baCookieValue, true, "auth.session_token", "better-auth.session_token"},
		{"not configured", nil, time.Hour, "better-auth.session_token=" + baCookieValue, false, "", ""},
		{"another secret", func(o *issuer.Options) {
			o.BetterAuthCookie = issuer.BetterAuthCookie{Name: accept.Name, Secret: []byte(baSecret + "x")}
		}, time.Hour, "better-auth.session_token=" + baCookieValue, false, "", ""},
		{"another name", func(o *issuer.Options) { o.BetterAuthCookie = accept },
			time.Hour, "app.session_token=" + baCookieValue, false, "", ""},
		{"under our name, signed by Better Auth", func(o *issuer.Options) { o.BetterAuthCookie = accept },
			time.Hour, "auth.session_token=" + baCookieValue, false, "", ""},
		{"one name for both", func(o *issuer.Options) {
			o.BetterAuthCookie, o.CookieName = accept, accept.Name
		}, time.Hour, "better-auth.session_token=" + baCookieValue, true, "better-auth.session_token", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mutate []func(*issuer.Options)
			if tt.opts != nil {
				mutate = append(mutate, tt.opts)
			}
			e := newEnv(t, mutate...)
			id := baSession(t, e, tt.age)
			r := e.getSession(tt.cookie)
			if !tt.signed {
				if r.status != 200 || string(r.body) != "null" || r.header.Get("Set-Auth-Jwt") != "" {
					t.Fatalf("get-session: got %d %s jwt=%q, want 200 null without a JWT", r.status, r.body, r.header.Get("Set-Auth-Jwt"))
				}
				return
			}
			if r.status != 200 || r.header.Get("Set-Auth-Jwt") == "" {
				t.Fatalf("get-session: got %d %s jwt=%q, want 200 with a JWT", r.status, r.body, r.header.Get("Set-Auth-Jwt"))
			}
			if got := r.json(t)["user"].(map[string]any)["id"]; got != id {
				t.Fatalf("get-session user: got %v, want %s", got, id)
			}
			ours := r.cookie(tt.ours)
			if ours == nil || ours.MaxAge <= 0 || ours.Value == baCookieValue {
				t.Fatalf("get-session set %v, want a new %s", ours, tt.ours)
			}
			n := 0
			for _, c := range (&http.Response{Header: r.header}).Cookies() {
				if c.Name == tt.ours {
					n++
				}
			}
			if n != 1 {
				t.Errorf("get-session set %s %d times, want once: %q", tt.ours, n, r.header["Set-Cookie"])
			}
			if tt.expired != "" {
				if c := r.cookie(tt.expired); c == nil || c.MaxAge >= 0 {
					t.Errorf("Better Auth's cookie: got %v, want it expired", c)
				}
			}
			// The sidecar's cookie alone is the same session.
			r = e.getSession(ours.Name + "=" + ours.Value)
			if r.status != 200 || string(r.body) == "null" || r.json(t)["session"].(map[string]any)["id"] != "ba-session" {
				t.Fatalf("get-session with the new cookie: got %d %s, want the imported session", r.status, r.body)
			}
			if c := r.cookie(tt.ours); c != nil {
				t.Errorf("the new cookie was set again: %v", c)
			}
		})
	}
}

// TestBetterAuthCookieSecure: on https, Better Auth's cookie carries the
// "__Secure-" prefix, as the sidecar's does, and only then is it read.
func TestBetterAuthCookieSecure(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) {
		o.BaseURL = "https://app.example.com"
		o.BetterAuthCookie = issuer.BetterAuthCookie{Name: "better-auth.session_token", Secret: []byte(baSecret)}
	})
	baSession(t, e)
	if r := e.getSession("better-auth.session_token=" + baCookieValue); string(r.body) != "null" {
		t.Errorf("unprefixed on https: got %s, want null", r.body)
	}
	r := e.getSession("__Secure-better-auth.session_token=" + baCookieValue)
	if string(r.body) == "null" || r.cookie("__Secure-auth.session_token") == nil {
		t.Fatalf("prefixed on https: got %s %v, want the session and our cookie", r.body, r.header["Set-Cookie"])
	}
	if got := e.iss.CookieNames(); strings.Join(got, " ") != "__Secure-auth.session_token __Secure-better-auth.session_token" {
		t.Errorf("CookieNames: got %v", got)
	}
}

// TestBetterAuthCookieSignOut: signing out with Better Auth's cookie ends
// the imported session and expires both cookies.
func TestBetterAuthCookieSignOut(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) {
		o.BetterAuthCookie = issuer.BetterAuthCookie{Name: "better-auth.session_token", Secret: []byte(baSecret)}
	})
	baSession(t, e)
	r := e.do(http.MethodPost, "/api/auth/sign-out", "application/json", "{}", "Cookie", "better-auth.session_token="+baCookieValue, "Origin", "http://localhost:8080")
	if r.status != 200 {
		t.Fatalf("sign-out: got %d %s", r.status, r.body)
	}
	for _, name := range []string{"auth.session_token", "better-auth.session_token"} {
		if c := r.cookie(name); c == nil || c.MaxAge >= 0 {
			t.Errorf("sign-out's %s: got %v, want it expired", name, c)
		}
	}
	if n := e.count("session"); n != 1 { // the sign-up's own
		t.Errorf("sessions after sign-out: got %d, want 1", n)
	}
	if r := e.getSession("better-auth.session_token=" + baCookieValue); string(r.body) != "null" {
		t.Errorf("get-session after sign-out: got %s, want null", r.body)
	}
}

// TestBetterAuthCookieSessionReader: a verifier's session reader accepts
// the cookie as the issuer does (cookie-only routes).
func TestBetterAuthCookieSessionReader(t *testing.T) {
	e := newEnv(t)
	id := baSession(t, e)
	for _, tt := range []struct {
		name   string
		accept issuer.BetterAuthCookie
		want   string
	}{
		{"accepted", issuer.BetterAuthCookie{Name: "better-auth.session_token", Secret: []byte(baSecret)}, id},
		{"not configured", issuer.BetterAuthCookie{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sr, err := issuer.NewSessionReader(issuer.SessionReaderOptions{Store: e.db, Secret: []byte(testSecret), BetterAuthCookie: tt.accept, Now: e.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set("Cookie", "better-auth.session_token="+baCookieValue)
			got, _, err := sr.SessionUserID(context.Background(), req)
			if err != nil || got != tt.want {
				t.Errorf("SessionUserID: got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}
