package proxy

// The key cache's state machine. The published key set (one atomic
// pointer) is always in one of these states, judged at lookup time:
//
//	empty    no read has succeeded: not usable; lookups answer
//	         ErrKeysUnavailable (503), the retry loop owns the source.
//	fresh    read less than MaxAge ago: usable; lookups read nothing.
//	aged     read more than MaxAge ago: usable; the next lookup starts one
//	         background read (at most one per Cooldown).
//	failing  the last read failed: usable until StaleIfError after the
//	         last good read; the retry loop reads with backoff.
//	stale    failing for longer than StaleIfError: not usable (503) until
//	         a read succeeds.
//
// Transitions: a successful read (any trigger) makes the set fresh; a
// failed one keeps the keys and makes it failing; time alone moves fresh
// to aged and failing to stale. Who may read: Load (boot), a lookup of an
// unknown kid (at most once per Cooldown, shared by every waiter), a
// lookup of an aged set (in the background), the retry loop, and Prime (a
// cache not yet in service). Add (the issuer's new key) changes the keys
// but not the state. Close stops the background reads; the set stays as
// it is. Every read goes through read and publishLocked, one path.

import (
	"context"
	"crypto"
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
	KID string
	// Public is an Ed25519 key: what this sidecar and Better Auth sign
	// with, and the only kind Lookup (so the business-route verifier)
	// returns.
	Public ed25519.PublicKey
	// Provider is any other public key an identity provider's JWKS holds
	// (*rsa.PublicKey, *ecdsa.PublicKey); nil for an Ed25519 key. Only
	// LookupKey returns it: the business routes never verify with one.
	Provider crypto.PublicKey
	// Alg is the JWK's "alg" when it names one: a token signed with this
	// key must say the same. Empty: any algorithm of the key's type.
	Alg string
}

// KeySource returns the issuer's usable public keys. Each call is one key
// record read (full mode) or one JWKS fetch (verifier mode); the cache
// makes sure that happens rarely.
type KeySource interface {
	PublicKeys(ctx context.Context) ([]Key, error)
}

// Refresh triggers, for metrics and logs.
const (
	TriggerBoot       = "boot"
	TriggerMaxAge     = "max_age"
	TriggerUnknownKID = "unknown_kid"
	TriggerIssuer     = "issuer"
	// TriggerRetry is a background read after a failed one, repeated with
	// backoff until a read succeeds.
	TriggerRetry = "retry"
)

// ErrUnknownKID: the token names a key we do not have, and the cooldown
// forbids asking the source again yet.
var ErrUnknownKID = errors.New("unknown kid")

// ErrKeysUnavailable: the cache has no key set it may verify with, because
// no read of the source ever succeeded, or because reads have failed for
// longer than StaleIfError. No token can be judged now, good or bad, so
// the proxy answers 503, not 401: a 401 makes clients discard good tokens.
var ErrKeysUnavailable = errors.New("no usable verification keys")

// keysUnavailableError is ErrKeysUnavailable with the time until the
// cache's next read, for the Retry-After header.
type keysUnavailableError struct {
	why       string
	scheduled bool          // the retry loop will read again
	retryIn   time.Duration // when, from now (zero: due or running)
}

func (e *keysUnavailableError) Error() string { return ErrKeysUnavailable.Error() + ": " + e.why }

func (e *keysUnavailableError) Is(target error) bool { return target == ErrKeysUnavailable }

