package proxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// TestPace runs pace on a simulated clock: each step is a read (or a
// write of known bytes) that waited for the client, and a step that waits
// past its deadline is the client cut off. The rule: a client may be
// silent for the grace at most, at any time, and over any stretch must
// move rate x (stretch - grace) bytes.
func TestPace(t *testing.T) {
	const rate, grace = 1024, 10 * time.Second
	type step struct {
		wait  time.Duration // waiting for the client
		bytes int
		write bool // bytes known in advance (a write)
	}
	repeat := func(n int, s step) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	cases := []struct {
		name   string
		steps  []step
		cutAt  int // the step that meets its deadline; -1: none
		credit time.Duration
	}{
		{"exactly the rate, for an hour", repeat(3600, step{time.Second, rate, false}), -1, grace},
		// 924 B/s: by 93s it has sent 85,008 bytes, 16 short of
		// 1024 x (93 - 10) the moment its 94th second starts.
		{"a little below the rate", repeat(20000, step{time.Second, rate - 100, false}), 93, 0},
		{"one byte every 2s (issue 30)", repeat(10, step{2 * time.Second, 1, false}), 5, 0},
		{"silent from the start", []step{{grace + time.Millisecond, 0, false}}, 0, 0},
		{"a pause just within the grace, then a burst", []step{{time.Second, rate, false}, {grace - time.Millisecond, 0, false}, {0, 20 * rate, false}}, -1, grace},
		{"a pause just within the grace, then more silence", []step{{time.Second, rate, false}, {grace - time.Millisecond, 0, false}, {2 * time.Millisecond, rate, false}}, 2, 0},
		{"a megabyte at once earns no more than the grace", []step{{0, 1 << 20, false}, {grace + time.Millisecond, 0, false}}, 1, 0},
		// 32 KiB earn 32s: the write may take 42s, and leaves 2s.
		{"a write may last its own bytes' time", []step{{grace + 30*time.Second, 32 << 10, true}, {time.Second, 1 << 10, true}}, -1, 2 * time.Second},
		{"a write that takes longer is cut", []step{{grace + 33*time.Second, 32 << 10, true}}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPace(rate, grace)
			now := time.Unix(0, 0)
			cut := -1
			for i, s := range tc.steps {
				n := 0
				if s.write {
					n = s.bytes
				}
				deadline := p.deadline(now, n)
				now = now.Add(s.wait)
				if now.After(deadline) {
					cut = i
					break
				}
				p.spend(s.wait, s.bytes)
			}
			if cut != tc.cutAt {
				t.Errorf("cut at step %d, want %d", cut, tc.cutAt)
			}
			if cut < 0 && p.credit != tc.credit {
				t.Errorf("credit %v at the end, want %v", p.credit, tc.credit)
			}
		})
	}
}

// deadlineRecorder is a ResponseWriter that records each write's size
// and the write deadline in force for it.
type deadlineRecorder struct {
	http.ResponseWriter
	deadline time.Time
	writes   []int
	left     []time.Duration // deadline - now at each write
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error { d.deadline = t; return nil }
func (d *deadlineRecorder) Write(b []byte) (int, error) {
	d.writes = append(d.writes, len(b))
	d.left = append(d.left, time.Until(d.deadline))
	return len(b), nil
}

// TestAnswerWriterPieces: while timed, no write carries more than the
// grace earns, so each may last at most twice the grace; once the
// upstream's body is closed, writes are whole and the deadline cleared.
func TestAnswerWriterPieces(t *testing.T) {
	const rate, grace = 1024, 10 * time.Second
	d := &deadlineRecorder{ResponseWriter: httptest.NewRecorder()}
	a := newAnswerWriter(d, false, rate, grace)
	if err := a.write(make([]byte, 32<<10), false); err != nil {
		t.Fatal(err)
	}
	if want := []int{10240, 10240, 10240, 2048}; !slices.Equal(d.writes, want) {
		t.Errorf("timed writes of 32 KiB: got %v, want %v", d.writes, want)
	}
	for i, left := range d.left {
		if left > 2*grace {
			t.Errorf("write %d: deadline %v ahead, want at most twice the grace", i, left)
		}
	}
	d.writes = nil
	if err := a.write(make([]byte, 32<<10), true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.writes, []int{32 << 10}) || !d.deadline.IsZero() {
		t.Errorf("free write: got writes %v with deadline %v, want one of 32768 with none", d.writes, d.deadline)
	}
}
