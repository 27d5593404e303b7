package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

var sink []byte

// waitPercent collects until the floor's finalizer has set a GOGC that
// satisfies ok, or gives up after 200 cycles. Finalizers run after
// runtime.GC returns, on their own goroutine, hence the short sleeps.
func waitPercent(f *Floor, ok func(int) bool) int {
	for range 200 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if p := f.Percent(); ok(p) {
			return p
		}
	}
	return f.Percent()
}

// churn allocates n bytes of short-lived garbage in 4 KiB pieces, as a
// proxy does per request, and returns how many collections ran meanwhile.
func churn(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i += 4 << 10 {
		sink = make([]byte, 4<<10)
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

// With a small live heap the floor cuts the number of collections by
// about floor/4 MiB; with a live heap above half the floor GOGC goes
// below 100 (to 50 at the floor), so memory is never held beyond what the
// default would allow.
func TestFloorCollectsLessOnASmallHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	runtime.GC()
	without := churn(256 << 20)

	f := Start(32 << 20)
	if f == nil {
		t.Fatal("Start returned nil with GOGC and GOMEMLIMIT unset")
	}
	defer f.Stop()
	if g := Start(64 << 20); g != nil {
		g.Stop()
		t.Fatal("a second Start tuned the collector while the first runs")
	}
	runtime.GC()
	with := churn(256 << 20)
	// How many cycles ran depends on how much CPU the background workers
	// got (a busy machine lets the heap overshoot): logged, not asserted.
	// The goal after a cycle is what the floor sets, and it is exact.
	t.Logf("collections over 256 MiB of garbage: %d at GOGC=100, %d with a 32 MiB floor (GOGC=%d)", without, with, f.Percent())
	var ms runtime.MemStats
	for range 3 { // the tuner runs after a cycle; the next one uses its GOGC
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.ReadMemStats(&ms)
	if ms.NextGC < 28<<20 || ms.NextGC > 36<<20 {
		t.Errorf("heap goal %.1f MiB with a small live heap (%.1f MiB), want about the 32 MiB floor",
			float64(ms.NextGC)/(1<<20), float64(ms.HeapAlloc)/(1<<20))
	}
	if p := f.Percent(); p > 800 {
		t.Errorf("GOGC %d: above 32 MiB / 4 MiB x 100, the runtime's minimum goal would pass the floor", p)
	}

	// A live heap above half the floor: headroom floor/2, so GOGC about
	// 16/24 x 100 (within the tenth tune leaves alone); at twice the
	// floor, 50.
	keep := make([][]byte, 0, 64)
	for range 24 {
		keep = append(keep, make([]byte, 1<<20))
	}
	if p := waitPercent(f, func(p int) bool { return p >= 55 && p <= 76 }); p < 55 || p > 76 {
		t.Errorf("live heap 24 MiB, floor 32 MiB: GOGC %d, want about 66", p)
	}
	for range 40 {
		keep = append(keep, make([]byte, 1<<20))
	}
	if p := waitPercent(f, func(p int) bool { return p == 50 }); p != 50 {
		t.Errorf("live heap 64 MiB, floor 32 MiB: GOGC %d, want 50", p)
	}
	runtime.KeepAlive(keep)
	keep = nil
	if p := waitPercent(f, func(p int) bool { return p > 100 }); p <= 100 {
		t.Errorf("live heap small again: GOGC %d, want the floor back", p)
	}

	f.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop GOGC is %d, want the prior 100", got)
	}
}

func TestOperatorGOGCWins(t *testing.T) {
	for _, v := range []string{"200", "off"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("GOGC", v)
			if f := Start(32 << 20); f != nil {
				f.Stop()
				t.Fatalf("Start tuned the collector although GOGC=%s", v)
			}
		})
	}
}

// A memory limit (as a Kubernetes example sets from the container limit)
// does not turn the floor off: the limit bounds the top, the floor the
// bottom.
func TestFloorWithMemoryLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "256MiB")
	f := Start(32 << 20)
	if f == nil {
		t.Fatal("Start returned nil with GOMEMLIMIT set")
	}
	f.Stop()
}

// Expect raises the heap goal by what it announces and takes it back:
// allocating a password hash's work memory does not start a collection
// that could free nothing.
func TestExpectRaisesTheGoal(t *testing.T) {
	t.Setenv("GOGC", "")
	f := Start(16 << 20)
	if f == nil {
		t.Fatal("Start returned nil with GOGC unset")
	}
	defer f.Stop()
	runtime.GC()
	waitPercent(f, func(p int) bool { return p > 100 })
	goal := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	const n = 64 << 20
	before := goal()
	Expect(n, true)
	raised := goal()
	Expect(-n, true)
	after := goal()
	t.Logf("heap goal %.1f MiB, %.1f MiB with %d MiB expected, %.1f MiB after", float64(before)/(1<<20), float64(raised)/(1<<20), n>>20, float64(after)/(1<<20))
	if raised < before+n*9/10 {
		t.Errorf("goal with %d MiB expected: got %d, want at least %d", n>>20, raised, before+n*9/10)
	}
	if after > before+before/10 {
		t.Errorf("goal after the memory is gone: got %d, want about %d", after, before)
	}
	Expect(n, false) // no Floor after Stop: nothing to tune, no panic
	f.Stop()
	Expect(-n, true)
}
