package gcfloor

import (
	"runtime"
	"runtime/debug"
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
// about floor/4 MiB; with a live heap above the floor it leaves GOGC at
// 100, so memory is never held beyond what the default would allow.
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
	t.Logf("collections over 256 MiB of garbage: %d at GOGC=100, %d with a 32 MiB floor (GOGC=%d)", without, with, f.Percent())
	if with*4 > without {
		t.Errorf("floor: %d collections, default: %d; want at most a quarter", with, without)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.NextGC > 36<<20 {
		t.Errorf("heap goal %d MiB with a small live heap, want about the 32 MiB floor", ms.NextGC>>20)
	}
	if p := f.Percent(); p > 800 {
		t.Errorf("GOGC %d: above 32 MiB / 4 MiB x 100, the runtime's minimum goal would pass the floor", p)
	}

	// A live heap above half the floor: back to the default.
	keep := make([][]byte, 0, 24)
	for range 24 {
		keep = append(keep, make([]byte, 1<<20))
	}
	if p := waitPercent(f, func(p int) bool { return p == 100 }); p != 100 {
		t.Errorf("live heap 24 MiB, floor 32 MiB: GOGC %d, want 100", p)
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
