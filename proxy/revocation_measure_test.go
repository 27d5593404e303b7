package proxy_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
)

// TestHotPathRevocationCost measures the hot path (a cached token through
// the production middleware, as BenchmarkProxyHotRevocations) without a
// revocation set, with an empty one, and with a million revocations held,
// interleaved: every round runs each variant in a random order, and the
// cost is the median over rounds of each round's ratio to the set-less
// run, so the machine's load (shared with other jobs) falls on both sides
// of each ratio. It logs the ratios (MEASURE lines); it fails only on a
// cost no noise explains (twice the time), the sign of a lookup that
// scans.
func TestHotPathRevocationCost(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a measurement (101 rounds of 3 x 4000 requests), meaningless under -short or -race")
	}
	million := millionRevocations()
	variants := []struct {
		name string
		set  proxy.Revocations
		h    http.Handler
		req  *http.Request
		ns   []float64
	}{
		{name: "none"},
		{name: "held=0", set: revocation.NewSet(revocation.SetOptions{TTL: time.Hour, Usable: true})},
		{name: "held=1000000", set: million},
	}
	for i := range variants {
		variants[i].h, variants[i].req = hotStack(t, variants[i].set)
	}
	const rounds, perRound = 101, 4000
	r := mathrand.New(mathrand.NewPCG(11, 12))
	for range rounds {
		for _, i := range r.Perm(len(variants)) {
			v := &variants[i]
			start := time.Now()
			for range perRound {
				w := httptest.NewRecorder()
				v.h.ServeHTTP(w, v.req)
				if w.Code != 200 {
					t.Fatalf("%s: got %d", v.name, w.Code)
				}
			}
			v.ns = append(v.ns, float64(time.Since(start).Nanoseconds())/perRound)
		}
	}
	for _, v := range variants[1:] {
		ratios := make([]float64, rounds)
		for i := range ratios {
			ratios[i] = v.ns[i] / variants[0].ns[i]
		}
		slices.Sort(ratios)
		med := ratios[rounds/2]
		t.Logf("MEASURE hot path with revocations %s: %.4f of the path without a set (median of %d interleaved rounds; rounds ranged %.3f to %.3f; median %.0f ns/req against %.0f)",
			v.name, med, rounds, ratios[0], ratios[rounds-1], median(v.ns), median(variants[0].ns))
		if med > 2 {
			t.Errorf("%s: the hot path takes %.2f times as long, want about the same", v.name, med)
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// millionRevocations is a set holding a million revocations from the last
// 30 days (nine in ten sessions, one in ten user cutoffs), none of them
// hotStack's token.
func millionRevocations() *revocation.Set {
	million := revocation.NewSet(revocation.SetOptions{TTL: 31 * 24 * time.Hour, Usable: true})
	r := mathrand.New(mathrand.NewPCG(9, 10))
	es := make([]revocation.Entry, 1_000_000)
	now := time.Now().UnixMilli()
	for i := range es {
		kind := revocation.KindSession
		if i%10 == 0 {
			kind = revocation.KindUser
		}
		es[i] = revocation.Entry{Kind: kind, Key: r.Uint64() | 1, At: now - r.Int64N(30*24*3600*1000)}
	}
	million.Add(es...)
	return million
}

// hotStack is BenchmarkProxyHotRevocations' stack with set, and its
// request.
func hotStack(t testing.TB, set proxy.Revocations) (http.Handler, *http.Request) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
		Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second}),
		Keys:  kc, Size: 100000, Leeway: 30 * time.Second,
	})
	up, _ := url.Parse("http://upstream.invalid")
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	p, err := proxy.New(proxy.Options{Upstream: up, Auth: http.NotFoundHandler(), Verifier: v, Revocations: set, Transport: nopTransport{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.Chain(p, proxy.RequestID(), proxy.Observe(nil, nil), proxy.Recover(log))
	req := httptest.NewRequest("GET", "/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, map[string]any{
		"sub": "user-1", "sid": "0123456789abcdef0123456789abcdef", "iat": time.Now().Unix(), "iat_ms": time.Now().UnixMilli(),
		"exp": time.Now().Add(time.Hour).Unix(), "iss": origin, "aud": origin}))
	return h, req
}
