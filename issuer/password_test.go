package issuer

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHasherCollectsAndReleases: a hash that starts after another ended
// collects first unless a collection has run since (the dead buffer's pages
// are reused rather than the heap grown); a burst that ran hashes side by
// side hands the memory back to the OS before its last hash returns; a
// lone hash's buffer lingers for the next one, then goes back too.
func TestHasherCollectsAndReleases(t *testing.T) {
	h := newHasher(ScryptParams{N: 4096, R: 8, P: 1}, 2) // 4 MiB: the smallest buffer the steps are for
	h.linger = 50 * time.Millisecond
	var collected, released atomic.Int32
	var cycles atomic.Uint64
	h.collect = func() { collected.Add(1); cycles.Add(2) }
	h.cycles = cycles.Load
	h.release = func() { released.Add(1) }
	h.heap = func() (uint64, uint64) { return 1 << 40, 0 } // every new buffer took the dead one's pages
	ctx := context.Background()
	waitReleased := func(want int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); released.Load() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n := released.Load(); n != want {
			t.Fatalf("released %d times, want %d", n, want)
		}
	}

	// A trickle: the second hash reuses the first's buffer (one
	// collection, no release between); the release comes linger after
	// the last.
	stored, err := h.hash(ctx, "pw-one")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.verify(ctx, "pw-one", stored); err != nil || !ok {
		t.Fatalf("verify: %t %v", ok, err)
	}
	if c, r := collected.Load(), released.Load(); c != 1 || r != 0 {
		t.Errorf("two hashes in a row: collected %d, released %d; want 1 and 0", c, r)
	}
	waitReleased(1)

	// A collection that ran after the buffer died has freed it already.
	if _, err := h.hash(ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	cycles.Add(2)
	collected.Store(0)
	if _, err := h.hash(ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	if n := collected.Load(); n != 0 {
		t.Errorf("a collection ran since the buffer died: collected %d more, want 0", n)
	}
	waitReleased(2)

	// A burst side by side: released before the last hash returns.
	collected.Store(0)
	var wg sync.WaitGroup
	const burst = 40
	for range burst {
		wg.Go(func() {
			if _, err := h.hash(ctx, "correct-horse-battery"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := released.Load(); n < 3 {
		t.Errorf("after a burst of %d on 2 slots: released %d times in all, want the burst's release done (3)", burst, n)
	}
	if n := collected.Load(); n < 1 || n > burst {
		t.Errorf("a burst of %d hashes on 2 slots collected %d times, want 1..%d", burst, n, burst)
	}
	h.mu.Lock()
	running, dead := h.running, h.dead
	h.mu.Unlock()
	if running != 0 || dead {
		t.Errorf("after the burst and its release: %d running, dead buffer pending %t; want 0, false", running, dead)
	}

	// A hash right after the burst (a client's sign-in after its sign-up)
	// is its tail: released before it returns, not left to linger.
	before := released.Load()
	if _, err := h.hash(ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	if n := released.Load(); n != before+1 {
		t.Errorf("a hash right after a burst: released %d times when it returned, want %d", n, before+1)
	}
}

// TestHasherReturnsFragment: when the hash that follows a collection
// takes its buffer from fresh memory instead of the dead buffer's pages
// (another goroutine took some of them in between), those pages go back
// to the OS once the hash has allocated; when it reused them, nothing
// more happens; and the check waits for the allocation to happen.
func TestHasherReturnsFragment(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name        string
		freeAfter   uint64 // free resident heap bytes once the hash allocated
		lateAllocs  int    // looks before the allocation shows
		wantRelease int32
	}{
		// 40 MiB free after the collection: the dead buffer's 4 and 36 of
		// other pages. A reused buffer takes its 4; fresh memory takes
		// none (small objects took half a MiB of them meanwhile).
		{"reused", 35 * mib, 0, 0},
		{"fresh memory beside the dead buffer", 39*mib + mib/2, 0, 1},
		{"fresh memory, allocation seen late", 39*mib + mib/2, 3, 1},
		{"reused, allocation seen late", 35 * mib, 3, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHasher(ScryptParams{N: 4096, R: 8, P: 1}, 2) // 4 MiB buffers
			h.linger = time.Hour                                 // no lingering release in the test's time
			h.checkAfter = time.Millisecond
			var cycles atomic.Uint64
			var released, looks atomic.Int32
			h.collect = func() { cycles.Add(2) }
			h.cycles = cycles.Load
			h.release = func() { released.Add(1) }
			var watching atomic.Bool
			var before atomic.Uint64
			h.heap = func() (uint64, uint64) {
				if !watching.Load() { // the first hash: its buffer came from fresh memory with nothing free
					return before.Add(64 * mib), 0
				}
				n := looks.Add(1)
				switch {
				case n == 1: // right after the collection: the dead buffer's 4 MiB are free, and 36 more
					return 100 * mib, 40 * mib
				case int(n) <= 1+tt.lateAllocs: // the hash has not allocated yet
					return 100*mib + 1, 40 * mib
				}
				return 100*mib + 5*mib, tt.freeAfter
			}
			ctx := context.Background()
			if _, err := h.hash(ctx, "first"); err != nil { // dies, so the next hash collects
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // the first hash's look is done
			watching.Store(true)
			if _, err := h.hash(ctx, "second"); err != nil {
				t.Fatal(err)
			}
			want := int32(2 + tt.lateAllocs)
			for deadline := time.Now().Add(5 * time.Second); looks.Load() < want && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // a release, if any, has happened
			if n := looks.Load(); n != want {
				t.Errorf("looked at the heap %d times, want %d (one after the collection, %d before the allocation showed, one after)", n, want, tt.lateAllocs)
			}
			if n := released.Load(); n != tt.wantRelease {
				t.Errorf("released %d times, want %d", n, tt.wantRelease)
			}
		})
	}
}

// TestHasherMemoryBounded hashes a burst with real work buffers (16 MiB
// each) on 2 slots and watches the heap's objects, live and dead not yet
// swept: with the collection before each hash it stays within the two
// buffers in use and some slack; left to the collector's pace, dead
// buffers would pile up to its goal (twice the live heap).
func TestHasherMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes with 16 MiB buffers")
	}
	const (
		mib     = 1 << 20
		bufMiB  = 16 // 128 x N x r
		slots   = 2
		slack   = 8 // MiB: the test's own heap, and sampling between a GC's end and its sweep
		hashes  = 8
		objects = "/memory/classes/heap/objects:bytes"
	)
	runtime.GC()
	h := newHasher(ScryptParams{N: 16384, R: 8, P: 1}, slots)
	h.release = func() {} // the heap's objects are what is measured, not RSS
	sample := []rtmetrics.Sample{{Name: objects}}
	rtmetrics.Read(sample)
	base := sample[0].Value.Uint64()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		s := []rtmetrics.Sample{{Name: objects}}
		for {
			rtmetrics.Read(s)
			top = max(top, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- top
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for range hashes {
		wg.Go(func() {
			if _, err := h.hash(context.Background(), "correct-horse-battery"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	top := <-peak
	grew := float64(top-min(top, base)) / mib
	t.Logf("%d hashes on %d slots: heap objects peaked %.1f MiB above the start", hashes, slots, grew)
	if grew > slots*bufMiB+slack {
		t.Errorf("heap objects grew by %.1f MiB during the burst, want at most %d x %d + %d MiB", grew, slots, bufMiB, slack)
	}
}

// TestHasherBusy: a request that cannot get a slot before its deadline
// (less the store's reserve), or finds the queue full, is told "busy" at
// once and answered 503 with Retry-After, never 500; its own cancellation
// stays a cancellation.
func TestHasherBusy(t *testing.T) {
	h := newHasher(ScryptParams{N: 16, R: 1, P: 1}, 1)
	h.release = func() {}
	if err := h.slots.acquire(context.Background(), "", nil); err != nil { // the one slot is taken
		t.Fatal(err)
	}
	defer h.slots.release()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.hash(ctx, "pw")
	if !errors.Is(err, errHashBusy) {
		t.Fatalf("deadline while queued: got %v, want errHashBusy", err)
	}
	if ctx.Err() != nil {
		t.Logf("the deadline had passed when the wait gave up (a stalled machine?); want part of it left for the store")
	}

	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := h.hash(canceled, "pw"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled while queued: got %v, want context.Canceled", err)
	}

	// The queue holds waitingPerSlot requests; one more is refused at once.
	h.slots.mu.Lock()
	h.slots.waiting = waitingPerSlot
	h.slots.mu.Unlock()
	long, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	if _, err := h.hash(long, "pw"); !errors.Is(err, errHashBusy) || long.Err() != nil {
		t.Errorf("full queue: got %v (context: %v), want errHashBusy at once", err, long.Err())
	}
	h.slots.mu.Lock()
	h.slots.waiting = 0
	h.slots.mu.Unlock()

	rec := httptest.NewRecorder()
	e := hashErr(rec, err)
	if e.status != 503 || e.code != "SERVICE_UNAVAILABLE" || rec.Header().Get("Retry-After") == "" || result(e) != "busy" {
		t.Errorf("busy answer: %d %s Retry-After %q result %q; want 503 SERVICE_UNAVAILABLE with Retry-After, result busy",
			e.status, e.code, rec.Header().Get("Retry-After"), result(e))
	}
	if e := hashErr(httptest.NewRecorder(), errors.New("boom")); e.status != 500 {
		t.Errorf("other hashing errors: got %d, want 500", e.status)
	}
}

// TestHasherBurstLimit: a burst that runs hashes side by side sets a soft
// memory limit of the memory ready when it began, one more buffer and the
// headroom, and puts back the limit before it when it ends; a lower limit
// already in force (GOMEMLIMIT) is left alone.
func TestHasherBurstLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name  string
		prior int64
		free  uint64  // the heap's free pages (a dead buffer's) when a hash starts
		want  []int64 // the limits set, the last one the prior limit put back
	}{
		{"no limit before", math.MaxInt64, 0, []int64{100*mib + 4*mib + burstHeadroom, math.MaxInt64}},
		{"free pages left out", math.MaxInt64, 30 * mib, []int64{70*mib + 4*mib + burstHeadroom, math.MaxInt64}},
		{"a higher GOMEMLIMIT", 200 * mib, 0, []int64{100*mib + 4*mib + burstHeadroom, 200 * mib}},
		{"a lower GOMEMLIMIT", 64 * mib, 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHasher(ScryptParams{N: 4096, R: 8, P: 1}, 2) // 4 MiB buffers
			h.linger = time.Hour
			var cycles atomic.Uint64
			h.collect = func() { cycles.Add(2) }
			h.cycles = cycles.Load
			h.release = func() {}
			h.heap = func() (uint64, uint64) { return 1 << 40, tt.free }
			h.ready = func() uint64 { return 100 * mib }
			var mu sync.Mutex
			limit, set := tt.prior, []int64(nil)
			h.setLimit = func(n int64) int64 {
				mu.Lock()
				defer mu.Unlock()
				prior := limit
				if n >= 0 {
					limit = n
					set = append(set, n)
				}
				return prior
			}
			// Two at once hold both slots: a burst.
			release := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					if err := h.acquire(context.Background()); err != nil {
						t.Error(err)
						return
					}
					<-release
					h.put()
				})
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				h.mu.Lock()
				running := h.running
				h.mu.Unlock()
				if running == 2 || time.Now().After(deadline) {
					break
				}
			}
			close(release)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			// Each hash that starts in the burst sets it (the first one
			// only if the second made the burst before its own look).
			if len(set) == 3 && set[0] == set[1] {
				set = set[1:]
			}
			if !slices.Equal(set, tt.want) {
				t.Errorf("limits set %v, want %v", set, tt.want)
			}
			if limit != tt.prior {
				t.Errorf("after the burst the limit is %d, want %d as before", limit, tt.prior)
			}
		})
	}
}
