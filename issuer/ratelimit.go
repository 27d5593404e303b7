package issuer

import (
	"math"
	"net/http"
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

// maxLimiterKeys bounds each limiter table: a flood of distinct IPs or
// emails must not grow memory without end.
const maxLimiterKeys = 100_000

// limiter is a table of token buckets keyed by client IP or email.
type limiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

func newLimiter(r Rate, now func() time.Time) *limiter {
	if r.N <= 0 || r.Per <= 0 {
		return nil
	}
	return &limiter{limit: rate.Limit(float64(r.N) / r.Per.Seconds()), burst: r.N, now: now, keys: map[string]*rate.Limiter{}}
}

// allow takes one token for key; when none is left it says how long until
// one is.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
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

var errRateLimited = &apiError{status: http.StatusTooManyRequests, code: "TOO_MANY_REQUESTS", message: "Too many requests. Please try again later."}

// tooMany answers 429 with Retry-After (and Better Auth's X-Retry-After).
func tooMany(w http.ResponseWriter, wait time.Duration) *apiError {
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", secs)
	w.Header().Set("X-Retry-After", secs)
	return errRateLimited
}
