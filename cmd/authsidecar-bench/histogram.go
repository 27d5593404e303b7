package main

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// histogram counts latencies (nanoseconds) in log-linear buckets, like
// HdrHistogram: exact below 256 ns, then 128 buckets per power of two, so
// any value is known to within 0.8%. Recording is an index computation and
// an increment, never an allocation, and histograms merge by addition.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits // buckets per power of two
	histMaxExp  = 36               // 2^(36+8) ns ≈ 4.9 hours: far past any request timeout
	histBuckets = 2*histSub + histMaxExp*histSub
)

// histIndex maps v to its bucket.
func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(v) - (histSubBits + 1) // v>>e is in [histSub, 2*histSub)
	if e > histMaxExp {
		return histBuckets - 1
	}
	return 2*histSub + (e-1)*histSub + int(v>>e) - histSub
}

// histValue is the middle of bucket i (its exact value below 256 ns).
func histValue(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	k := i - 2*histSub
	e := k/histSub + 1
	lower := uint64(k%histSub+histSub) << e
	return lower + (uint64(1)<<e)/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// percentile is the nearest-rank q-quantile (q in [0, 1]): the smallest
// recorded value with at least q of all values at or below it. 0 when
// nothing was recorded.
func (h *histogram) percentile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(h.n))), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(histBuckets - 1))
}

// median of xs (the mean of the two middle values for an even count); 0
// for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
