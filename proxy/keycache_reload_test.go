package proxy_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/proxy"
)

// TestKeyCacheSetters: MaxAge, Cooldown and StaleIfError changed on a live
// cache (a config reload) govern the next lookup.
func TestKeyCacheSetters(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	src := &hangingKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	c := &clock{t: time.Now()}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, RetryBackoff: time.Hour, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Cooldown: 30s by default lets a miss read after a minute; 10m does not.
	c.Add(time.Minute)
	before := src.calls.Load()
	kc.Lookup(ctx, "unknown")
	if got := src.calls.Load() - before; got != 1 {
		t.Fatalf("miss past the default cooldown: got %d reads, want 1", got)
	}
	kc.SetCooldown(10 * time.Minute)
	c.Add(time.Minute)
	before = src.calls.Load()
	kc.Lookup(ctx, "unknown")
	if got := src.calls.Load() - before; got != 0 {
		t.Errorf("miss within a cooldown raised to 10m: got %d reads, want 0", got)
	}

	// MaxAge: keys a minute old are fresh under the default 10m, stale
	// (a background read) under 30s.
	kc.SetCooldown(time.Second)
	before = src.calls.Load()
	kc.Lookup(ctx, "k1")
	if got := src.calls.Load() - before; got != 0 {
		t.Fatalf("known kid, keys 1m old, max_age 10m: got %d reads, want 0", got)
	}
	kc.SetMaxAge(30 * time.Second)
	kc.Lookup(ctx, "k1")
	deadline := time.Now().Add(5 * time.Second)
	for src.calls.Load() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := src.calls.Load() - before; got != 1 {
		t.Errorf("known kid, keys 1m old, max_age lowered to 30s: got %d reads, want 1", got)
	}
	for kc.Age() != 0 && time.Now().Before(deadline) { // the background read has landed
		time.Sleep(5 * time.Millisecond)
	}

	// StaleIfError: zero keeps failing keys usable; 1m makes keys read 2m
	// ago unusable at once.
	src.fail.Store(true)
	c.Add(2 * time.Minute)
	kc.Lookup(ctx, "unknown") // a failed read
	if !kc.Usable() {
		t.Fatal("failing source, stale_if_error zero (forever): keys unusable, want usable")
	}
	kc.SetStaleIfError(time.Minute)
	if kc.Usable() {
		t.Error("failing source, keys 2m old, stale_if_error lowered to 1m: usable, want unusable")
	}
	kc.SetStaleIfError(time.Hour)
	if !kc.Usable() {
		t.Error("failing source, keys 2m old, stale_if_error raised to 1h: unusable, want usable")
	}
}

// TestKeyCachePrime: Prime is the check a reload makes of a new key
// source before switching to it. Only a read that brings keys makes the
// cache usable; a failure, an empty set or a hang leaves it unusable,
// bounded by ReadTimeout, with no retry loop and nothing counted or logged
// as a refresh.
func TestKeyCachePrime(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	tests := []struct {
		name      string
		src       *hangingKeys
		wantErr   string // "" : primed
		wantCalls int64
	}{
		{"keys", &hangingKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}, "", 1},
		{"source fails", func() *hangingKeys { h := &hangingKeys{}; h.fail.Store(true); return h }(), "source down", 1},
		{"no keys", &hangingKeys{}, "the source has no keys", 1},
		{"source hangs", func() *hangingKeys { h := &hangingKeys{}; h.hang.Store(true); return h }(), "deadline exceeded", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged syncBuf
			refreshes := newRefreshLog()
			kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
				Source: tt.src, ReadTimeout: 100 * time.Millisecond,
				RetryBackoff: time.Millisecond, RetryBackoffMax: time.Millisecond,
				OnRefresh: refreshes.observe, Logger: slog.New(slog.NewTextHandler(&logged, nil)),
			})
			defer kc.Close()
			start := time.Now()
			err := kc.Prime(context.Background())
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Prime took %v, want about ReadTimeout (100ms) at most", took)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if !kc.Usable() || !kc.Has("k1") || kc.Len() != 1 || kc.Age() > time.Second {
					t.Errorf("primed: usable %v, has k1 %v, %d keys, age %v; want usable with k1 alone, just read", kc.Usable(), kc.Has("k1"), kc.Len(), kc.Age())
				}
				if got := refreshes.all(); !slices.Equal(got, []string{"boot/ok"}) {
					t.Errorf("refreshes observed: got %q, want [boot/ok]", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if kc.Usable() || kc.Len() != 0 {
				t.Errorf("after a failed Prime: usable %v with %d keys, want unusable and empty", kc.Usable(), kc.Len())
			}
			// A retry loop would read again within a few milliseconds.
			time.Sleep(50 * time.Millisecond)
			if got := tt.src.calls.Load(); got != tt.wantCalls {
				t.Errorf("source read %d times, want %d (no retry loop)", got, tt.wantCalls)
			}
			if got := refreshes.all(); len(got) != 0 {
				t.Errorf("refreshes observed: got %q, want none", got)
			}
			if logged.String() != "" {
				t.Errorf("logged %q, want nothing (the caller reports the refusal)", logged.String())
			}
		})
	}
}

// TestTokenCacheMetricsShared: caches built in turn (a reload that changes
// the key source) count into one set of counters, which never go back,
// and the entries gauge reads the cache in force.
func TestTokenCacheMetricsShared(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var current atomic.Pointer[proxy.Verifier]
	m := proxy.NewTokenCacheMetrics(reg, func() int { return proxy.CachedTokens(*current.Load()) })
	newCache := func() proxy.Verifier {
		return proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
			Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second}),
			Keys:  kc, Size: 64, Leeway: 30 * time.Second, Metrics: m,
		})
	}
	first, second := newCache(), newCache()
	current.Store(&first)
	ctx := context.Background()
	tok1, tok2 := benchToken(priv, "u1"), benchToken(priv, "u2")
	for _, tok := range []string{tok1, tok1, tok2} { // miss, hit, miss
		if _, err := first.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	current.Store(&second)
	for _, tok := range []string{tok1, tok1} { // miss (a new cache), hit
		if _, err := second.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]float64{
		"authsidecar_token_cache_hits_total":   2,
		"authsidecar_token_cache_misses_total": 3,
		"authsidecar_token_cache_entries":      1, // the second cache's: tok1
	} {
		if got := testutil.ToFloat64(mustCollector(t, reg, name)); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	if got := proxy.CachedTokens(first); got != 2 {
		t.Errorf("first cache holds %d tokens, want 2", got)
	}
	if got := proxy.CachedTokens(proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc})); got != 0 {
		t.Errorf("a verifier without cache: got %d cached tokens, want 0", got)
	}
}

// syncBuf is a log destination the cache's goroutines may write to while
// the test reads it.
type syncBuf = syncbuf.Buffer
