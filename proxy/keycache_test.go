package proxy_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authsidecar/authsidecar/proxy"
)

// refreshLog records OnRefresh calls and lets a test wait for one. The
// cache calls OnRefresh under its lock, so observe never blocks.
type refreshLog struct {
	mu   sync.Mutex
	seen []string
	ch   chan struct{}
}

func newRefreshLog() *refreshLog { return &refreshLog{ch: make(chan struct{}, 1)} }

func (l *refreshLog) observe(trigger, result string) {
	l.mu.Lock()
	l.seen = append(l.seen, trigger+"/"+result)
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

func (l *refreshLog) count(want string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		if s == want {
			n++
		}
	}
	return n
}

func (l *refreshLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// waitFor waits until want has been observed n times in all.
func (l *refreshLog) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for l.count(want) < n {
		select {
		case <-l.ch:
		case <-timeout:
			t.Fatalf("waited 10s for %d × %s; saw %v", n, want, l.all())
		}
	}
}

// keysStack is the proxy stack verifying with a KeyCache over staticKeys
// (the verifier mode's shape: the keys come from elsewhere) and the
// verified-token cache in front, as main wires it.
type keysStack struct {
	*stack
	kc    *proxy.KeyCache
	src   *staticKeys
	log   *refreshLog
	clock *clock
	mint  func(sub string) string // a token for sub, valid for an hour
	// mintTTL mints with another lifetime.
	mintTTL func(sub string, ttl time.Duration) string
}

// newKeysStack builds the stack; set(src) runs before Load, whose error is
// returned rather than fatal (a verifier starts without its keys).
func newKeysStack(t *testing.T, o proxy.KeyCacheOptions, set func(*staticKeys)) (*keysStack, error) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	ks := &keysStack{
		src:   &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}},
		log:   newRefreshLog(),
		clock: &clock{t: time.Now().UTC()},
	}
	if set != nil {
		ks.src.set(set)
	}
	o.Source, o.Now, o.OnRefresh = ks.src, ks.clock.Now, ks.log.observe
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ks.kc = proxy.NewKeyCache(o)
	t.Cleanup(ks.kc.Close)
	ks.mintTTL = func(sub string, ttl time.Duration) string {
		n := ks.clock.Now()
		return sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, map[string]any{
			"sub": sub, "iat": n.Unix(), "exp": n.Add(ttl).Unix(), "iss": origin, "aud": origin})
	}
	ks.mint = func(sub string) string { return ks.mintTTL(sub, time.Hour) }
	ks.stack = newStack(t, func(po *proxy.Options) {
		po.Verifier = proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
			Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
				Keys: ks.kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second, Now: ks.clock.Now,
			}),
			Keys: ks.kc, Size: 64, Leeway: 30 * time.Second, Now: ks.clock.Now,
		})
	})
	return ks, ks.kc.Load(context.Background())
}

// keyPaths are the three ways a token reaches the verifier.
func keyPaths(token string) []struct {
	name, path string
	hdr        []string
} {
	return []struct {
		name, path string
		hdr        []string
	}{
		{"business Bearer", "/api/tasks", bearer(token)},
		{"admin Bearer", "/api/admin/x", bearer(token)},
		{"websocket ?token=", "/ws/chat?token=" + url.QueryEscape(token), nil},
	}
}

