package idp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

func quietOptions() Options {
	return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: 300 * time.Millisecond, MaxBodyBytes: 1 << 10}
}

// TestSetReload: a reload keeps the providers whose config is unchanged
// (their discovery, keys, connections) and builds the others; Retire
// closes only what the other set does not hold.
func TestSetReload(t *testing.T) {
	gh := Config{ID: "gh", Kind: KindGitHub, ClientID: "a", ClientSecret: "s"}
	corp := Config{ID: "corp", Kind: KindOIDC, Issuer: "http://127.0.0.1:1", ClientID: "c"}
	s, err := NewSet([]Config{gh, corp}, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	corp2 := corp
	corp2.SignUp = true
	next, err := s.Reload([]Config{gh, corp2})
	if err != nil {
		t.Fatal(err)
	}
	if next.provs[0] != s.provs[0] {
		t.Error("unchanged github provider: got a new one, want it kept")
	}
	if next.provs[1] == s.provs[1] || !next.Providers()[1].SignUp() {
		t.Error("changed corp provider: got the old one, want a new one with sign_up")
	}
	s.Retire(next)
	if err := s.provs[1].(*oidcProvider).ctx.Err(); err == nil {
		t.Error("the replaced provider was not closed")
	}
	if err := next.provs[1].(*oidcProvider).ctx.Err(); err != nil {
		t.Error("the new provider was closed")
	}
	next.Close()
	if _, err := NewSet([]Config{{ID: "x", Kind: "saml", ClientID: "c"}}, quietOptions()); err == nil {
		t.Error("unknown kind: got a set, want an error")
	}
}

// TestClientBounds: every call to a provider is bounded in size and time
// and follows no redirect; each failure is ErrProviderUnavailable, a
// refusal (4xx) ErrUserInfo.
func TestClientBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write([]byte(`{"a":"` + strings.Repeat("x", 4<<10) + `"}`))
		case "/big-declared":
			w.Header().Set("Content-Length", "1000000")
			w.Write([]byte("{}"))
		case "/slow":
			time.Sleep(time.Second)
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/refused":
			w.WriteHeader(http.StatusUnauthorized)
		case "/down":
			w.WriteHeader(http.StatusBadGateway)
		case "/garbage":
			w.Write([]byte("<html>"))
		default:
			w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	o := quietOptions()
	o.defaults()
	b := &base{cfg: Config{ID: "p"}, client: newClient(o.Transport, "p", o, o.Metrics), o: o}
	for _, tc := range []struct {
		path string
		want error
	}{
		{"/ok", nil}, {"/big", issuer.ErrProviderUnavailable}, {"/big-declared", issuer.ErrProviderUnavailable},
		{"/slow", issuer.ErrProviderUnavailable}, {"/redirect", issuer.ErrUserInfo}, {"/refused", issuer.ErrUserInfo},
		{"/down", issuer.ErrProviderUnavailable}, {"/garbage", issuer.ErrProviderUnavailable},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var v map[string]any
			err := b.getJSON(context.Background(), endpointUserinfo, srv.URL+tc.path, "tok", &v)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestClaimValues(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want []string
	}{
		{"staff", []string{"staff"}}, {true, []string{"true"}}, {float64(42), []string{"42"}},
		{[]any{"a", true, []any{"nested"}}, []string{"a", "true"}}, {map[string]any{"x": 1}, nil}, {nil, nil},
	} {
		if got := claimValues(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("claimValues(%v): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRules: each rule refuses with ErrIdentityRefused and names itself.
func TestRules(t *testing.T) {
	b := &base{cfg: Config{AllowedEmailDomains: []string{"Example.com"}, RequiredClaims: map[string][]string{"groups": {"staff"}}}}
	ok := issuer.Identity{Email: "ann@example.com", EmailVerified: true}
	for _, tc := range []struct {
		name   string
		id     issuer.Identity
		claims map[string]any
		want   string
	}{
		{"admitted", ok, map[string]any{"groups": []any{"x", "staff"}}, ""},
		{"unverified email", issuer.Identity{Email: "ann@example.com"}, map[string]any{"groups": "staff"}, "allowed_email_domains"},
		{"other domain", issuer.Identity{Email: "ann@evil.example", EmailVerified: true}, map[string]any{"groups": "staff"}, "allowed_email_domains"},
		{"suffix is not a domain", issuer.Identity{Email: "ann@notexample.com", EmailVerified: true}, map[string]any{"groups": "staff"}, "allowed_email_domains"},
		{"claim missing", ok, nil, "required_claims"},
		{"claim other", ok, map[string]any{"groups": []any{"guests"}}, "required_claims"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.admit(tc.id, tc.claims, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want admitted", err)
			case tc.want != "" && (!errors.Is(err, issuer.ErrIdentityRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal by %s", err, tc.want)
			}
		})
	}
	gh := &base{cfg: Config{AllowedOrganizations: []string{"acme"}}}
	if err := gh.admit(ok, nil, nil); !errors.Is(err, issuer.ErrIdentityRefused) {
		t.Errorf("no membership: got %v, want refused", err)
	}
	if err := gh.admit(ok, nil, []string{"acme"}); err != nil {
		t.Errorf("a member: got %v", err)
	}
}
