package proxy_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
)

// revToken signs a token like the issuer's, with sid and iat_ms when set.
func revToken(priv ed25519.PrivateKey, sub, sid string, issued time.Time) string {
	claims := map[string]any{"sub": sub, "iat": issued.Unix(), "exp": issued.Add(time.Hour).Unix(), "iss": origin, "aud": origin}
	if sid != "" {
		claims["sid"] = sid
		claims["iat_ms"] = issued.UnixMilli()
	}
	return sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, claims)
}

// TestTokenRevocationClaims: what the verifier hands the revocation
// check, read from the issuer's private claims, leniently.
func TestTokenRevocationClaims(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	jv := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin})
	now := time.Now().Truncate(time.Millisecond)
	base := func() map[string]any {
		return map[string]any{"sub": "u1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "iss": origin, "aud": origin}
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  revocation.Token
	}{
		{"sid and iat_ms", map[string]any{"sid": "s1", "iat_ms": now.UnixMilli()}, revocation.TokenOf("s1", "u1", now)},
		{"neither (another issuer)", nil, revocation.TokenOf("", "u1", time.Unix(now.Unix(), 0))},
		{"sid not a string", map[string]any{"sid": 5}, revocation.TokenOf("", "u1", time.Unix(now.Unix(), 0))},
		{"iat_ms not a whole number", map[string]any{"sid": "s1", "iat_ms": "soon"}, revocation.TokenOf("s1", "u1", time.Unix(now.Unix(), 0))},
		{"iat_ms past iat's second", map[string]any{"sid": "s1", "iat_ms": now.UnixMilli() + 1500}, revocation.TokenOf("s1", "u1", now.Add(1500*time.Millisecond))},
	} {
		c := base()
		for k, v := range tc.extra {
			c[k] = v
		}
		got, err := jv.Verify(context.Background(), sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, c))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Revocation != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got.Revocation, tc.want)
		}
	}
}

// revStack is the proxy with a verified-token cache and a revocation set
// in front of an upstream that answers 200.
func revStack(t *testing.T, set *revocation.Set) (h http.Handler, priv ed25519.PrivateKey) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
		Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin}),
		Keys:  kc, Size: 1000,
	})
	up, _ := url.Parse("http://upstream.invalid")
	p, err := proxy.New(proxy.Options{Upstream: up, Auth: http.NotFoundHandler(), Verifier: v, Revocations: set,
		Transport: nopTransport{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return p, priv
}

// TestRevokedTokenRefused: a revoked token is 401 even when the
// verified-token cache holds it; a token the set cannot judge is 503
// REVOCATIONS_UNAVAILABLE with Retry-After, never 401.
func TestRevokedTokenRefused(t *testing.T) {
	set := revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})
	h, priv := revStack(t, set)
	get := func(tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api/tasks", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	now := time.Now().Truncate(time.Millisecond)
	a, b := revToken(priv, "ann", "s-a", now.Add(-time.Second)), revToken(priv, "ann", "s-b", now.Add(-time.Second))
	for _, tok := range []string{a, b} {
		if w := get(tok); w.Code != 200 {
			t.Fatalf("before any revocation: got %d %s", w.Code, w.Body)
		}
	}
	set.Add(revocation.Record{Kind: revocation.KindSession, Subject: "s-a", At: now}.Entry())
	if w := get(a); w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
		t.Errorf("token of the ended session, cached: got %d %s, want 401 invalid_token", w.Code, w.Body)
	}
	if w := get(b); w.Code != 200 {
		t.Errorf("token of the user's other session: got %d, want 200", w.Code)
	}
	// A user cutoff: the tokens before it go, one a millisecond after it
	// (the same second) works.
	set.Add(revocation.Record{Kind: revocation.KindUser, Subject: "ann", At: now}.Entry())
	if w := get(b); w.Code != 401 {
		t.Errorf("token issued before the user's cutoff: got %d, want 401", w.Code)
	}
	if w := get(revToken(priv, "ann", "s-c", now.Add(time.Millisecond))); w.Code != 200 {
		t.Errorf("token issued 1ms after the user's cutoff: got %d, want 200", w.Code)
	}
	set.MarkUnusable(&revocation.UnavailableError{Why: "feed down", RetryIn: 2500 * time.Millisecond})
	w := get(revToken(priv, "bob", "s-d", now))
	if w.Code != 503 || w.Header().Get("Retry-After") != "3" || !jsonHasCode(w.Body.Bytes(), "REVOCATIONS_UNAVAILABLE") {
		t.Errorf("set unusable: got %d %s Retry-After %q, want 503 REVOCATIONS_UNAVAILABLE, Retry-After 3", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

// TestWebSocketClosedOnRevocation: an open tunnel whose token is revoked
// gets a close frame 1008 "token revoked" both ways at once, then both
// connections end; another session's tunnel carries on.
func TestWebSocketClosedOnRevocation(t *testing.T) {
	set := revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})
	s := newWSStack(t, 0, func(o *proxy.Options) { o.Revocations = set })
	now := time.Now()
	client, up := s.open(t, "/ws/chat?token="+revToken(s.priv, "ann", "s-a", now))
	roundTrip(t, client, up)
	other, otherUp := s.open(t, "/ws/chat?token="+revToken(s.priv, "ann", "s-b", now))

	var cs, us closeSeen
	var wg sync.WaitGroup
	wg.Go(func() { cs = awaitClose(client, true, nil) })
	wg.Go(func() { us = awaitClose(up, true, nil) })
	revokedAt := time.Now()
	set.Add(revocation.Record{Kind: revocation.KindSession, Subject: "s-a", At: revokedAt}.Entry())
	wg.Wait()
	for who, c := range map[string]closeSeen{"client": cs, "upstream": us} {
		switch {
		case c.err != nil:
			t.Errorf("%s: %v", who, c.err)
		case c.code != 1008 || c.reason != "token revoked":
			t.Errorf("%s: got close %d %q, want 1008 \"token revoked\"", who, c.code, c.reason)
		case c.at.Sub(revokedAt) > time.Second:
			t.Errorf("%s: close frame %v after the revocation, want at once", who, c.at.Sub(revokedAt))
		}
	}
	roundTrip(t, other, otherUp)
	if l := s.accessLine(t, "ann"); l["close_reason"] != proxy.CloseReasonTokenRevoked {
		t.Errorf("access log close_reason: got %v, want token_revoked", l["close_reason"])
	}
	if got := s.closedBy(t, proxy.CloseReasonTokenRevoked); got != 1 {
		t.Errorf("closed for revocation: got %v, want 1", got)
	}
}

func jsonHasCode(body []byte, code string) bool {
	var e struct{ Code string }
	return json.Unmarshal(body, &e) == nil && e.Code == code
}

// TestFeedAnswerIsNoUserToken: a JWS under the revocation feed's typ,
// signed with a good key and carrying a user token's claims, is refused:
// nothing the feed signs can authenticate a request.
func TestFeedAnswerIsNoUserToken(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	jv := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin})
	now := time.Now()
	claims := map[string]any{"sub": "u1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "iss": origin, "aud": origin}
	if _, err := jv.Verify(context.Background(), sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, claims)); err != nil {
		t.Fatalf("the same claims as a user token: %v", err)
	}
	_, err := jv.Verify(context.Background(), sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": revocation.FeedType}, claims))
	var ae *proxy.AuthError
	if !errors.As(err, &ae) || ae.Reason != proxy.ReasonMalformed {
		t.Errorf("typ %s: got %v, want refused as malformed", revocation.FeedType, err)
	}
}