// wantKeysUnavailable checks a refusal is 503 KEYS_UNAVAILABLE, never 401,
// and returns its Retry-After in seconds.
func wantKeysUnavailable(t *testing.T, r resp) int {
	t.Helper()
	if r.status != 503 || r.header.Get("Content-Type") != "application/json" || !strings.Contains(r.body, `"code":"KEYS_UNAVAILABLE"`) {
		t.Fatalf("got %d %q %s, want 503 JSON KEYS_UNAVAILABLE", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("503 carries WWW-Authenticate %q: clients would drop the token", r.header.Get("WWW-Authenticate"))
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want whole seconds >= 1", r.header.Get("Retry-After"))
	}
	return ra
}

// TestKeysUnavailableRecovers: a verifier whose key source is down from
// the start answers 503 KEYS_UNAVAILABLE on every token path, and recovers
// by itself once the source is back, through the retry loop alone.
func TestKeysUnavailableRecovers(t *testing.T) {
	ks, err := newKeysStack(t, proxy.KeyCacheOptions{RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 40 * time.Millisecond},
		func(s *staticKeys) { s.fail = true })
	if err == nil {
		t.Fatal("Load with the source down: got nil, want an error")
	}
	if ks.kc.Usable() {
		t.Fatal("Usable before any successful read: got true")
	}
	tok := ks.mint("user-1")
	for _, p := range keyPaths(tok) {
		t.Run(p.name, func(t *testing.T) {
			r := ks.do("GET", p.path, nil, p.hdr...)
			if ra := wantKeysUnavailable(t, r); ra != 1 {
				t.Errorf("Retry-After %d, want 1 (next retry within 40ms)", ra)
			}
			if got := ks.up.take(); len(got) != 0 {
				t.Fatalf("upstream received %d requests", len(got))
			}
		})
	}
	// The retries keep failing, with the source still down...
	ks.log.waitFor(t, "retry/error", 2)
	ks.src.set(func(s *staticKeys) { s.fail = false })
	// ...and the first one after it is back makes the keys usable.
	ks.log.waitFor(t, "retry/ok", 1)
	if !ks.kc.Usable() {
		t.Fatal("Usable after a successful retry: got false")
	}
	for _, path := range []string{"/api/tasks", "/ws/chat?token=" + url.QueryEscape(tok)} {
		hdr := bearer(tok)
		if strings.HasPrefix(path, "/ws/") {
			hdr = nil
		}
		if r := ks.do("GET", path, nil, hdr...); r.status != 200 {
			t.Fatalf("%s after recovery: got %d %s, want 200", path, r.status, r.body)
		}
	}
	// Requests never read the source: boot, then retries only.
	for _, s := range ks.log.all() {
		if !strings.HasPrefix(s, "boot/") && !strings.HasPrefix(s, "retry/") {
			t.Errorf("refresh %s: requests read the source while it was down", s)
		}
	}
	// The loop stops once a read succeeded: no read follows.
	reads := ks.src.readCount()
	time.Sleep(100 * time.Millisecond) // > 2 × RetryBackoffMax
	if got := ks.src.readCount(); got != reads {
		t.Errorf("%d reads after recovery, want none (the retry loop must stop)", got-reads)
	}
}

// TestKeysStaleIfError: once reads fail, the last good keys serve for
// StaleIfError after the last good read (cached tokens and full checks
// alike), then every token path answers 503 until a read succeeds.
func TestKeysStaleIfError(t *testing.T) {
	ks, err := newKeysStack(t, proxy.KeyCacheOptions{
		MaxAge: 10 * time.Minute, StaleIfError: time.Hour,
		RetryBackoff: 20 * time.Minute, RetryBackoffMax: time.Hour, // no retry fires during the test
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cached := ks.mintTTL("cached", 24*time.Hour) // verified once now: a cache hit later
	if r := ks.do("GET", "/api/tasks", nil, bearer(cached)...); r.status != 200 {
		t.Fatalf("boot: got %d %s", r.status, r.body)
	}
	ks.src.set(func(s *staticKeys) { s.fail = true })
	ks.clock.Add(11 * time.Minute)
	// Past MaxAge: a full check is served with the old key and starts a
	// background read, which fails. (A token cache hit reads no key and
	// starts nothing.)
	if r := ks.do("GET", "/api/tasks", nil, bearer(ks.mint("another"))...); r.status != 200 {
		t.Fatalf("past max_age: got %d %s", r.status, r.body)
	}
	ks.log.waitFor(t, "max_age/error", 1)

	tests := []struct {
		name    string
		advance time.Duration // from the last good read, in all
		status  int
	}{
		{"failing, 11m after the last good read", 11 * time.Minute, 200},
		{"failing, 59m after", 59 * time.Minute, 200},
		{"failing, 60m after (the window's edge)", 60 * time.Minute, 200},
		{"failing, 61m after", 61 * time.Minute, 503},
		{"failing, 5h after", 5 * time.Hour, 503},
	}
	start := ks.clock.Now().Add(-11 * time.Minute)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks.clock.Add(start.Add(tt.advance).Sub(ks.clock.Now()))
			// A fresh token (a full check) and the one verified at boot
			// (a token cache hit) get the same answer.
			for _, tok := range []string{ks.mint("fresh"), cached} {
				for _, p := range keyPaths(tok) {
					r := ks.do("GET", p.path, nil, p.hdr...)
					switch {
					case tt.status == 503:
						wantKeysUnavailable(t, r)
					case strings.HasPrefix(p.path, "/api/admin/"):
						if r.status != 403 { // verified; the user has no role
							t.Errorf("%s: got %d %s, want 403", p.path, r.status, r.body)
						}
					case r.status != tt.status:
						t.Errorf("%s: got %d %s, want %d", p.path, r.status, r.body, tt.status)
					}
				}
			}
			if got := ks.kc.Usable(); got != (tt.status == 200) {
				t.Errorf("Usable: got %v, want %v", got, tt.status == 200)
			}
			if got := ks.kc.Has("k1"); got != (tt.status == 200) {
				t.Errorf("Has(k1): got %v, want %v", got, tt.status == 200)
			}
		})
	}
	// A known kid never causes a read, in the window or past it.
	for _, s := range ks.log.all() {
		if strings.HasPrefix(s, "unknown_kid/") {
			t.Errorf("refresh %s: a known kid caused a read", s)
		}
	}
}

