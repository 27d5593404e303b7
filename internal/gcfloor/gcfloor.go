// Package gcfloor keeps the Go garbage collector from running on a tiny
// heap.
//
// With the default GOGC=100 the collector runs each time the heap doubles,
// and never waits for less than 4 MiB. A proxy's live heap is a few MiB
// while it allocates several KiB per request, so under load it collected
// about 50 times a second, and each cycle's fixed work (stopping the
// world, scanning goroutine stacks, waking mark workers) was 6-8% of the
// CPU. A floor lets the heap grow to a fixed size before collecting when
// the live heap is small. When it is large the goal is live + max(floor/2,
// live/2): below what GOGC=100 would allow (2 x live), since a sidecar
// runs on a memory budget. So memory never grows beyond the floor or what
// GOGC=100 would allow, whichever is more.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// minHeap is the runtime's smallest heap goal at GOGC=100. The runtime
// scales it with GOGC (goal >= 4 MiB x GOGC/100), so GOGC alone must
// never exceed floor/minHeap x 100, or a small live heap would get a goal
// far above the floor.
const minHeap = 4 << 20

// Floor is a running tuner; Stop ends it.
type Floor struct {
	floor    uint64
	percent  atomic.Int64 // the GOGC last set, for tests
	expected atomic.Int64 // bytes announced by Expect

	mu      sync.Mutex // orders tune against Stop
	stopped bool
	sample  []metrics.Sample
	prior   int // GOGC before Start, restored by Stop
}

// active makes Start a no-op while another Floor runs: GOGC is one
// setting per process. current is that Floor, for Expect.
var (
	active  atomic.Bool
	current atomic.Pointer[Floor]
)

// Expect tells the running Floor, if any, that n bytes of short-lived heap
// are about to be allocated (negative n: they are garbage now), and
// retunes at once when retune is set. A password hash's 32 MiB of work
// memory, allocated on a heap whose goal is a few MiB, would otherwise
// start a collection that can free nothing, while the hash runs (which
// makes it slow: the hashing goroutine must be stopped to scan its
// stack); with the goal raised by n, it does not.
func Expect(n int64, retune bool) {
	if f := current.Load(); f != nil {
		f.expected.Add(n)
		if retune {
			f.tune()
		}
	}
}

// Start keeps the heap goal at least floor bytes until Stop. It returns
// nil and does nothing when GOGC is set in the environment (an operator
// who tunes GOGC is in charge of it) or when a Floor is already running.
// GOMEMLIMIT still applies: the runtime collects before the heap passes
// the limit whatever GOGC says, so a container limit keeps working.
func Start(floor uint64) *Floor {
	if os.Getenv("GOGC") != "" || floor == 0 || !active.CompareAndSwap(false, true) {
		return nil
	}
	f := &Floor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	f.prior = debug.SetGCPercent(100)
	f.tune()
	f.arm()
	current.Store(f)
	return f
}

// Percent is the GOGC the floor set last.
func (f *Floor) Percent() int { return int(f.percent.Load()) }

// Stop restores the GOGC there was before Start. Safe on nil.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		current.CompareAndSwap(f, nil)
		debug.SetGCPercent(f.prior)
		active.Store(false)
	}
}

// arm runs tune after the next collection: a finalizer runs once the
// cycle that found its object unreachable ends, and re-arming it on the
// same object keeps it alive for one more cycle. No goroutine polls.
func (f *Floor) arm() {
	s := &sentinel{}
	runtime.SetFinalizer(s, f.finalize)
}

// sentinel has a pointer so it is never a tiny allocation (finalizers on
// those may never run).
type sentinel struct{ _ *int }

func (f *Floor) finalize(s *sentinel) {
	if f.tune() {
		runtime.SetFinalizer(s, f.finalize)
	}
}

// tune sets GOGC so the next goal, max(4 MiB x GOGC/100, live x (1 +
// GOGC/100)), is the floor when the live heap is below half of it, and
// live + max(floor/2, live/2) otherwise: GOGC falls from 100 at half the
// floor to 50 at the floor and stays there. A sidecar's budget is memory:
// with a large live heap (a thousand open connections hold ~25 MiB of
// buffers) GOGC=100 would let as much garbage again pile up, while
// collecting at 50% costs a cycle per half a live heap of allocation,
// little next to the cycles a tiny heap would run. It reports false once
// stopped.
func (f *Floor) tune() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	live := f.sample[0].Value.Uint64()
	percent := 100
	if live >= f.floor/2 {
		percent = max(50, int(f.floor/2*100/live))
	} else {
		percent = int(f.floor * 100 / minHeap)
		if live > 0 {
			percent = min(percent, int(f.floor*100/live)-100)
		}
		percent = max(100, percent)
	}
	if exp := f.expected.Load(); exp > 0 && live > 0 {
		// The goal that percent gives, raised by what Expect announced.
		goal := max(live*uint64(100+percent)/100, minHeap*uint64(percent)/100) + uint64(exp)
		raised := min(int(goal*100/live)-100, int(goal*100/minHeap))
		percent = max(percent, raised)
	}
	// Setting GOGC recomputes the goal; skip it when the value moves by
	// less than a tenth. Going back to 100 is always done.
	if old := int(f.percent.Load()); percent != old && (percent == 100 || old == 0 || percent < old*9/10 || percent > old*11/10) {
		debug.SetGCPercent(percent)
		f.percent.Store(int64(percent))
	}
	return true
}
