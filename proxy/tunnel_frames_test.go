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
// 64-bit lengths, empty payloads, control frames, a fragmented message
// with a ping between its fragments), masked as a client's or plain as an
// upstream's, is fed in chunks of each size from 1 byte up, and the ends
// it reports must be exactly the ends of the frames written; a close
// frame may go after each, except inside the fragmented message.
func TestWSFramesBoundaries(t *testing.T) {
	for _, masked := range []bool{false, true} {
		var stream []byte
		var ends []int
		var ops []byte
		var closable []bool
		add := func(op byte, n int, fin, inMessage bool) {
			start := len(stream)
			stream = wstest.AppendFrame(stream, op, bytes.Repeat([]byte{0x88}, n), masked)
			if !fin {
				stream[start] &^= 0x80
			}
			ends = append(ends, len(stream))
			ops = append(ops, op)
			closable = append(closable, !inMessage)
		}
		add(wstest.OpText, 0, true, false)
		add(wstest.OpText, 1, true, false)
		add(wstest.OpBinary, 125, true, false)
		add(wstest.OpBinary, 126, true, false)
		add(wstest.OpPing, 4, true, false)
		add(wstest.OpBinary, 0xffff, true, false)
		add(wstest.OpBinary, 0x10000, true, false)
		add(wstest.OpClose, 2, true, false)
		// A fragmented message, a ping between its fragments; the 0x88
		// payload bytes look like close frames: only headers are read as
		// headers.
		add(wstest.OpText, 300, false, true)
		add(wstest.OpPing, 3, true, true)
		add(wstest.OpContinuation, 300, false, true)
		add(wstest.OpContinuation, 5, true, false)

		for _, chunk := range []int{1, 2, 3, 7, 13, 14, 100, 4096, 32 << 10, len(stream)} {
			f := wsFrames{masked: masked}
			var gotEnds []int
			var gotOps []byte
			pos := 0
			for off := 0; off < len(stream); off += chunk {
				p := stream[off:min(off+chunk, len(stream))]
				for len(p) > 0 {
					n, ended, op, err := f.next(p)
					if err != nil {
						t.Fatalf("masked %v, chunk %d: at %d: %v", masked, chunk, pos, err)
					}
					if n == 0 {
						t.Fatalf("masked %v, chunk %d: next consumed nothing at %d", masked, chunk, pos)
					}
					pos += n
					p = p[n:]
					if ended {
						gotEnds = append(gotEnds, pos)
						gotOps = append(gotOps, op)
						if want := closable[len(gotEnds)-1]; f.boundary() != want {
							t.Fatalf("masked %v, chunk %d: frame ended at %d, boundary %v, want %v", masked, chunk, pos, f.boundary(), want)
						}
					} else if len(p) != 0 {
						t.Fatalf("masked %v, chunk %d: next stopped at %d inside a frame with bytes left", masked, chunk, pos)
					}
				}
			}
			if !equalInts(gotEnds, ends) || !bytes.Equal(gotOps, ops) {
				t.Fatalf("masked %v, chunk %d: got ends %v ops %v, want %v %v", masked, chunk, gotEnds, gotOps, ends, ops)
			}
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
					n, _, _, _ := f.next(p)
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