// KeyCacheOptions configures a KeyCache.
type KeyCacheOptions struct {
	// Source is read at boot, after MaxAge, on unknown kids, and again
	// with backoff after a failed read. Required.
	Source KeySource
	// MaxAge: keys older than this are re-read in the background. Zero: 10m.
	MaxAge time.Duration
	// Cooldown: the least time between two reads caused by unknown kids or
	// by MaxAge. Zero: 30s.
	Cooldown time.Duration
	// ReadTimeout bounds one source read. Zero: 5s.
	ReadTimeout time.Duration
	// StaleIfError is how long after the last successful read the keys
	// stay usable while reads keep failing; past it Lookup returns
	// ErrKeysUnavailable until a read succeeds. It only counts while the
	// last read failed: keys that are merely old (no request asked for a
	// refresh) stay usable. Set it above MaxAge, or the first failed
	// max-age read makes the keys unusable at once. Zero: forever, which
	// suits a local database as the source.
	StaleIfError time.Duration
	// RetryBackoff is the first wait before re-reading after a failed
	// read; each further failure doubles it, up to RetryBackoffMax. Each
	// wait is drawn at random from its upper half, so replicas started
	// together do not retry in step. Zero: 1s.
	RetryBackoff time.Duration
	// RetryBackoffMax caps the wait between retries: it bounds both the
	// load on a failing source and how long the cache stays behind once
	// the source is back. Zero: Cooldown (the least interval between the
	// cache's own reads the operator already chose). Never below
	// RetryBackoff.
	RetryBackoffMax time.Duration
	// OnRefresh observes every refresh attempt (trigger, result: "ok",
	// "error", "skipped_cooldown"). Zero: none.
	OnRefresh func(trigger, result string)
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// keySet is immutable once published.
type keySet struct {
	keys     map[string]Key
	loadedAt time.Time // the last successful read
	// loaded: a read of the source has succeeded. Keys Added before that
	// are held but not usable: the set is not known to be complete.
	loaded bool
}

// KeyCache holds the public keys in memory. Lookups are lock-free; reads
// of the source are rare and shared by concurrent callers.
//
// After a failed read the cache retries on its own, with backoff, until a
// read succeeds; Close stops those background reads.
type KeyCache struct {
	o   KeyCacheOptions
	set atomic.Pointer[keySet]
	// failing: the last read of the source failed. Only then does
	// StaleIfError count.
	failing atomic.Bool
	// nextRetry is when the retry loop reads next (UnixNano by o.Now),
	// zero when none is scheduled.
	nextRetry atomic.Int64
	// maxAge, cooldown and staleIfError are the options of those names,
	// changed by a config reload while lookups read them.
	maxAge, cooldown, staleIfError atomic.Int64

	// ctx is cancelled by Close; background reads run under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	lastRead  time.Time     // last attempt, for the cooldown
	inflight  chan struct{} // closed when the running read ends
	bgRunning bool
	retrying  bool // the retry loop runs
	closed    bool
	// addedDuring holds keys Added while a read runs: that read may have
	// started before the key was stored and must not drop it.
	addedDuring []Key
}

// NewKeyCache returns an empty cache; call Load before serving, and Close
// when done.
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
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	if o.RetryBackoffMax <= 0 {
		o.RetryBackoffMax = o.Cooldown
	}
	o.RetryBackoffMax = max(o.RetryBackoffMax, o.RetryBackoff)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &KeyCache{o: o}
	c.SetMaxAge(o.MaxAge)
	c.SetCooldown(o.Cooldown)
	c.SetStaleIfError(o.StaleIfError)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.set.Store(&keySet{keys: map[string]Key{}})
	return c
}

// SetMaxAge changes MaxAge (zero: 10m), for a config reload: the next
// lookup judges the held keys' age by it.
func (c *KeyCache) SetMaxAge(d time.Duration) {
	if d <= 0 {
		d = 10 * time.Minute
	}
	c.maxAge.Store(int64(d))
}

// SetCooldown changes Cooldown (zero: 30s), for a config reload. The
// retry backoff's cap stays what it was at NewKeyCache.
func (c *KeyCache) SetCooldown(d time.Duration) {
	if d <= 0 {
		d = 30 * time.Second
	}
	c.cooldown.Store(int64(d))
}

// SetStaleIfError changes StaleIfError (zero: forever), for a config
// reload: Usable judges the held keys by it from the next call.
func (c *KeyCache) SetStaleIfError(d time.Duration) { c.staleIfError.Store(int64(max(d, 0))) }

// Load reads the keys at boot: the contract's one key-record read, done
// at start so readiness is honest. If it fails the cache keeps retrying in
// the background, so a caller that may start without keys (verifier mode)
// can ignore the error and watch Usable.
func (c *KeyCache) Load(ctx context.Context) error {
	return c.refresh(context.WithoutCancel(ctx), TriggerBoot)
}

// Prime reads the source once, for a cache not yet in service, and keeps
// the keys if the read succeeds with at least one. It is Load for a caller
// that must not go on without keys: a config reload switching to a new
// JWKS URL checks the new source with it before the swap. A failure leaves
// the cache empty and unusable, starts no retry loop, and is neither
// logged nor counted as a refresh (the keys in force are another cache's
// and are untouched; the caller reports the refusal); a success counts as
// the cache's boot read. The read is bounded by ReadTimeout. Close the
// cache when it is not put in service.
func (c *KeyCache) Prime(ctx context.Context) error {
	keys, err := c.read(ctx)
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	if len(keys) == 0 {
		return errors.New("read keys: the source has no keys")
	}
	c.mu.Lock()
	c.lastRead = c.o.Now()
	c.publishLocked(keys, TriggerBoot)
	c.mu.Unlock()
	return nil
}

// read asks the source once, bounded by ReadTimeout. It is counted as the
// key set's work, not the request's (class keyset).
func (c *KeyCache) read(ctx context.Context) ([]Key, error) {
	rctx, cancel := context.WithTimeout(context.WithValue(ctx, infoKey{}, &RequestInfo{Class: ClassKeyset}), c.o.ReadTimeout)
	defer cancel()
	return c.o.Source.PublicKeys(rctx)
}

