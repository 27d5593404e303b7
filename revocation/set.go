package revocation

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRevoked: the token was revoked. The proxy answers 401.
var ErrRevoked = errors.New("token revoked")

// ErrUnavailable: the set may not judge tokens now, because it was never
// synced or its source has failed past the staleness bound. The token
// may be good: the proxy answers 503 with Retry-After, never 401.
var ErrUnavailable = errors.New("revocations unavailable")

// UnavailableError is ErrUnavailable with the time until the next sync
// attempt, for Retry-After.
type UnavailableError struct {
	Why     string
	RetryIn time.Duration // zero: unknown
}

func (e *UnavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.Why }

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Set holds the live revocations in memory. Check is lock-free and never
// blocks: it reads an immutable state that Add and Replace swap whole.
//
// Each kind keeps a large base layer and a small delta: a poll's few new
// entries are merged into the delta, and the delta into the base only once
// it has grown past a sixty-fourth of it, so a poll costs a copy of the
// delta, not of a million entries.
type Set struct {
	ttl int64 // ms: an entry is dropped ttl after its time
	now func() time.Time

	cur atomic.Pointer[state]
	// unusable holds why Check refuses every token (nil: it judges them).
	unusable atomic.Pointer[UnavailableError]

	mu      sync.Mutex // serializes writers
	changed chan struct{}
}

// state is one immutable version of the set.
type state struct {
	sessions, users tier
	all             int64 // the latest global cutoff, ms; 0 none
}

type tier struct {
	base, delta *layer
	dups        int // keys in both: counted once by len
}

func (t tier) get(k uint64) (int64, bool) {
	if at, ok := t.delta.get(k); ok {
		if bat, ok := t.base.get(k); ok {
			return max(at, bat), true
		}
		return at, true
	}
	return t.base.get(k)
}

func (t tier) len() int { return t.base.len() + t.delta.len() - t.dups }

var emptyTier = tier{base: emptyLayer, delta: emptyLayer}

// minDelta is the least size at which a delta is merged into its base.
const minDelta = 4096

// SetOptions configures NewSet.
type SetOptions struct {
	// TTL is how long after its time an entry can still cover a live
	// token: jwt_ttl plus the leeway. Required.
	TTL time.Duration
	// Usable makes a new set judge tokens at once. Zero: it refuses every
	// token with ErrUnavailable until MarkUsable, which a syncer calls
	// once its first complete sync is in.
	Usable bool
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

// NewSet returns an empty set.
func NewSet(o SetOptions) *Set {
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Set{ttl: o.TTL.Milliseconds(), now: o.Now, changed: make(chan struct{})}
	s.cur.Store(&state{sessions: emptyTier, users: emptyTier})
	if !o.Usable {
		s.unusable.Store(&UnavailableError{Why: "not synced yet"})
	}
	return s
}

// Check returns nil when t may be used, ErrRevoked when a revocation
// covers it, and an *UnavailableError when the set may not judge it.
func (s *Set) Check(t Token) error {
	if e := s.unusable.Load(); e != nil {
		return e
	}
	if s.revoked(s.cur.Load(), t) {
		return ErrRevoked
	}
	return nil
}

// Revoked reports whether a revocation held covers t, usable or not.
func (s *Set) Revoked(t Token) bool { return s.revoked(s.cur.Load(), t) }

func (s *Set) revoked(st *state, t Token) bool {
	if st.all != 0 && t.IssuedAt <= st.all {
		return true
	}
	if t.Session != 0 {
		// Every token of an ended session, whatever its time: one minted
		// on a replica whose clock runs ahead is no less the session's.
		if _, ok := st.sessions.get(t.Session); ok {
			return true
		}
	}
	at, ok := st.users.get(t.User)
	return ok && t.IssuedAt <= at
}

// Cutoff returns the latest cutoff covering the tokens of the user with
// key user: the user's own or the global one, 0 when none. The issuer
// reads it to stamp a token issued in the cutoff's own millisecond after
// it.
func (s *Set) Cutoff(user uint64) int64 {
	st := s.cur.Load()
	at, _ := st.users.get(user)
	return max(at, st.all)
}

// MarkUsable makes Check judge tokens; MarkUnusable makes it refuse them
// all with e. A syncer calls them as its source succeeds and fails.
func (s *Set) MarkUsable() { s.unusable.Store(nil) }

// MarkUnusable: see MarkUsable.
func (s *Set) MarkUnusable(e *UnavailableError) { s.unusable.Store(e) }

// Usable reports whether Check judges tokens.
func (s *Set) Usable() bool { return s.unusable.Load() == nil }

// Len returns the number of entries held (a global cutoff is one).
func (s *Set) Len() int {
	st := s.cur.Load()
	n := st.sessions.len() + st.users.len()
	if st.all != 0 {
		n++
	}
	return n
}

// Changed returns a channel closed at the next change of the set: an
// open WebSocket tunnel waits on it to check its token again.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Add puts entries in the set. An entry already past its TTL is ignored.
func (s *Set) Add(entries ...Entry) {
	if len(entries) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.now().UnixMilli() - s.ttl
	old := s.cur.Load()
	next := *old
	sess, users, all := split(entries, live)
	next.all = max(next.all, all)
	next.sessions = old.sessions.add(sortPairs(sess), live)
	next.users = old.users.add(sortPairs(users), live)
	s.publish(&next)
}

// split sorts entries by kind, leaving out those older than live: the
// session and user pairs, and the latest cutoff for all (0: none).
func split(entries []Entry, live int64) (sess, users []pair, all int64) {
	for _, e := range entries {
		switch {
		case e.At < live:
		case e.Kind == KindSession:
			sess = append(sess, pair{e.Key, e.At})
		case e.Kind == KindUser:
			users = append(users, pair{e.Key, e.At})
		case e.Kind == KindAll:
			all = max(all, e.At)
		}
	}
	return sess, users, all
}

func (t tier) add(p []pair, live int64) tier {
	if len(p) == 0 {
		return t
	}
	dups := t.dups
	for _, x := range p {
		if _, ok := t.delta.get(x.key); !ok {
			if _, ok := t.base.get(x.key); ok {
				dups++
			}
		}
	}
	delta := t.delta.merge(p, live)
	if len(delta) < max(minDelta, t.base.len()/64) {
		// Entries past their TTL are dropped from the delta, and only
		// sweep drops them from the base: dups may count a few of those,
		// until the next merge.
		return tier{t.base, newLayer(delta), dups}
	}
	return tier{newLayer(t.base.merge(delta, live)), emptyLayer, 0}
}

// Replace makes entries the whole content of the set (a verifier's full
// sync from the feed).
func (s *Set) Replace(entries []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.now().UnixMilli() - s.ttl
	sess, users, all := split(entries, live)
	next := &state{sessions: emptyTier, users: emptyTier, all: all}
	next.sessions.base = newLayer(sortPairs(sess))
	next.users.base = newLayer(sortPairs(users))
	s.publish(next)
}

// Sweep drops the entries past their TTL, when there are any: a rebuild
// of a tier only when its oldest entry has expired.
func (s *Set) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.now().UnixMilli() - s.ttl
	old := s.cur.Load()
	next := *old
	if next.all < live {
		next.all = 0
	}
	next.sessions, next.users = old.sessions.sweep(live), old.users.sweep(live)
	if next != *old {
		s.publish(&next)
	}
}

