package revocation_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const ttl = 30*24*time.Hour + 30*time.Second

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newSet(c *clock) *revocation.Set {
	return revocation.NewSet(revocation.SetOptions{TTL: ttl, Usable: true, Now: c.now})
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func TestCheck(t *testing.T) {
	c := &clock{t0}
	s := newSet(c)
	cut := t0.Add(-time.Hour)
	s.Add(
		revocation.Record{Kind: revocation.KindSession, Subject: "sess-a", At: cut}.Entry(),
		revocation.Record{Kind: revocation.KindUser, Subject: "user-b", At: cut}.Entry(),
	)
	for _, tc := range []struct {
		name     string
		sid, sub string
		issued   time.Time
		want     error
	}{
		{"ended session, issued before", "sess-a", "user-a", cut.Add(-time.Minute), revocation.ErrRevoked},
		// A replica whose clock runs ahead could stamp a token of the
		// session after it ended: the session's tokens go all the same.
		{"ended session, stamped after", "sess-a", "user-a", cut.Add(time.Minute), revocation.ErrRevoked},
		{"another session", "sess-x", "user-a", cut.Add(-time.Minute), nil},
		{"no sid", "", "user-a", cut.Add(-time.Minute), nil},
		{"user cutoff, issued before", "sess-y", "user-b", cut.Add(-time.Second), revocation.ErrRevoked},
		{"user cutoff, issued at it", "sess-y", "user-b", cut, revocation.ErrRevoked},
		// The same second, a millisecond later: a new sign-in works.
		{"user cutoff, issued 1ms after", "sess-y", "user-b", cut.Add(time.Millisecond), nil},
		{"another user", "sess-y", "user-c", cut.Add(-time.Second), nil},
		// The sid's key is not the user's: a session id equal to a user
		// id matches nothing.
		{"session id as user id", "user-b", "user-z", cut.Add(-time.Second), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Check(revocation.TokenOf(tc.sid, tc.sub, tc.issued)); !errors.Is(got, tc.want) && got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	s.Add(revocation.Entry{Kind: revocation.KindAll, At: ms(cut)})
	for _, tc := range []struct {
		issued time.Time
		want   error
	}{{cut, revocation.ErrRevoked}, {cut.Add(-time.Hour), revocation.ErrRevoked}, {cut.Add(time.Millisecond), nil}} {
		if got := s.Check(revocation.TokenOf("s", "u", tc.issued)); got != tc.want {
			t.Errorf("global cutoff, token issued %v: got %v, want %v", tc.issued.Sub(cut), got, tc.want)
		}
	}
	if got, want := s.Cutoff(revocation.UserKey("user-b")), ms(cut); got != want {
		t.Errorf("Cutoff: got %d, want %d", got, want)
	}
	if got := s.Len(); got != 3 {
		t.Errorf("Len: got %d, want 3", got)
	}
}

func TestLaterCutoffWins(t *testing.T) {
	c := &clock{t0}
	s := newSet(c)
	u := revocation.UserKey("u")
	s.Add(revocation.Entry{Kind: revocation.KindUser, Key: u, At: ms(t0)})
	s.Add(revocation.Entry{Kind: revocation.KindUser, Key: u, At: ms(t0.Add(-time.Hour))}) // an older one, later
	if s.Check(revocation.Token{User: u, IssuedAt: ms(t0)}) != revocation.ErrRevoked {
		t.Error("an older cutoff added later replaced the newer one")
	}
	if s.Len() != 1 {
		t.Errorf("one user's two cutoffs: got %d entries, want 1", s.Len())
	}
}

func TestUnusable(t *testing.T) {
	s := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	err := s.Check(revocation.TokenOf("s", "u", t0))
	var ue *revocation.UnavailableError
	if !errors.Is(err, revocation.ErrUnavailable) || !errors.As(err, &ue) {
		t.Fatalf("a set never synced: got %v, want ErrUnavailable", err)
	}
	s.MarkUsable()
	if err := s.Check(revocation.TokenOf("s", "u", t0)); err != nil {
		t.Fatalf("after MarkUsable: got %v", err)
	}
	s.MarkUnusable(&revocation.UnavailableError{Why: "feed down", RetryIn: 3 * time.Second})
	if err := s.Check(revocation.TokenOf("s", "u", t0)); !errors.As(err, &ue) || ue.RetryIn != 3*time.Second {
		t.Fatalf("after MarkUnusable: got %v", err)
	}
}

// TestAgainstMap adds random batches (through delta merges into the base)
// and checks every key against a plain map, then sweeps with the clock
// moved past half of them.
func TestAgainstMap(t *testing.T) {
	c := &clock{t0}
	s := newSet(c)
	r := rand.New(rand.NewPCG(1, 2))
	want := map[revocation.Kind]map[uint64]int64{revocation.KindSession: {}, revocation.KindUser: {}}
	var keys []uint64
	for batch := range 300 {
		var es []revocation.Entry
		for range 1 + r.IntN(200) {
			k := r.Uint64() | 1
			if len(keys) > 0 && r.IntN(10) == 0 {
				k = keys[r.IntN(len(keys))] // a key seen before
			}
			keys = append(keys, k)
			kind := revocation.KindSession
			if r.IntN(4) == 0 {
				kind = revocation.KindUser
			}
			at := ms(t0) - int64(r.IntN(int(ttl.Milliseconds()))) + int64(batch)
			es = append(es, revocation.Entry{Kind: kind, Key: k, At: at})
			if old, ok := want[kind][k]; !ok || at > old {
				want[kind][k] = at
			}
		}
		s.Add(es...)
	}
	check := func(live int64) {
		t.Helper()
		n := 0
		for _, k := range keys {
			_, sess := want[revocation.KindSession][k]
			sess = sess && want[revocation.KindSession][k] >= live
			if got := s.Revoked(revocation.Token{Session: k, User: 1, IssuedAt: 1 << 62}); got != sess {
				t.Fatalf("session key %x: got %v, want %v", k, got, sess)
			}
			at, user := want[revocation.KindUser][k]
			user = user && at >= live
			if user {
				if !s.Revoked(revocation.Token{User: k, IssuedAt: at}) || s.Revoked(revocation.Token{User: k, IssuedAt: at + 1}) {
					t.Fatalf("user key %x: the cutoff is not exactly %d", k, at)
				}
			} else if s.Revoked(revocation.Token{User: k, IssuedAt: 0}) {
				t.Fatalf("user key %x: revoked, want not held", k)
			}
		}
		for _, m := range want {
			for _, at := range m {
				if at >= live {
					n++
				}
			}
		}
		if s.Len() != n {
			t.Errorf("Len: got %d, want %d", s.Len(), n)
		}
	}
	check(0)
	// Half the TTL later, the older half is swept.
	c.t = t0.Add(ttl / 2)
	s.Sweep()
	check(ms(c.t) - ttl.Milliseconds())
}

func TestPage(t *testing.T) {
	c := &clock{t0}
	s := newSet(c)
	var es []revocation.Entry
	for i := range 10000 {
		es = append(es, revocation.Entry{Kind: revocation.KindSession, Key: uint64(i)*7919 + 1, At: ms(t0)})
	}
	s.Add(es[:9000]...)
	s.Add(es[9000:]...) // some in the delta
	seen := map[uint64]bool{}
	var after uint64
	for pages := 0; ; pages++ {
		page, more := s.Page(revocation.KindSession, after, 999)
		for _, e := range page {
			if e.Key <= after || seen[e.Key] {
				t.Fatalf("page order: key %d after %d", e.Key, after)
			}
			seen[e.Key], after = true, e.Key
		}
		if !more {
			break
		}
		if pages > 20 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != len(es) {
		t.Errorf("pages held %d keys, want %d", len(seen), len(es))
	}
}

// TestMemoryPerMillion: a million revocations (nine in ten sign-outs, one
// in ten user cutoffs) fit in 16 MiB of heap.
func TestMemoryPerMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a million entries")
	}
	c := &clock{t0}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	s := newSet(c)
	gen := newMillion(c.t)
	for range 100 { // as polls bring them
		s.Add(gen(10000)...)
	}
	used := int64(heap()) - int64(before)
	runtime.KeepAlive(s)
	t.Logf("MEASURE revocation set: %d entries in %.2f MiB of heap (%.1f bytes each; arrays %.2f MiB)",
		s.Len(), float64(used)/(1<<20), float64(used)/float64(s.Len()), float64(s.Bytes())/(1<<20))
	if s.Len() != 1_000_000 {
		t.Fatalf("got %d entries, want 1000000", s.Len())
	}
	if used > 16<<20 {
		t.Errorf("a million revocations take %.2f MiB of heap, want at most 16 MiB", float64(used)/(1<<20))
	}
}

// newMillion returns a generator of entries over the last 30 days, nine
// in ten sessions and one in ten user cutoffs, n at a time.
func newMillion(now time.Time) func(n int) []revocation.Entry {
	r := rand.New(rand.NewPCG(3, 4))
	i := 0
	return func(n int) []revocation.Entry {
		es := make([]revocation.Entry, n)
		for j := range es {
			kind := revocation.KindSession
			if i%10 == 0 {
				kind = revocation.KindUser
			}
			i++
			es[j] = revocation.Entry{Kind: kind, Key: r.Uint64() | 1, At: ms(now) - int64(r.IntN(int((30 * 24 * time.Hour).Milliseconds())))}
		}
		return es
	}
}

// BenchmarkCheck is the revocation check of one token, with 0 and a
// million revocations held: the hot path's added cost. "cold" cycles
// through 64k tokens, so lookups miss the CPU caches as a busy sidecar's
// would.
func BenchmarkCheck(b *testing.B) {
	c := &clock{t0}
	for _, n := range []int{0, 1_000_000} {
		s := newSet(c)
		if n > 0 {
			s.Add(newMillion(c.t)(1_000_000)...)
		}
		toks := make([]revocation.Token, 1<<16)
		for i := range toks {
			toks[i] = revocation.TokenOf(fmt.Sprintf("session-%d", i), fmt.Sprintf("user-%d", i), t0)
		}
		b.Run(fmt.Sprintf("held=%d/hot", n), func(b *testing.B) {
			for b.Loop() {
				if s.Check(toks[0]) != nil {
					b.Fatal("revoked")
				}
			}
		})
		b.Run(fmt.Sprintf("held=%d/cold", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if s.Check(toks[i&(1<<16-1)]) != nil {
					b.Fatal("revoked")
				}
				i++
			}
		})
	}
}

// TestKeyAtOrBelow: the largest key held at or below a key, across the
// base layer and the delta, as a scan of every key finds it.
func TestKeyAtOrBelow(t *testing.T) {
	s := newSet(&clock{t0})
	rng := rand.New(rand.NewPCG(1, 2))
	var held []uint64
	add := func(n int) {
		es := make([]revocation.Entry, n)
		for i := range es {
			es[i] = revocation.Entry{Kind: revocation.KindSession, Key: rng.Uint64() | 1, At: ms(t0)}
			held = append(held, es[i].Key)
		}
		s.Add(es...)
	}
	add(5000) // merged into the base
	add(10)   // kept in the delta
	s.Add(revocation.Entry{Kind: revocation.KindUser, Key: 7, At: ms(t0)})
	want := func(k uint64) uint64 {
		var w uint64
		for _, h := range held {
			if h <= k && h > w {
				w = h
			}
		}
		return w
	}
	probes := []uint64{0, 1, ^uint64(0)}
	for _, h := range held[len(held)-20:] { // base and delta keys, and either side
		probes = append(probes, h, h-1, h+1)
	}
	for _, k := range probes {
		if got := s.KeyAtOrBelow(revocation.KindSession, k); got != want(k) {
			t.Errorf("KeyAtOrBelow(session, %x): got %x, want %x", k, got, want(k))
		}
	}
	if got := s.KeyAtOrBelow(revocation.KindUser, 100); got != 7 {
		t.Errorf("KeyAtOrBelow(user, 100): got %d, want 7 (the user key, not a session's)", got)
	}
}