// publishLocked makes keys, with those Added while the read ran, the key
// set: fresh from now. c.mu must be held.
func (c *KeyCache) publishLocked(keys []Key, trigger string) {
	next := &keySet{keys: make(map[string]Key, len(keys)+len(c.addedDuring)), loadedAt: c.o.Now(), loaded: true}
	for _, k := range append(keys, c.addedDuring...) {
		next.keys[k.KID] = k
	}
	c.set.Store(next)
	c.failing.Store(false)
	c.observe(trigger, "ok")
}

// Close stops the background reads (retries and max-age refreshes) and
// waits for them to end. Lookups keep answering from the keys held, but
// the cache reads its source only for unknown kids from then on.
func (c *KeyCache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
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

// Usable reports whether the cache may verify tokens now: a read has
// succeeded, and if reads fail since, not longer than StaleIfError ago.
// It is the readiness of a verifier.
func (c *KeyCache) Usable() bool { return c.usable(c.set.Load()) }

// usable reads the clock only while reads fail and StaleIfError is set,
// so the hot path (Has on a token cache hit) stays two loads.
func (c *KeyCache) usable(s *keySet) bool {
	if !s.loaded {
		return false
	}
	stale := time.Duration(c.staleIfError.Load())
	if stale <= 0 || !c.failing.Load() {
		return true
	}
	return c.o.Now().Sub(s.loadedAt) <= stale
}

// unavailable returns the ErrKeysUnavailable for s, with the wait until
// the next scheduled read.
func (c *KeyCache) unavailable(s *keySet) error {
	e := &keysUnavailableError{why: "no read of the key source has succeeded"}
	if s.loaded {
		e.why = fmt.Sprintf("reads failing, last good read %s ago (stale_if_error %s)",
			c.o.Now().Sub(s.loadedAt).Round(time.Second), time.Duration(c.staleIfError.Load()))
	}
	if next := c.nextRetry.Load(); next != 0 {
		e.scheduled, e.retryIn = true, max(time.Unix(0, next).Sub(c.o.Now()), 0)
	}
	return e
}

// Has reports whether kid is in the key set now, without any refresh. It
// is false for every kid while the set is not usable, so the token cache
// serves no hit then.
func (c *KeyCache) Has(kid string) bool {
	s := c.set.Load()
	_, ok := s.keys[kid]
	return ok && c.usable(s)
}

// HasAt is Has for the token cache's hits, which read the clock anyway:
// a set older than MaxAge is refreshed in the background, as Lookup does,
// so a service whose traffic is all cache hits still re-reads its keys
// (and learns of a key that left the set) every MaxAge.
func (c *KeyCache) HasAt(kid string, now time.Time) bool {
	s := c.set.Load()
	if now.Sub(s.loadedAt) > time.Duration(c.maxAge.Load()) {
		c.refreshInBackground()
	}
	_, ok := s.keys[kid]
	return ok && c.usable(s)
}

// Add installs a key the issuer is about to sign with, so tokens signed
// with it verify at once instead of waiting out the cooldown.
func (c *KeyCache) Add(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.set.Load()
	next := &keySet{keys: make(map[string]Key, len(old.keys)+1), loadedAt: old.loadedAt, loaded: old.loaded}
	for kid, pk := range old.keys {
		next.keys[kid] = pk
	}
	next.keys[k.KID] = k
	c.set.Store(next)
	if c.inflight != nil {
		c.addedDuring = append(c.addedDuring, k)
	}
	c.observe(TriggerIssuer, "ok")
}

// Lookup returns the key for kid. A stale set is refreshed in the
// background; an unknown kid causes at most one source read per cooldown,
// shared by everyone who asks meanwhile. While the set is not usable it
// returns ErrKeysUnavailable at once and reads nothing: the retry loop
// owns the source then, and requests must not pile onto a dead one.
func (c *KeyCache) Lookup(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	k, err := c.LookupKey(ctx, kid)
	if err != nil {
		return nil, err
	}
	if k.Public == nil {
		// An identity provider's RSA or EC key: never a business route's.
		return nil, ErrUnknownKID
	}
	return k.Public, nil
}

// LookupKey is Lookup returning the whole Key, whatever its type: for
// identity providers' id tokens (package idp), with the same refresh,
// cooldown and staleness rules.
func (c *KeyCache) LookupKey(ctx context.Context, kid string) (Key, error) {
	s := c.set.Load()
	if !c.usable(s) {
		return Key{}, c.unavailable(s)
	}
	if c.o.Now().Sub(s.loadedAt) > time.Duration(c.maxAge.Load()) {
		c.refreshInBackground()
	}
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	if err := c.refreshForMiss(ctx); err != nil {
		return Key{}, err
	}
	s = c.set.Load()
	if !c.usable(s) { // the read failed and the window has closed meanwhile
		return Key{}, c.unavailable(s)
	}
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	return Key{}, ErrUnknownKID
}