func (t tier) sweep(live int64) tier {
	if (t.base.len() == 0 || t.base.minAt >= live) && (t.delta.len() == 0 || t.delta.minAt >= live) {
		return t
	}
	return tier{newLayer(t.base.merge(t.delta.merge(nil, live), live)), emptyLayer, 0}
}

// publish swaps next in and wakes the waiters. Called with s.mu held.
func (s *Set) publish(next *state) {
	s.cur.Store(next)
	close(s.changed)
	s.changed = make(chan struct{})
}

// tier returns the tier of kind (KindSession or KindUser).
func (st *state) tier(kind Kind) tier {
	if kind == KindUser {
		return st.users
	}
	return st.sessions
}

// Page returns up to limit entries of kind (KindSession or KindUser) with
// keys above after, in key order, from one version of the set, and
// whether more follow: the feed's full sync, a page at a time. The
// global cutoff is GlobalCutoff.
func (s *Set) Page(kind Kind, after uint64, limit int) (entries []Entry, more bool) {
	t := s.cur.Load().tier(kind)
	b, d := t.base.search(after), t.delta.search(after)
	for len(entries) < limit && (b < t.base.len() || d < t.delta.len()) {
		var p pair
		switch {
		case d == t.delta.len() || (b < t.base.len() && t.base.keys[b] < t.delta.keys[d]):
			p = pair{t.base.keys[b], t.base.at(b)}
			b++
		case b == t.base.len() || t.delta.keys[d] < t.base.keys[b]:
			p = pair{t.delta.keys[d], t.delta.at(d)}
			d++
		default:
			p = pair{t.delta.keys[d], max(t.base.at(b), t.delta.at(d))}
			b++
			d++
		}
		entries = append(entries, Entry{Kind: kind, Key: p.key, At: p.at})
	}
	return entries, b < t.base.len() || d < t.delta.len()
}

// KeyAtOrBelow returns the largest key of kind held that is at most key,
// 0 when none: the real position a full sync's cursor stands for (a page
// after a key the set does not hold lists what the page after this one
// does).
func (s *Set) KeyAtOrBelow(kind Kind, key uint64) uint64 {
	t := s.cur.Load().tier(kind)
	var k uint64
	if b := t.base.search(key); b > 0 {
		k = t.base.keys[b-1]
	}
	if d := t.delta.search(key); d > 0 {
		k = max(k, t.delta.keys[d-1])
	}
	return k
}

// GlobalCutoff returns the latest global cutoff held, 0 when none.
func (s *Set) GlobalCutoff() int64 { return s.cur.Load().all }

// Bytes is what the set's arrays hold now, for the memory gauge and docs.
func (s *Set) Bytes() int {
	st := s.cur.Load()
	return st.sessions.base.bytes() + st.sessions.delta.bytes() + st.users.base.bytes() + st.users.delta.bytes()
}
