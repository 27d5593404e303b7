package demoidp_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/demoidp"
	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/issuer"
)

// TestDemoIdPWithIdp: the demo provider is a provider package idp signs
// in with: discovery, the login form, the code with PKCE, a verified id
// token with the nonce and RFC 9207's iss; a code works once and only
// with its verifier.
func TestDemoIdPWithIdp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iss := "http://" + ln.Addr().String()
	const cb = "http://127.0.0.1:9/api/auth/callback/demo"
	p, err := demoidp.New(iss, cb)
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: p.Handler()}}
	srv.Start()
	defer srv.Close()
	set, err := idp.NewSet([]idp.Config{{ID: "demo", Kind: idp.KindOIDC, Issuer: iss, ClientID: demoidp.ClientID, SignUp: true}},
		idp.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	prov := set.Providers()[0]
	ctx := context.Background()
	verifier := strings.Repeat("v", 64)
	authURL, err := prov.AuthCodeURL(ctx, issuer.AuthRequest{State: "st", Nonce: "n0nce", Verifier: verifier, RedirectURI: cb, LoginHint: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(page), `value="ann@example.com"`) {
		t.Fatalf("login page: got %d %s", res.StatusCode, page)
	}
	u, _ := url.Parse(authURL)
	form := u.Query()
	form.Set("name", "Ann")
	form.Set("email", "Ann@Example.com")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = noFollow.PostForm(iss+"/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, _ := url.Parse(res.Header.Get("Location"))
	q := back.Query()
	if res.StatusCode != http.StatusFound || q.Get("state") != "st" || q.Get("iss") != iss || q.Get("code") == "" {
		t.Fatalf("login: got %d %s", res.StatusCode, back)
	}
	if err := prov.CheckIssuer(ctx, q.Get("iss"), true); err != nil {
		t.Errorf("CheckIssuer: %v", err)
	}
	if _, err := prov.Exchange(ctx, issuer.CodeExchange{Code: q.Get("code"), Verifier: "wrong" + verifier[5:], RedirectURI: cb, Nonce: "n0nce"}); err == nil {
		t.Fatal("a wrong verifier: got an identity, want a refusal")
	}
	// The code was spent by the refused attempt: single use.
	if _, err := prov.Exchange(ctx, issuer.CodeExchange{Code: q.Get("code"), Verifier: verifier, RedirectURI: cb, Nonce: "n0nce"}); err == nil {
		t.Fatal("a spent code: got an identity, want a refusal")
	}
	// A fresh code with the right verifier.
	res, _ = noFollow.PostForm(iss+"/authorize", form)
	res.Body.Close()
	code := mustCode(t, res.Header.Get("Location"))
	id, err := prov.Exchange(ctx, issuer.CodeExchange{Code: code, Verifier: verifier, RedirectURI: cb, Nonce: "n0nce"})
	if err != nil {
		t.Fatal(err)
	}
	if id.Email != "ann@example.com" || !id.EmailVerified || id.Name != "Ann" || !strings.HasPrefix(id.AccountID, "demo-") || id.Tokens.IDToken == "" {
		t.Errorf("got %+v", id)
	}
}

func mustCode(t *testing.T, loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("code")
}
