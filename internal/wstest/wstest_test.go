package wstest

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestReadFrame: what AppendFrame writes reads back, and each thing RFC
// 6455 forbids is refused, so a test built on ReadFrame notices a proxy
// that cuts or garbles frames.
func TestReadFrame(t *testing.T) {
	for _, n := range []int{0, 125, 126, 0xffff, 0x10000} {
		for _, masked := range []bool{false, true} {
			payload := bytes.Repeat([]byte{'x'}, n)
			f, err := ReadFrame(bytes.NewReader(AppendFrame(nil, OpBinary, payload, masked)), masked)
			if err != nil || f.Op != OpBinary || !f.Fin || f.Masked != masked || !bytes.Equal(f.Payload, payload) {
				t.Errorf("%d bytes, masked %v: got op %#x fin %v err %v", n, masked, f.Op, f.Fin, err)
			}
		}
	}
	good := AppendFrame(nil, OpText, []byte("hello"), false)
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"reserved bit", []byte{0xC1, 0}, ErrMalformed},
		{"unknown opcode", []byte{0x83, 0}, ErrMalformed},
		{"masked from a server", AppendFrame(nil, OpText, []byte("a"), true), ErrMalformed},
		{"fragmented close", []byte{0x08, 0}, ErrMalformed},
		{"long ping", append([]byte{0x89, 126, 0, 126}, make([]byte, 126)...), ErrMalformed},
		{"16-bit length under 126", append([]byte{0x82, 126, 0, 5}, make([]byte, 5)...), ErrMalformed},
		{"64-bit length top bit", []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, ErrMalformed},
		{"one-byte close payload", []byte{0x88, 1, 3}, ErrMalformed},
		{"cut in the payload", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"cut in the header", []byte{0x82, 126, 1}, io.ErrUnexpectedEOF},
		{"nothing", nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadFrame(bytes.NewReader(tt.raw), false); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}
