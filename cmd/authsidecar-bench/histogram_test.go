package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 255, 256, 257, 511, 512, 1000, 4095, 4096, 1e5, 1e6 + 7, 1e9, 1e12, 1 << 43} {
		i := histIndex(v)
		if i < prev {
			t.Errorf("histIndex(%d) = %d, below the previous value's %d", v, i, prev)
		}
		prev = i
		got := histValue(i)
		if err := math.Abs(float64(got)-float64(v)) / math.Max(1, float64(v)); err > 0.008 {
			t.Errorf("histValue(histIndex(%d)) = %d: off by %.2f%%, want under 0.8%%", v, got, 100*err)
		}
	}
	if i := histIndex(math.MaxUint64); i != histBuckets-1 {
		t.Errorf("histIndex(max) = %d, want the last bucket %d", i, histBuckets-1)
	}
}

func TestPercentile(t *testing.T) {
	var h histogram
	if got := h.percentile(0.5); got != 0 {
		t.Errorf("empty: p50 = %v, want 0", got)
	}
	for i := 1; i <= 1000; i++ { // 1µs .. 1000µs, in reverse to show order does not matter
		h.record(time.Duration(1001-i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0, time.Microsecond}, // nearest rank: at least the first value
		{0.5, 500 * time.Microsecond},
		{0.9, 900 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{1, 1000 * time.Microsecond},
	} {
		got := h.percentile(tc.q)
		if err := math.Abs(float64(got-tc.want)) / float64(tc.want); err > 0.008 {
			t.Errorf("percentile(%v) = %v, want %v (within 0.8%%)", tc.q, got, tc.want)
		}
	}

	var a, b histogram
	a.record(time.Millisecond)
	b.record(3 * time.Millisecond)
	b.record(3 * time.Millisecond)
	a.merge(&b)
	if a.n != 3 {
		t.Errorf("merged count = %d, want 3", a.n)
	}
	if got := a.percentile(0.5); got < 2990*time.Microsecond || got > 3010*time.Microsecond {
		t.Errorf("merged p50 = %v, want ~3ms", got)
	}
	var neg histogram
	neg.record(-time.Second)
	if got := neg.percentile(1); got != 0 {
		t.Errorf("negative duration: p100 = %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1}, 5},
	} {
		in := slices.Clone(tc.in)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median(%v) reordered its input to %v", tc.in, in)
		}
	}
}

// The sidecar/bare ratio is the median of per-pair ratios: when the
// machine slows down mid-scenario, each pair slows together and the
// ratio holds, where a ratio of the two medians would not.
func TestPairedRatio(t *testing.T) {
	runs := func(bare, sidecar []float64) []runStats {
		var rs []runStats
		for i := range bare {
			rs = append(rs, runStats{Target: "bare", Run: i + 1, RPS: bare[i], P99us: 1000},
				runStats{Target: "sidecar", Run: i + 1, RPS: sidecar[i], P99us: 1100})
		}
		return rs
	}
	// The machine is fast for the first two pairs and slow for the last
	// three; the sidecar is 0.95x of bare throughout.
	bare := []float64{20000, 20000, 12000, 12000, 12000}
	sc := []float64{19000, 19000, 11400, 11400, 11400}
	sr := scenarioReport{Runs: runs(bare, sc)}
	sr.summarize()
	if got := sr.Ratio.RPS; got < 0.9499 || got > 0.9501 {
		t.Errorf("paired req/s ratio %v, want 0.95", got)
	}
	if got := sr.Ratio.P99; got < 1.0999 || got > 1.1001 {
		t.Errorf("paired p99 ratio %v, want 1.1", got)
	}
	if sr.Bare.RPS != 12000 || sr.Sidecar.RPS != 11400 {
		t.Errorf("medians %v and %v, want 12000 and 11400", sr.Bare.RPS, sr.Sidecar.RPS)
	}

	// Unequal run counts (a failed run): the ratio of the medians.
	sr = scenarioReport{Runs: append(runs(bare, sc), runStats{Target: "bare", Run: 6, RPS: 30000})}
	sr.summarize()
	if got, want := sr.Ratio.RPS, 11400/16000.0; got != want {
		t.Errorf("unpaired req/s ratio %v, want %v", got, want)
	}
}