// TestTokenCacheHitNeedsUsableKeys: a token in the verified-token cache is
// not served once the key set is unusable; the caller gets the same
// ErrKeysUnavailable a full check gives.
func TestTokenCacheHitNeedsUsableKeys(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	log := newRefreshLog()
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, Now: c.Now, OnRefresh: log.observe, MaxAge: time.Minute, StaleIfError: 10 * time.Minute,
		RetryBackoff: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	inner := &countingVerifier{inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Now: c.Now})}
	v := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{Inner: inner, Keys: kc, Size: 64, Now: c.Now})
	n := c.Now()
	tok := sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1"}, map[string]any{
		"sub": "u1", "iat": n.Unix(), "exp": n.Add(24 * time.Hour).Unix(), "iss": origin, "aud": origin})
	ctx := context.Background()
	for range 2 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if inner.n.Load() != 1 {
		t.Fatalf("got %d full checks, want 1 (then a hit)", inner.n.Load())
	}
	src.set(func(s *staticKeys) { s.fail = true })
	c.Add(2 * time.Minute)
	kc.Lookup(ctx, "k1") // past MaxAge: starts the read that fails
	log.waitFor(t, "max_age/error", 1)
	c.Add(9 * time.Minute) // 11m after the last good read
	_, err := v.Verify(ctx, tok)
	var ae *proxy.AuthError
	if !errors.As(err, &ae) || ae.Reason != proxy.ReasonKeysUnavailable || !errors.Is(err, proxy.ErrKeysUnavailable) {
		t.Fatalf("cached token, keys stale past the window: got %v, want keys_unavailable wrapping ErrKeysUnavailable", err)
	}
}

// TestTokenCacheHitRefreshesAfterMaxAge: traffic that is all cache hits
// still re-reads the keys every MaxAge, so a key that left the set (a
// rotation's end, a replaced JWKS) stops verifying its cached tokens.
func TestTokenCacheHitRefreshesAfterMaxAge(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	log := newRefreshLog()
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, Now: c.Now, OnRefresh: log.observe, MaxAge: time.Minute, Cooldown: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	inner := &countingVerifier{inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Now: c.Now})}
	v := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{Inner: inner, Keys: kc, Size: 64, Now: c.Now})
	n := c.Now()
	tok := sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1"}, map[string]any{
		"sub": "u1", "iat": n.Unix(), "exp": n.Add(24 * time.Hour).Unix(), "iss": origin, "aud": origin})
	ctx := context.Background()
	for range 2 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	// The key leaves the source; only hits arrive.
	src.set(func(s *staticKeys) { s.keys = nil })
	c.Add(2 * time.Minute)
	v.Verify(ctx, tok) // a hit past MaxAge: starts the background read
	log.waitFor(t, "max_age/ok", 1)
	if _, err := v.Verify(ctx, tok); err == nil {
		t.Fatal("cached token whose key left the set: got accepted, want refused after the MaxAge re-read")
	}
	if inner.n.Load() != 2 {
		t.Errorf("got %d full checks, want 2 (the first, and the one after the key left)", inner.n.Load())
	}
}

// hangingKeys is a KeySource that, when told, fails or hangs until its
// context ends, as a JWKS server that accepts and never answers would.
type hangingKeys struct {
	keys  []proxy.Key
	hang  atomic.Bool
	fail  atomic.Bool
	calls atomic.Int64
}

func (h *hangingKeys) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	h.calls.Add(1)
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if h.fail.Load() {
		return nil, errors.New("source down")
	}
	return h.keys, nil
}

// TestUnknownKIDReadBounded: a miss on a source that hangs waits at most
// ReadTimeout, and misses that arrive meanwhile share that one read.
func TestUnknownKIDReadBounded(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	src := &hangingKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	c := &clock{t: time.Now()}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, ReadTimeout: 100 * time.Millisecond, RetryBackoff: time.Hour, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	src.hang.Store(true)
	c.Add(31 * time.Second) // past the cooldown
	before := src.calls.Load()
	var wg sync.WaitGroup
	start := time.Now()
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := kc.Lookup(context.Background(), "k2"); err == nil {
				t.Error("unknown kid on a hanging source: got a key")
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("20 misses on a hanging source took %v, want about ReadTimeout (100ms)", d)
	}
	if got := src.calls.Load() - before; got != 1 {
		t.Errorf("20 concurrent misses made %d reads, want 1", got)
	}
	// The failed read left the keys usable (StaleIfError zero: forever).
	if _, err := kc.Lookup(context.Background(), "k1"); err != nil {
		t.Errorf("known kid after a failed read: %v", err)
	}
}

