package proxy_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
)

// benchVerifier is the production verifier stack on an in-memory key set.
func benchVerifier(b *testing.B, cacheSize int) (proxy.Verifier, func(sub string) string) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	if err := kc.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	v := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
		Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second}),
		Keys:  kc, Size: cacheSize, Leeway: 30 * time.Second,
	})
	return v, func(sub string) string { return benchToken(priv, sub) }
}

// benchToken is a token like the issuer's: its header, claims and size.
func benchToken(priv ed25519.PrivateKey, sub string) string {
	n := time.Now()
	return sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, map[string]any{
		"sub": sub, "iat": n.Unix(), "exp": n.Add(time.Hour).Unix(), "iss": origin, "aud": origin,
		"jti": "0123456789abcdef0123456789abcdef", "id": sub, "email": sub + "@example.com", "name": "Bench", "emailVerified": false})
}

func BenchmarkVerifyCacheHit(b *testing.B) {
	v, mint := benchVerifier(b, 100000)
	tok := mint("user-1")
	ctx := context.Background()
	v.Verify(ctx, tok)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyMiss(b *testing.B) {
	v, mint := benchVerifier(b, 0) // no cache: every call is a full check
	tok := mint("user-1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// nopTransport answers every upstream request at once, so the benchmark
// measures the proxy, not a network.
type nopTransport struct{}

func (nopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), ContentLength: 11, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// BenchmarkProxyHot is one authenticated business request through the
// production middleware stack (recover, request id, metrics and access
// log to io.Discard) with a cached token, against an instant upstream.
func BenchmarkProxyHot(b *testing.B) {
	for _, accessLog := range []bool{false, true} {
		b.Run(fmt.Sprintf("access_log=%v", accessLog), func(b *testing.B) {
			v, mint := benchVerifier(b, 100000)
			up, _ := url.Parse("http://upstream.invalid")
			log := slog.New(slog.NewJSONHandler(io.Discard, nil))
			p, err := proxy.New(proxy.Options{Upstream: up, Auth: http.NotFoundHandler(), Verifier: v, Transport: nopTransport{}, Logger: log,
				WebSocketPrefixes: []string{"/ws/"}, Admin: []proxy.AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}}, Roles: noRoles{}})
			if err != nil {
				b.Fatal(err)
			}
			var access proxy.AccessLog
			if accessLog {
				access = proxy.JSONAccessLog(io.Discard, log)
			}
			h := proxy.Chain(p, proxy.RequestID(), proxy.Observe(nil, access), proxy.Recover(log))
			req := httptest.NewRequest("GET", "/api/tasks", nil)
			req.Header.Set("Authorization", "Bearer "+mint("user-1"))
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("got %d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkProxyCold is BenchmarkProxyHot (access log on) with a token
// the cache has not seen on every request: the cold path of scenario c.
// Compare it with BenchmarkEd25519Floor plus BenchmarkProxyHot.
func BenchmarkProxyCold(b *testing.B) {
	for _, size := range []int{100000, 0} {
		b.Run(fmt.Sprintf("cache=%d", size), func(b *testing.B) { benchProxyCold(b, size) })
	}
}

func benchProxyCold(b *testing.B, cacheSize int) {
	v, mint := benchVerifier(b, cacheSize)
	up, _ := url.Parse("http://upstream.invalid")
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	p, err := proxy.New(proxy.Options{Upstream: up, Auth: http.NotFoundHandler(), Verifier: v, Transport: nopTransport{}, Logger: log,
		WebSocketPrefixes: []string{"/ws/"}, Admin: []proxy.AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}}, Roles: noRoles{}})
	if err != nil {
		b.Fatal(err)
	}
	h := proxy.Chain(p, proxy.RequestID(), proxy.Observe(nil, proxy.JSONAccessLog(io.Discard, log)), proxy.Recover(log))
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/tasks", nil)
		reqs[i].Header.Set("Authorization", "Bearer "+mint(fmt.Sprintf("user-%d", i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, reqs[i])
		if w.Code != 200 {
			b.Fatalf("got %d %s", w.Code, w.Body)
		}
	}
}

type noRoles struct{}

func (noRoles) HasAnyRole(context.Context, string, []string) (bool, error) { return false, nil }

// BenchmarkBareReverseProxy is the baseline: httputil.ReverseProxy with no
// authentication against the same instant upstream.
func BenchmarkBareReverseProxy(b *testing.B) {
	up, _ := url.Parse("http://upstream.invalid")
	// Same buffer pooling as the sidecar, so the ratio is the cost of auth.
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up); pr.SetXForwarded() }, Transport: nopTransport{}, BufferPool: testPool{}}
	req := httptest.NewRequest("GET", "/api/tasks", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		rp.ServeHTTP(w, req)
	}
}

type testPool struct{}

var testBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (testPool) Get() []byte  { return *testBuffers.Get().(*[]byte) }
func (testPool) Put(b []byte) { testBuffers.Put(&b) }

// BenchmarkEd25519Floor is one crypto/ed25519.Verify of a token like
// BenchmarkVerifyMiss's: the floor under any verifier. Compare the two in
// the same run (the machine is noisy).
func BenchmarkEd25519Floor(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	tok := benchToken(priv, "user-1")
	i := strings.LastIndexByte(tok, '.')
	input := []byte(tok[:i])
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("signature does not verify")
		}
	}
}

// BenchmarkVerifyMissJWX is BenchmarkVerifyMiss's token through the
// previous verifier (jwx's jwt.Parse, jwx_reference_test.go), for the
// ratio in the same run.
func BenchmarkVerifyMissJWX(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	tok := benchToken(priv, "user-1")
	v := &referenceVerifier{keys: mapKeys{"k1": pub}, issuer: origin, audience: origin, leeway: 30 * time.Second, maxTTL: 30 * 24 * time.Hour, now: time.Now}
	b.ReportAllocs()
	for b.Loop() {
		if _, reason := v.verify(tok); reason != "" {
			b.Fatal(reason)
		}
	}
}

// BenchmarkProxyHotRevocations is BenchmarkProxyHot (access log off) with
// no revocation set (the hot path before revocation), with an empty one,
// and with a million revocations held (nine in ten sessions, one in ten
// user cutoffs), the token's own not among them: the revocation check's
// cost on the hot path. Compare the rows of one run.
func BenchmarkProxyHotRevocations(b *testing.B) {
	for _, tc := range []struct {
		name string
		set  proxy.Revocations
	}{
		{"none", nil},
		{"held=0", revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})},
		{"held=1000000", millionRevocations()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, req := hotStack(b, tc.set)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("got %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
