package userimport

import (
	"fmt"
	"testing"
)

// TestSeen: every value added is found again, a value of one kind is not
// one of the other, and the table takes at most 16 bytes a value.
func TestSeen(t *testing.T) {
	s := newSeen()
	const n = 200_000
	for i := range n {
		k := s.key(kindEmail, fmt.Sprintf("user%d@example.com", i))
		if s.has(k) {
			t.Fatalf("value %d: new, but found", i)
		}
		s.add(k)
	}
	for i := range n {
		if !s.has(s.key(kindEmail, fmt.Sprintf("user%d@example.com", i))) {
			t.Fatalf("value %d: added, but not found", i)
		}
	}
	if s.has(s.key(kindID, "user0@example.com")) {
		t.Error("an id equal to an email: found, want new")
	}
	slots := 0
	for _, sh := range s.shards {
		slots += len(sh.keys)
	}
	if bytes := float64(slots*8) / (n + 1); bytes > 16 {
		t.Errorf("%.1f bytes a value, want at most 16", bytes)
	}
}

func BenchmarkSeen(b *testing.B) {
	s := newSeen()
	values := make([]string, 1<<16)
	for i := range values {
		values[i] = fmt.Sprintf("%08x.%d@example.com", i*2654435761, i)
	}
	b.ResetTimer()
	for i := range b.N {
		if k := s.key(kindEmail, values[i&(len(values)-1)]); !s.has(k) {
			s.add(k)
		}
	}
}
