package issuer

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is N events per Per. The zero value means no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// Bucket is a token bucket as a store keeps it: Tokens left at At.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Take takes one token from b at now: a bucket holds at most r.N tokens
// and refills at r.N per r.Per; a missing bucket (found false) is full.
// It returns the bucket to store and, when no whole token was left, how
// long until one is (nothing is taken then). Stores call it inside the
// transaction that read b, so the arithmetic lives in one place.
func (r Rate) Take(b Bucket, found bool, now time.Time) (next Bucket, wait time.Duration) {
	burst := float64(r.N)
	tokens := burst
	if found {
		tokens = b.Tokens
		if el := now.Sub(b.At); el > 0 {
			tokens += el.Seconds() * burst / r.Per.Seconds()
		}
		tokens = min(tokens, burst)
	}
	// A replica whose clock runs behind must not move the bucket back in
	// time: the next reader would count the difference as refill.
	at := now
	if found && b.At.After(now) {
		at = b.At
	}
	if tokens >= 1 {
		return Bucket{Tokens: tokens - 1, At: at}, 0
	}
	wait = time.Duration((1 - tokens) * float64(r.Per) / burst)
	return Bucket{Tokens: tokens, At: at}, max(wait, time.Millisecond)
}

// sharedLimiter keeps its buckets in the store, so a limit holds across
// every replica on the database: guesses at one account's password spread
// over N replicas get no more tries than against one.
type sharedLimiter struct {
	store  Store
	rate   Rate
	prefix string // namespaces the keys of one limit in the shared table
	now    func() time.Time
}

func newSharedLimiter(store Store, r Rate, prefix string, now func() time.Time) *sharedLimiter {
	if r.N <= 0 || r.Per <= 0 {
		return nil
	}
	return &sharedLimiter{store: store, rate: r, prefix: prefix, now: now}
}

// allow takes one token for key; err means the store could not answer,
// and the caller fails closed.
func (l *sharedLimiter) allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if l == nil {
		return true, 0, nil
	}
	wait, err := l.store.TakeToken(ctx, l.prefix+key, l.rate, l.now())
	if err != nil {
		return false, 0, err
	}
	return wait == 0, wait, nil
}

// maxLimiterKeys bounds each limiter table: a flood of distinct IPs or
// emails must not grow memory without end.
const maxLimiterKeys = 100_000

// limiter is a table of token buckets keyed by client IP: an IPv4
// address, or the IPv6 prefix of v6Bits bits the address is in (one
// ordinary IPv6 client holds a whole /64 and could otherwise take a fresh
// bucket with every request).
type limiter struct {
	rate   Rate
	v6Bits int
	limit  rate.Limit
	burst  int
	now    func() time.Time

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

func newLimiter(r Rate, v6Bits int, now func() time.Time) *limiter {
	if r.N <= 0 || r.Per <= 0 {
		return nil
	}
	return &limiter{rate: r, v6Bits: v6Bits, limit: rate.Limit(float64(r.N) / r.Per.Seconds()), burst: r.N, now: now, keys: map[string]*rate.Limiter{}}
}

// keepLimiter is old when it already limits r with v6Bits, so a reload
// that leaves a limit alone keeps its buckets (a flood does not start
// afresh), and a new limiter otherwise.
func keepLimiter(old *limiter, r Rate, v6Bits int, now func() time.Time) *limiter {
	if old != nil && old.rate == r && old.v6Bits == v6Bits {
		return old
	}
	return newLimiter(r, v6Bits, now)
}

// allow takes one token for ip's bucket; when none is left it says how
// long until one is.
func (l *limiter) allow(ip string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	key := clientKey(ip, l.v6Bits)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= maxLimiterKeys {
			l.sweep(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep forgets buckets that have refilled (they carry no state worth
// keeping); if that frees nothing, it forgets half the table rather than
// grow: an attacker cycling keys only resets limits it was not near.
func (l *limiter) sweep(now time.Time) {
	for k, lim := range l.keys {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= maxLimiterKeys {
		n := 0
		for k := range l.keys {
			if n%2 == 0 {
				delete(l.keys, k)
			}
			n++
		}
	}
}

// clientKey is the bucket an IP address's requests share: the address
// itself for IPv4 (and IPv4-mapped IPv6), the enclosing prefix of v6Bits
// bits for IPv6. Anything that does not parse is its own key.
func clientKey(ip string, v6Bits int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if !a.Is6() || v6Bits <= 0 || v6Bits >= 128 {
		return a.WithZone("").String()
	}
	p, err := a.WithZone("").Prefix(v6Bits)
	if err != nil {
		return ip
	}
	return p.String()
}

var errRateLimited = &apiError{status: http.StatusTooManyRequests, code: "TOO_MANY_REQUESTS", message: "Too many requests. Please try again later."}

// errLockedOut is errRateLimited for the per-email sign-in limit, which
// refuses the right password too: the same answer to the client, its own
// result in the metrics (an attack on one account shows there).
var errLockedOut = &apiError{status: errRateLimited.status, code: errRateLimited.code, message: errRateLimited.message}

// tooMany answers 429 with Retry-After (and Better Auth's X-Retry-After).
func tooMany(w http.ResponseWriter, wait time.Duration) *apiError {
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", secs)
	w.Header().Set("X-Retry-After", secs)
	return errRateLimited
}
