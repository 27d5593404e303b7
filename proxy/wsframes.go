package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// wsFrames follows RFC 6455 §5.2 framing through a byte stream, so the
// proxy knows where each frame and each message ends without buffering or
// copying it. It checks each header as far as framing goes (§5.2, §5.4,
// §5.5): a known opcode, the mask bit the sender's side must set, control
// frames final and short, continuations only inside a message and a new
// message only outside one. Anything else is not WebSocket, and next says
// so. Reserved bits are left alone: an extension the peers negotiated may
// use them.
type wsFrames struct {
	hdr       [14]byte // the current frame's header, as far as read
	nhdr      int
	left      uint64 // payload bytes of the current frame still to come
	inPayload bool
	// inMessage: a fragmented message has begun (a data frame without FIN)
	// and its last fragment has not come. A close frame may not be sent
	// into it: control frames between fragments are legal, but a peer
	// that reads a message whole would see it cut.
	inMessage bool
	masked    bool // the sender is a client: its frames must be masked
}

// boundary reports whether a close frame may go now: between frames, and
// not inside a fragmented message.
func (f *wsFrames) boundary() bool { return f.nhdr == 0 && !f.inPayload && !f.inMessage }

// errNotWebSocket wraps what next finds wrong with a header.
var errNotWebSocket = errors.New("not a WebSocket frame")

// check judges the current header, whole (h holds headerLen bytes).
func (f *wsFrames) check(h []byte) error {
	op, fin, masked := h[0]&0x0f, h[0]&0x80 != 0, h[1]&0x80 != 0
	switch {
	case op > 0x2 && op < 0x8 || op > 0xa:
		return fmt.Errorf("%w: opcode %#x", errNotWebSocket, op)
	case f.masked && !masked:
		return fmt.Errorf("%w: an unmasked frame from the client", errNotWebSocket)
	case !f.masked && masked:
		return fmt.Errorf("%w: a masked frame from the upstream", errNotWebSocket)
	case op >= 0x8 && (!fin || h[1]&0x7f > 125):
		return fmt.Errorf("%w: control frame %#x fragmented or longer than 125 bytes", errNotWebSocket, op)
	case op == 0x0 && !f.inMessage:
		return fmt.Errorf("%w: a continuation frame with no message begun", errNotWebSocket)
	case (op == 0x1 || op == 0x2) && f.inMessage:
		return fmt.Errorf("%w: a new message before the last one's final fragment", errNotWebSocket)
	case h[1]&0x7f == 127 && h[2]&0x80 != 0:
		return fmt.Errorf("%w: a 64-bit length with its top bit set", errNotWebSocket)
	}
	return nil
}

// headerLen is the header's length as far as the bytes read tell: 2, plus
// 2 or 8 for an extended length, plus 4 for a masking key.
func (f *wsFrames) headerLen() int {
	if f.nhdr < 2 {
		return 2
	}
	n := 2
	switch f.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f.hdr[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// next consumes p up to the end of the current frame and returns how many
// bytes that took; when the frame ended there, ended is true and op is its
// opcode. A header that is not WebSocket is an error wrapping
// errNotWebSocket, with nothing consumed of p counted.
func (f *wsFrames) next(p []byte) (n int, ended bool, op byte, err error) {
	for n < len(p) {
		if !f.inPayload {
			var h []byte
			if f.nhdr == 0 && len(p)-n >= 14 {
				// The whole header is in p (14 bytes is the longest):
				// read it in place, the usual case.
				h = p[n:]
				f.hdr[0], f.hdr[1] = h[0], h[1]
				f.nhdr = 2
				n += f.headerLen()
			} else {
				k := copy(f.hdr[f.nhdr:f.headerLen()], p[n:])
				f.nhdr += k
				n += k
				if f.nhdr < f.headerLen() {
					continue // the length byte may have made the header longer
				}
				h = f.hdr[:]
			}
			if err := f.check(h[:f.headerLen()]); err != nil {
				return 0, false, 0, err
			}
			switch l := h[1] & 0x7f; l {
			case 126:
				f.left = uint64(binary.BigEndian.Uint16(h[2:4]))
			case 127:
				f.left = binary.BigEndian.Uint64(h[2:10])
			default:
				f.left = uint64(l)
			}
			f.inPayload = true
		}
		k := min(uint64(len(p)-n), f.left)
		n += int(k)
		f.left -= k
		if f.left == 0 {
			op = f.hdr[0] & 0x0f
			if op < 0x8 { // data: a message goes on until a final frame
				f.inMessage = f.hdr[0]&0x80 == 0
			}
			f.nhdr, f.inPayload = 0, false
			return n, true, op, nil
		}
	}
	return n, false, 0, nil
}
