package proxy

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Key is a public verification key.
type Key struct {
	KID    string
	Public ed25519.PublicKey
}

// KeySource returns the issuer's usable public keys. Each call is one key
// record read; the cache makes sure that happens rarely.
type KeySource interface {
	PublicKeys(ctx context.Context) ([]Key, error)
}

// Refresh triggers, for metrics and logs.
const (
	TriggerBoot       = "boot"
	TriggerMaxAge     = "max_age"
	TriggerUnknownKID = "unknown_kid"
	TriggerIssuer     = "issuer"
)

// ErrUnknownKID: the token names a key we do not have, and the cooldown
// forbids asking the source again yet.
var ErrUnknownKID = errors.New("unknown kid")

// KeyCacheOptions configures a KeyCache.
type KeyCacheOptions struct {
	// Source is read at boot, after MaxAge, and on unknown kids. Required.
	Source KeySource
	// MaxAge: keys older than this are re-read in the background. Zero: 10m.
	MaxAge time.Duration
	// Cooldown: the least time between two reads caused by unknown kids.
	// Zero: 30s.
	Cooldown time.Duration
	// ReadTimeout bounds one source read. Zero: 5s.
	ReadTimeout time.Duration
	// OnRefresh observes every refresh attempt (trigger, result: "ok",
	// "error", "skipped_cooldown"). Zero: none.
	OnRefresh func(trigger, result string)
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// keySet is immutable once published.
type keySet struct {
	keys     map[string]ed25519.PublicKey
	loadedAt time.Time
}

// KeyCache holds the public keys in memory. Lookups are lock-free; reads
// of the source are rare and shared by concurrent callers.
type KeyCache struct {
	o   KeyCacheOptions
	set atomic.Pointer[keySet]

	mu        sync.Mutex
	lastRead  time.Time     // last attempt, for the cooldown
	inflight  chan struct{} // closed when the running read ends
	bgRunning bool
	// addedDuring holds keys Added while a read runs: that read may have
	// started before the key was stored and must not drop it.
	addedDuring []Key
}

// NewKeyCache returns an empty cache; call Load before serving.
func NewKeyCache(o KeyCacheOptions) *KeyCache {
	if o.MaxAge == 0 {
		o.MaxAge = 10 * time.Minute
	}
	if o.Cooldown == 0 {
		o.Cooldown = 30 * time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &KeyCache{o: o}
	c.set.Store(&keySet{keys: map[string]ed25519.PublicKey{}})
	return c
}

// Load reads the keys at boot: the contract's one key-record read, done
// at start so readiness is honest.
func (c *KeyCache) Load(ctx context.Context) error {
	return c.refresh(ctx, TriggerBoot)
}

// Len returns the number of keys held.
func (c *KeyCache) Len() int { return len(c.set.Load().keys) }

// Age returns how long ago the keys were read (zero before the first read).
func (c *KeyCache) Age() time.Duration {
	s := c.set.Load()
	if s.loadedAt.IsZero() {
		return 0
	}
	return c.o.Now().Sub(s.loadedAt)
}

// Has reports whether kid is in the key set now, without any refresh.
func (c *KeyCache) Has(kid string) bool {
	_, ok := c.set.Load().keys[kid]
	return ok
}

// Add installs a key the issuer is about to sign with, so tokens signed
// with it verify at once instead of waiting out the cooldown.
func (c *KeyCache) Add(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.set.Load()
	next := &keySet{keys: make(map[string]ed25519.PublicKey, len(old.keys)+1), loadedAt: old.loadedAt}
	for kid, pk := range old.keys {
		next.keys[kid] = pk
	}
	next.keys[k.KID] = k.Public
	c.set.Store(next)
	if c.inflight != nil {
		c.addedDuring = append(c.addedDuring, k)
	}
	c.observe(TriggerIssuer, "ok")
}

// Lookup returns the key for kid. A stale set is refreshed in the
// background; an unknown kid causes at most one source read per cooldown,
// shared by everyone who asks meanwhile.
func (c *KeyCache) Lookup(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	s := c.set.Load()
	if c.o.Now().Sub(s.loadedAt) > c.o.MaxAge {
		c.refreshInBackground()
	}
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	if err := c.refreshForMiss(ctx); err != nil {
		return nil, err
	}
	if k, ok := c.set.Load().keys[kid]; ok {
		return k, nil
	}
	return nil, ErrUnknownKID
}

func (c *KeyCache) refreshForMiss(ctx context.Context) error {
	c.mu.Lock()
	if ch := c.inflight; ch != nil {
		c.mu.Unlock()
		select { // join the read already running
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !c.lastRead.IsZero() && c.o.Now().Sub(c.lastRead) < c.o.Cooldown {
		c.mu.Unlock()
		c.observe(TriggerUnknownKID, "skipped_cooldown")
		return ErrUnknownKID
	}
	c.mu.Unlock()
	c.refresh(ctx, TriggerUnknownKID)
	return nil
}

func (c *KeyCache) refreshInBackground() {
	c.mu.Lock()
	if c.bgRunning || c.inflight != nil || c.o.Now().Sub(c.lastRead) < c.o.Cooldown {
		c.mu.Unlock()
		return
	}
	c.bgRunning = true
	c.mu.Unlock()
	go func() {
		c.refresh(context.Background(), TriggerMaxAge)
		c.mu.Lock()
		c.bgRunning = false
		c.mu.Unlock()
	}()
}

// refresh reads the source once. A failed read keeps the old keys: a
// database hiccup must not turn into 401s for everyone.
func (c *KeyCache) refresh(ctx context.Context, trigger string) error {
	c.mu.Lock()
	if ch := c.inflight; ch != nil {
		c.mu.Unlock()
		<-ch
		return nil
	}
	ch := make(chan struct{})
	c.inflight = ch
	c.lastRead = c.o.Now()
	c.mu.Unlock()

	// The read outlives the request that caused it: other requests wait on it.
	// It is counted as the key set's work, not the request's (class keyset).
	rctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), infoKey{}, &RequestInfo{Class: ClassKeyset}), c.o.ReadTimeout)
	keys, err := c.o.Source.PublicKeys(rctx)
	cancel()

	c.mu.Lock()
	defer func() {
		c.inflight = nil
		c.addedDuring = nil
		close(ch)
		c.mu.Unlock()
	}()
	if err != nil {
		c.observe(trigger, "error")
		c.o.Logger.Error("key set refresh failed; keeping the previous keys", "trigger", trigger, "error", err.Error())
		return fmt.Errorf("refresh keys: %w", err)
	}
	next := &keySet{keys: make(map[string]ed25519.PublicKey, len(keys)), loadedAt: c.o.Now()}
	for _, k := range append(keys, c.addedDuring...) {
		next.keys[k.KID] = k.Public
	}
	c.set.Store(next)
	c.observe(trigger, "ok")
	c.o.Logger.Debug("key set refreshed", "trigger", trigger, "keys", len(keys))
	return nil
}

func (c *KeyCache) observe(trigger, result string) {
	if c.o.OnRefresh != nil {
		c.o.OnRefresh(trigger, result)
	}
}
