package proxy_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authsidecar/authsidecar/proxy"
)

// countingVerifier counts full verifications of the real verifier.
type countingVerifier struct {
	inner proxy.Verifier
	n     atomic.Int64
}

func (c *countingVerifier) Verify(ctx context.Context, token string) (proxy.Claims, error) {
	c.n.Add(1)
	return c.inner.Verify(ctx, token)
}

func TestVerifiedTokenCache(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	var now atomic.Int64
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: src, Now: clock})
	kc.Load(context.Background())
	inner := &countingVerifier{inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
		Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second, Now: clock,
	})}
	reg := prometheus.NewRegistry()
	var v proxy.Verifier
	m := proxy.NewTokenCacheMetrics(reg, func() int { return proxy.CachedTokens(v) })
	v = proxy.NewCachingVerifier(proxy.CachingVerifierOptions{Inner: inner, Keys: kc, Size: 64, Leeway: 30 * time.Second, Metrics: m, Now: clock})
	mint := func(sub string, ttl time.Duration) string {
		n := clock()
		return sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1"}, map[string]any{
			"sub": sub, "iat": n.Unix(), "exp": n.Add(ttl).Unix(), "iss": origin, "aud": origin})
	}
	ctx := context.Background()
	tok := mint("u1", time.Hour)
	for range 5 {
		if c, err := v.Verify(ctx, tok); err != nil || c.Subject != "u1" {
			t.Fatalf("got %+v %v", c, err)
		}
	}
	if got := inner.n.Load(); got != 1 {
		t.Errorf("5 verifications of one token: %d full checks, want 1", got)
	}

	// A clock stepped back before the token's iat (less the leeway): the
	// hit is refused as not yet valid, as a full check would, and served
	// again once the clock catches up.
	now.Add(-int64(2 * time.Minute))
	var nyv *proxy.AuthError
	if _, err := v.Verify(ctx, tok); !errors.As(err, &nyv) || nyv.Reason != proxy.ReasonNotYetValid {
		t.Fatalf("cached token with the clock 2m before its iat: got %v, want not_yet_valid", err)
	}
	now.Add(int64(2 * time.Minute))
	if c, err := v.Verify(ctx, tok); err != nil || c.Subject != "u1" {
		t.Fatalf("clock back to normal: got %+v %v", c, err)
	}
	if got := inner.n.Load(); got != 1 {
		t.Errorf("after the clock step: %d full checks, want still 1 (the entry stays cached)", got)
	}

	// Failures are never cached: each costs a full check.
	bad := tok[:len(tok)-4] + "AAAA"
	for range 3 {
		if _, err := v.Verify(ctx, bad); err == nil {
			t.Fatal("tampered token accepted")
		}
	}
	if got := inner.n.Load(); got != 4 {
		t.Errorf("after 3 bad tokens: %d full checks, want 4", got)
	}

	// Expiry is re-checked on a hit.
	short := mint("u2", time.Minute)
	v.Verify(ctx, short)
	now.Add(int64(time.Minute + 31*time.Second))
	var ae *proxy.AuthError
	if _, err := v.Verify(ctx, short); !errors.As(err, &ae) || ae.Reason != proxy.ReasonExpired {
		t.Fatalf("cached token past exp+leeway: got %v, want expired", err)
	}

	// A key that leaves the set takes its cached tokens with it.
	tok = mint("u3", time.Hour)
	v.Verify(ctx, tok)
	src.set(func(s *staticKeys) { s.keys = nil })
	now.Add(int64(31 * time.Second)) // past the cooldown
	kc.Lookup(ctx, "unknown")        // forces the re-read that drops k1
	if _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("cached token accepted after its key left the key set")
	}
	src.set(func(s *staticKeys) { s.keys = []proxy.Key{{KID: "k1", Public: pub}} })
	now.Add(int64(31 * time.Second))
	kc.Lookup(ctx, "k1")

	// Bounded: far more tokens than Size never grow it past Size.
	for i := range 500 {
		if _, err := v.Verify(ctx, mint(fmt.Sprint("flood", i), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if ev := testutil.ToFloat64(mustCollector(t, reg, "authsidecar_token_cache_evictions_total")); ev < 400 {
		t.Errorf("got %v evictions after 500 inserts into 64 slots, want >= 436", ev)
	}
	if n := testutil.ToFloat64(mustCollector(t, reg, "authsidecar_token_cache_entries")); n > 64 || n < 32 {
		t.Errorf("got %v cached tokens after 500 inserts into 64 slots, want 32..64", n)
	}
}

func mustCollector(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"}, func() float64 { return v })
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
