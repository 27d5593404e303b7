package issuer

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHasherReusesAndReleasesMemory: however many hashes run, at most
// cap(sem) work buffers exist; they are reused, and releaseAfter past the
// last hash they are freed and the heap handed back to the OS once.
func TestHasherReusesAndReleasesMemory(t *testing.T) {
	h := newHasher(ScryptParams{N: 1024, R: 8, P: 1}, 2)
	var released atomic.Int32
	h.release = func() { released.Add(1) }
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.hash(ctx, "correct-horse-battery"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	h.mu.Lock()
	buffers, running := len(h.free), h.running
	h.mu.Unlock()
	if buffers < 1 || buffers > 2 || running != 0 {
		t.Fatalf("after 40 hashes with 2 slots: %d idle buffers, %d running; want 1 or 2 and 0", buffers, running)
	}
	if n := released.Load(); n != 0 {
		t.Errorf("memory released %d times before releaseAfter passed", n)
	}
	deadline := time.Now().Add(releaseAfter + 5*time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	buffers = len(h.free)
	h.mu.Unlock()
	if released.Load() != 1 || buffers != 0 {
		t.Fatalf("after the idle delay: released %d times, %d buffers kept; want 1 and 0", released.Load(), buffers)
	}

	// A hash after the release works (fresh buffer), and the answer is the
	// same as with a reused one.
	stored, err := h.hash(ctx, "pw-one")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if ok, err := h.verify(ctx, "pw-one", stored); err != nil || !ok {
			t.Fatalf("verify with a reused buffer: %t %v", ok, err)
		}
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
