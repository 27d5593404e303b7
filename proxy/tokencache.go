package proxy

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// CachingVerifierOptions configures NewCachingVerifier.
type CachingVerifierOptions struct {
	// Inner verifies tokens the cache has not seen. Required.
	Inner Verifier
	// Keys says whether a cached token's key is still in the key set; a
	// token whose key left (rotation, AUTH_SECRET change) is refused at
	// once. KeyCache.Has is also false for every kid while the key set is
	// unusable (stale past stale_if_error, or never loaded): the hit then
	// falls through to Inner, whose key lookup fails with
	// ErrKeysUnavailable, so a hit answers exactly as a full check would.
	// HasAt also starts the MaxAge refresh a full check would. Required.
	Keys interface {
		HasAt(kid string, now time.Time) bool
	}
	// Size is the most tokens remembered (~200 bytes each). Zero: the
	// cache is off and Inner is returned as is.
	Size int
	// Leeway is the skew accepted on exp, as the inner verifier does.
	Leeway time.Duration
	// Metrics counts hits, misses and evictions. Zero: counted nowhere.
	Metrics *TokenCacheMetrics
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

// cachingVerifier remembers verified tokens by SHA-256 of the whole token,
// so a hit costs a hash and a map lookup instead of a signature check and
// JSON parsing. Only successes are stored: a failure costs an attacker a
// full verification every time and can never push good entries out.
// Eviction is FIFO per shard, which is enough: the working set (live
// tokens of active users) is far below Size in normal operation.
type cachingVerifier struct {
	inner Verifier
	keys  interface {
		HasAt(kid string, now time.Time) bool
	}
	leeway time.Duration
	now    func() time.Time
	shards [cacheShards]cacheShard
	m      *TokenCacheMetrics
}

const cacheShards = 32

type cacheShard struct {
	mu    sync.Mutex
	items map[[32]byte]Claims
	ring  [][32]byte // insertion order, for eviction; grows to limit
	next  int        // the ring slot to overwrite once the ring is full
	limit int
}

// TokenCacheMetrics counts the work of verified-token caches. One value
// serves every cache a process builds in turn (a config reload that
// changes the key source or issuer builds a new cache), so its counters
// never go back.
type TokenCacheMetrics struct {
	hits, misses, evictions atomic.Uint64
}

// NewTokenCacheMetrics registers the token cache metrics with reg. entries
// returns the tokens held now by the cache in force (see CachedTokens),
// called at scrape time.
func NewTokenCacheMetrics(reg prometheus.Registerer, entries func() int) *TokenCacheMetrics {
	m := &TokenCacheMetrics{}
	counter := func(name, help string, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	reg.MustRegister(
		counter("authsidecar_token_cache_hits_total", "Tokens found in the verified-token cache (no signature check needed).", m.hits.Load),
		counter("authsidecar_token_cache_misses_total", "Tokens verified in full (not in the cache).", m.misses.Load),
		counter("authsidecar_token_cache_evictions_total", "Verified tokens pushed out of the full cache.", m.evictions.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_token_cache_entries", Help: "Verified tokens held in the cache now (at most cache.verified_tokens).",
		}, func() float64 { return float64(entries()) }),
	)
	return m
}

// CachedTokens returns the tokens v's cache holds now: 0 when v is not a
// verifier NewCachingVerifier made with a cache. It locks every shard in
// turn: for scrapes, not for the request path.
func CachedTokens(v Verifier) int {
	if cv, ok := v.(*cachingVerifier); ok {
		return cv.len()
	}
	return 0
}

// NewCachingVerifier wraps o.Inner with a verified-token cache.
func NewCachingVerifier(o CachingVerifierOptions) Verifier {
	if o.Size <= 0 {
		return o.Inner
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = &TokenCacheMetrics{} // counted, never read: no nil checks on the hot path
	}
	v := &cachingVerifier{inner: o.Inner, keys: o.Keys, leeway: o.Leeway, now: o.Now, m: o.Metrics}
	per := max(1, o.Size/cacheShards)
	for i := range v.shards {
		// Nothing is allocated up front: a full-size cache made at start
		// was 14 MB of live heap that every GC cycle scanned, which cost
		// more CPU per request than the cache saves at a few hundred
		// users. The shards grow with the tokens actually seen.
		v.shards[i] = cacheShard{items: map[[32]byte]Claims{}, limit: per}
	}
	return v
}

// len counts the cached tokens, for the entries gauge (scrape time only).
func (v *cachingVerifier) len() int {
	n := 0
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		n += len(sh.items)
		sh.mu.Unlock()
	}
	return n
}

func (v *cachingVerifier) Verify(ctx context.Context, token string) (Claims, error) {
	// The hash reads the string in place: no copy on the hot path.
	key := sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
	sh := &v.shards[key[0]%cacheShards]
	sh.mu.Lock()
	c, ok := sh.items[key]
	sh.mu.Unlock()
	if ok {
		// A hit is re-checked: expiry moves with the clock, and a key that
		// left the set takes its tokens with it. nbf/iat matter only if the
		// clock is stepped back; then the token waits, as a miss would.
		now := v.now()
		if now.Add(v.leeway).Before(c.NotBefore) {
			return Claims{}, authErr(ReasonNotYetValid, nil)
		}
		live := now.Before(c.Expires.Add(v.leeway))
		if live && v.keys.HasAt(c.KID, now) {
			v.m.hits.Add(1)
			return c, nil
		}
		sh.mu.Lock()
		delete(sh.items, key)
		sh.mu.Unlock()
		if !live {
			return Claims{}, authErr(ReasonExpired, nil)
		}
	}
	v.m.misses.Add(1)
	c, err := v.inner.Verify(ctx, token)
	if err != nil {
		return c, err
	}
	sh.mu.Lock()
	if _, dup := sh.items[key]; !dup {
		// Every stored key sits in a ring slot, so overwriting the slot's
		// old key keeps the map within limit.
		if len(sh.ring) < sh.limit {
			sh.ring = append(sh.ring, key)
		} else {
			if old := sh.ring[sh.next]; old != ([32]byte{}) {
				if _, live := sh.items[old]; live {
					delete(sh.items, old)
					v.m.evictions.Add(1)
				}
			}
			sh.ring[sh.next] = key
			sh.next = (sh.next + 1) % sh.limit
		}
		sh.items[key] = c
	}
	sh.mu.Unlock()
	return c, nil
}
