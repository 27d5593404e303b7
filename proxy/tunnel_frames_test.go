package proxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/authsidecar/authsidecar/internal/wstest"
)

// WSCloseWait is the closing-handshake bound, for the external tests.
var WSCloseWait = wsCloseWait

// TestWSFramesBoundaries: the tracker finds every frame's end whatever
// the chunking: a stream of frames of every header shape (7-, 16- and
// 64-bit lengths, masked or not, empty payloads, control frames) is fed
// in chunks of each size from 1 byte up, and the ends it reports must be
// exactly the ends of the frames written.
func TestWSFramesBoundaries(t *testing.T) {
	var stream []byte
	var ends []int
	var ops []byte
	add := func(op byte, n int, masked bool) {
		stream = wstest.AppendFrame(stream, op, bytes.Repeat([]byte{0x88}, n), masked)
		ends = append(ends, len(stream))
		ops = append(ops, op)
	}
	for _, masked := range []bool{false, true} {
		add(wstest.OpText, 0, masked)
		add(wstest.OpText, 1, masked)
		add(wstest.OpBinary, 125, masked)
		add(wstest.OpBinary, 126, masked)
		add(wstest.OpPing, 4, masked)
		add(wstest.OpBinary, 0xffff, masked)
		add(wstest.OpBinary, 0x10000, masked)
		add(wstest.OpClose, 2, masked)
	}
	// A header whose 0x88 payload bytes look like close frames: only
	// headers are read as headers.
	add(wstest.OpContinuation, 300, false)

	for _, chunk := range []int{1, 2, 3, 7, 13, 14, 100, 4096, 32 << 10, len(stream)} {
		var f wsFrames
		var gotEnds []int
		var gotOps []byte
		pos := 0
		for off := 0; off < len(stream); off += chunk {
			p := stream[off:min(off+chunk, len(stream))]
			for len(p) > 0 {
				n, ended, op := f.next(p)
				if n == 0 {
					t.Fatalf("chunk %d: next consumed nothing at %d", chunk, pos)
				}
				pos += n
				p = p[n:]
				if ended {
					gotEnds = append(gotEnds, pos)
					gotOps = append(gotOps, op)
					if !f.boundary() {
						t.Fatalf("chunk %d: frame ended at %d but not at a boundary", chunk, pos)
					}
				} else if len(p) != 0 {
					t.Fatalf("chunk %d: next stopped at %d inside a frame with bytes left", chunk, pos)
				}
			}
		}
		if !equalInts(gotEnds, ends) || !bytes.Equal(gotOps, ops) {
			t.Fatalf("chunk %d: got ends %v ops %v, want %v %v", chunk, gotEnds, gotOps, ends, ops)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWSCloseFrame: the close frame is what RFC 6455 §5.5.1 says, masked
// toward the upstream with a fresh key each time and plain toward the
// client, and a strict reader takes it.
func TestWSCloseFrame(t *testing.T) {
	keys := map[string]bool{}
	for _, masked := range []bool{false, true, true, true} {
		var buf bytes.Buffer
		d := &wsDir{w: &buf, masked: masked}
		if err := d.sendClose(); err != nil {
			t.Fatal(err)
		}
		if !d.sent.Load() {
			t.Error("sendClose did not mark the direction sent")
		}
		raw := buf.Bytes()
		if masked {
			keys[string(raw[2:6])] = true
		}
		r := bytes.NewReader(raw)
		f, err := wstest.ReadFrame(r, masked)
		if err != nil {
			t.Fatalf("masked %v: %v (% x)", masked, err, raw)
		}
		code, reason := f.CloseCode()
		if f.Op != wstest.OpClose || !f.Fin || code != 1008 || reason != "token expired" {
			t.Errorf("masked %v: got op %#x fin %v code %d reason %q, want a final close 1008 \"token expired\"", masked, f.Op, f.Fin, code, reason)
		}
		if r.Len() != 0 {
			t.Errorf("masked %v: %d bytes after the frame", masked, r.Len())
		}
		if want := 2 + 2 + len("token expired"); !masked && len(raw) != want {
			t.Errorf("unmasked frame is %d bytes, want %d", len(raw), want)
		}
		if binary.BigEndian.Uint16(f.Payload) != wsPolicyViolation {
			t.Error("code not big-endian 1008")
		}
	}
	if len(keys) != 3 {
		t.Errorf("three masked close frames used %d distinct keys, want 3", len(keys))
	}
}

// BenchmarkWSFrames: the frame tracker's cost per 32 KiB read, for large
// frames (one header per 64 KiB) and for the worst case of tiny frames
// (a header every 8 bytes), against copying the same 32 KiB once (what
// the kernel does for every read and write anyway) as the baseline.
func BenchmarkWSFrames(b *testing.B) {
	for _, size := range []int{64 << 10, 6} {
		var stream []byte
		for len(stream) < 1<<20 {
			stream = wstest.AppendFrame(stream, wstest.OpBinary, make([]byte, size), false)
		}
		b.Run(fmt.Sprintf("track/payload=%d", size), func(b *testing.B) {
			b.SetBytes(32 << 10)
			var f wsFrames
			off := 0
			for b.Loop() {
				if off+32<<10 > len(stream) {
					off, f = 0, wsFrames{}
				}
				p := stream[off : off+32<<10]
				for len(p) > 0 {
					n, _, _ := f.next(p)
					p = p[n:]
				}
				off += 32 << 10
			}
		})
	}
	b.Run("copy baseline", func(b *testing.B) {
		src, dst := make([]byte, 32<<10), make([]byte, 32<<10)
		b.SetBytes(32 << 10)
		for b.Loop() {
			copy(dst, src)
		}
	})
}