// TestKeyCacheClose: Close ends a retry loop that waits and a read that
// hangs, promptly; afterwards no read is scheduled and Retry-After falls
// back to its default.
func TestKeyCacheClose(t *testing.T) {
	src := &hangingKeys{}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, ReadTimeout: time.Hour, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	src.fail.Store(true)
	if err := kc.Load(context.Background()); err == nil {
		t.Fatal("Load on a failing source: got nil")
	}
	// Now the retries hang in the source (ReadTimeout is an hour).
	src.hang.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for src.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { kc.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s: a background read outlives it")
	}
	_, err := kc.Lookup(context.Background(), "k1")
	if !errors.Is(err, proxy.ErrKeysUnavailable) {
		t.Fatalf("Lookup after Close, never loaded: got %v, want ErrKeysUnavailable", err)
	}
	calls := src.calls.Load()
	time.Sleep(50 * time.Millisecond) // > 5 × RetryBackoffMax
	if got := src.calls.Load(); got != calls {
		t.Errorf("%d reads after Close, want none", got-calls)
	}
}

// TestRetryAfterFollowsBackoff: Retry-After is the wait until the cache's
// next read, which the backoff decides (drawn from its upper half).
func TestRetryAfterFollowsBackoff(t *testing.T) {
	ks, err := newKeysStack(t, proxy.KeyCacheOptions{RetryBackoff: 20 * time.Second}, func(s *staticKeys) { s.fail = true })
	if err == nil {
		t.Fatal("Load: got nil, want an error")
	}
	r := ks.do("GET", "/api/tasks", nil, bearer(ks.mint("u"))...)
	if ra := wantKeysUnavailable(t, r); ra < 10 || ra > 20 {
		t.Errorf("Retry-After %d, want 10..20 (first backoff 20s, upper half)", ra)
	}
	ks.clock.Add(time.Hour) // the injected clock is past the scheduled read
	r = ks.do("GET", "/api/tasks", nil, bearer(ks.mint("u"))...)
	if ra := wantKeysUnavailable(t, r); ra != 1 {
		t.Errorf("Retry-After %d with the read overdue, want 1", ra)
	}
	ks.kc.Close()
	r = ks.do("GET", "/api/tasks", nil, bearer(ks.mint("u"))...)
	if ra := wantKeysUnavailable(t, r); ra != 5 {
		t.Errorf("Retry-After %d with no read scheduled (closed), want the default 5", ra)
	}
}

// TestKeysetUsableMetric: the gauge follows Usable, and background
// retries are counted under their own trigger.
func TestKeysetUsableMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg)
	pub, _, _ := ed25519.GenerateKey(nil)
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}, fail: true}
	log := newRefreshLog()
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 10 * time.Millisecond,
		OnRefresh: func(tr, res string) { m.ObserveRefresh(tr, res); log.observe(tr, res) },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	proxy.RegisterKeyCache(reg, func() *proxy.KeyCache { return kc })
	const help = "# HELP authsidecar_keyset_usable 1 when the key set may verify tokens; 0 when it was never loaded or reads have failed past stale_if_error (requests then get 503 KEYS_UNAVAILABLE).\n# TYPE authsidecar_keyset_usable gauge\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(help+"authsidecar_keyset_usable 0\n"), "authsidecar_keyset_usable"); err != nil {
		t.Errorf("before Load: %v", err)
	}
	kc.Load(context.Background())
	log.waitFor(t, "retry/error", 1)
	src.set(func(s *staticKeys) { s.fail = false })
	log.waitFor(t, "retry/ok", 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(help+"authsidecar_keyset_usable 1\n"), "authsidecar_keyset_usable"); err != nil {
		t.Errorf("after a successful retry: %v", err)
	}
	for _, l := range []struct{ trigger, result string }{{"boot", "error"}, {"retry", "error"}, {"retry", "ok"}} {
		if n := counterWith(t, reg, "authsidecar_keyset_refreshes_total", l.trigger, l.result); n < 1 {
			t.Errorf("refreshes{trigger=%q,result=%q}: got %v, want >= 1", l.trigger, l.result, n)
		}
	}
}

func counterWith(t *testing.T, reg *prometheus.Registry, name, trigger, result string) float64 {
	t.Helper()
	return metricValue(t, reg, name, "trigger", trigger, "result", result)
}
