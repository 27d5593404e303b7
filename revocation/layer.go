package revocation

import (
	"math"
	"math/bits"
	"slices"
)

// layer is an immutable set of (key, at) pairs of one kind, sorted by key.
// It costs 12 bytes a pair plus a directory of 4 bytes for every 4 pairs:
// 13 MB for a million, where a map[string]time.Time held ~100 MB.
//
// The directory indexes the sorted keys by their top bits: the keys
// starting with bits b are keys[dir[b]:dir[b+1]], about four of them,
// since the keys are uniform hashes. A lookup reads two adjacent
// directory words and one cache line of keys: two cache misses with a
// million held, where a binary search took twenty.
//
// Times are stored as uint32 offsets from base in units of 2^shift ms,
// rounded up: with live entries spanning jwt_ttl plus the leeway, shift is
// 0 (to the millisecond) up to a 49-day jwt_ttl. Past that a cutoff moves
// later by less than 2^shift ms, which revokes a little more, never less.
type layer struct {
	keys     []uint64
	ats      []uint32
	dir      []uint32
	dirShift uint8 // 64 - directory bits; 64 for a one-bucket directory
	shift    uint8
	base     int64 // ms; a multiple of 2^shift
	minAt    int64 // the oldest at, for the sweep
}

// emptyLayer is every tier's layer before anything is added.
var emptyLayer = &layer{dir: []uint32{0, 0}, dirShift: 64}

func (l *layer) len() int { return len(l.keys) }

func (l *layer) at(i int) int64 { return l.base + int64(l.ats[i])<<l.shift }

// get returns the time held for k.
func (l *layer) get(k uint64) (int64, bool) {
	b := k >> l.dirShift // a shift by 64 is 0: the one bucket
	lo, hi := l.dir[b], l.dir[b+1]
	for i := lo; i < hi; i++ {
		switch kk := l.keys[i]; {
		case kk == k:
			return l.at(int(i)), true
		case kk > k:
			return 0, false
		}
	}
	return 0, false
}

// search returns the index of the first key above after.
func (l *layer) search(after uint64) int {
	i, _ := slices.BinarySearch(l.keys, after)
	if i < len(l.keys) && l.keys[i] == after {
		i++
	}
	return i
}

// pair is one (key, at) while layers are built.
type pair struct {
	key uint64
	at  int64
}

// sortPairs sorts p by key and keeps, for a key given more than once, the
// latest time: a later cutoff covers everything an earlier one did.
func sortPairs(p []pair) []pair {
	slices.SortFunc(p, func(a, b pair) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	out := p[:0]
	for _, x := range p {
		if n := len(out); n > 0 && out[n-1].key == x.key {
			out[n-1].at = max(out[n-1].at, x.at)
			continue
		}
		out = append(out, x)
	}
	return out
}

// merge returns l's pairs and add's (sorted by key, unique), merged by key
// with the latest time kept, leaving out every pair older than live.
func (l *layer) merge(add []pair, live int64) []pair {
	out := make([]pair, 0, l.len()+len(add))
	i, j := 0, 0
	for i < l.len() || j < len(add) {
		var p pair
		switch {
		case j == len(add) || (i < l.len() && l.keys[i] < add[j].key):
			p = pair{l.keys[i], l.at(i)}
			i++
		case i == l.len() || add[j].key < l.keys[i]:
			p = add[j]
			j++
		default:
			p = pair{add[j].key, max(l.at(i), add[j].at)}
			i++
			j++
		}
		if p.at >= live {
			out = append(out, p)
		}
	}
	return out
}

// newLayer builds a layer from pairs sorted by key and unique.
func newLayer(p []pair) *layer {
	if len(p) == 0 {
		return emptyLayer
	}
	lo, hi := p[0].at, p[0].at
	for _, x := range p {
		lo, hi = min(lo, x.at), max(hi, x.at)
	}
	var shift uint8
	for uint64(hi-lo)>>shift > math.MaxUint32-1 {
		shift++
	}
	unit := int64(1) << shift
	base := lo - ((lo%unit)+unit)%unit // floor to a multiple of the unit
	l := &layer{
		keys: make([]uint64, len(p)), ats: make([]uint32, len(p)),
		shift: shift, base: base, minAt: lo,
	}
	for i, x := range p {
		l.keys[i] = x.key
		l.ats[i] = uint32((x.at - base + unit - 1) >> shift)
	}
	// About four keys a bucket: one cache line scanned per lookup.
	dirBits := 0
	if n := len(p) / 4; n > 1 {
		dirBits = bits.Len(uint(n - 1))
	}
	l.dirShift = uint8(64 - dirBits)
	l.dir = make([]uint32, 1<<dirBits+1)
	b := 0
	for i, k := range l.keys {
		for kb := int(k >> l.dirShift); b < kb; b++ {
			l.dir[b+1] = uint32(i)
		}
	}
	for ; b < 1<<dirBits; b++ {
		l.dir[b+1] = uint32(len(p))
	}
	return l
}

// bytes is what the layer's arrays hold, for the memory docs and tests.
func (l *layer) bytes() int { return 8*cap(l.keys) + 4*cap(l.ats) + 4*cap(l.dir) }
