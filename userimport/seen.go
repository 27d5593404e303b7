package userimport

import "hash/maphash"

// seen remembers the values (ids, emails) earlier lines used, to refuse a
// later line that repeats one, in bounded memory: a 64-bit hash of each
// value, 11 to 16 bytes a value with the table's slack, never the value
// itself (a million lines with ids: about 25 MiB, where the strings in a
// map took over 100). Two different values with the same hash would make
// the later line's refusal wrong; among two million values the odds are
// about one in ten million, and the seeds are new each run, so a re-run
// does not repeat such a refusal. The store's unique constraints stay the
// final arbiter of what is written.
//
// It is an open-addressing table split in shards that grow each on its
// own, by half, so growing never holds two copies of the whole table nor
// doubles the memory at once.
type seen struct {
	// seeds holds one seed per kind of value: "42" as an id and as an
	// email are not the same value.
	seeds  [numKinds]maphash.Seed
	shards [seenShards]seenShard
}

// The kinds of value seen tells apart.
const (
	kindID = iota
	kindEmail
	numKinds
)

const (
	seenShards     = 64
	seenShardBits  = 6 // log2(seenShards)
	seenShardStart = 64
)

type seenShard struct {
	keys []uint64 // 0: an empty slot
	n    int
}

func newSeen() *seen {
	s := &seen{}
	for i := range s.seeds {
		s.seeds[i] = maphash.MakeSeed()
	}
	return s
}

// key is what seen keeps of v, a value of kind.
func (s *seen) key(kind int, v string) uint64 {
	if k := maphash.String(s.seeds[kind], v); k != 0 {
		return k
	}
	return 1 // 0 marks an empty slot
}

// has reports whether key was added.
func (s *seen) has(key uint64) bool {
	sh := &s.shards[key>>(64-seenShardBits)]
	if len(sh.keys) == 0 {
		return false
	}
	size := uint64(len(sh.keys))
	for i := (key & 0xffffffff) * size >> 32; ; {
		switch sh.keys[i] {
		case 0:
			return false
		case key:
			return true
		}
		if i++; i == size {
			i = 0
		}
	}
}

// add adds key.
func (s *seen) add(key uint64) {
	sh := &s.shards[key>>(64-seenShardBits)]
	if (sh.n+1)*4 > len(sh.keys)*3 {
		sh.grow()
	}
	if sh.put(key) {
		sh.n++
	}
}

// put stores key, and reports false if it was there already. The home
// slot is the key's low half scaled to the table (any size works, not
// only powers of two); the shard took the high bits.
func (sh *seenShard) put(key uint64) bool {
	size := uint64(len(sh.keys))
	for i := (key & 0xffffffff) * size >> 32; ; {
		switch sh.keys[i] {
		case 0:
			sh.keys[i] = key
			return true
		case key:
			return false
		}
		if i++; i == size {
			i = 0
		}
	}
}

func (sh *seenShard) grow() {
	old := sh.keys
	sh.keys = make([]uint64, max(seenShardStart, len(old)+len(old)/2))
	for _, k := range old {
		if k != 0 {
			sh.put(k)
		}
	}
}
