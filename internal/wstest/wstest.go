// Package wstest is a minimal, strict RFC 6455 peer for tests: the
// opening handshake on both sides and a frame reader that refuses
// anything malformed, so a test can tell "the proxy put a close frame
// between two frames" from "the proxy cut a frame". The module has no
// WebSocket library, and tests of a proxy want to see every byte anyway.
package wstest

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Opcodes (RFC 6455 §5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// acceptGUID is the fixed GUID of RFC 6455 §1.3.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// Accept answers a WebSocket upgrade (the server side) and returns the
// hijacked connection and a reader holding whatever the client already
// sent past its request.
func Accept(w http.ResponseWriter, r *http.Request) (net.Conn, *bufio.Reader, error) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || key == "" {
		http.Error(w, "want a WebSocket upgrade", http.StatusBadRequest)
		return nil, nil, errors.New("wstest: not a WebSocket upgrade")
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("wstest: hijack: %w", err)
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", acceptKey(key))
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("wstest: write 101: %w", err)
	}
	return conn, brw.Reader, nil
}

func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// Dial opens a WebSocket to target (a request-target such as
// "/ws/chat?token=...") on addr (host:port), with extra header lines. It
// returns the status code; on 101 also the connection and its reader,
// after checking Sec-WebSocket-Accept.
func Dial(addr, target string, header ...string) (int, net.Conn, *bufio.Reader, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("wstest: dial %s: %w", addr, err)
	}
	var k [16]byte
	rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n", target, addr, key)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		conn.Close()
		return 0, nil, nil, fmt.Errorf("wstest: write upgrade: %w", err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		conn.Close()
		return 0, nil, nil, fmt.Errorf("wstest: read upgrade answer: %w", err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		res.Body.Close()
		conn.Close()
		return res.StatusCode, nil, nil, nil
	}
	if got := res.Header.Get("Sec-WebSocket-Accept"); got != acceptKey(key) {
		conn.Close()
		return res.StatusCode, nil, nil, fmt.Errorf("wstest: Sec-WebSocket-Accept %q, want %q", got, acceptKey(key))
	}
	return res.StatusCode, conn, br, nil
}

// Frame is one frame as read, payload unmasked.
type Frame struct {
	Fin     bool
	Op      byte
	Masked  bool
	Payload []byte
}

// CloseCode returns a close frame's status code and reason; 1005 (no
// status) when the payload is empty.
func (f Frame) CloseCode() (int, string) {
	if len(f.Payload) < 2 {
		return 1005, ""
	}
	return int(binary.BigEndian.Uint16(f.Payload)), string(f.Payload[2:])
}

// ErrMalformed is wrapped by ReadFrame's refusals.
var ErrMalformed = errors.New("malformed WebSocket frame")

// ReadFrame reads one whole frame and refuses what RFC 6455 forbids:
// reserved bits (no extension is negotiated here), unknown opcodes,
// control frames that are fragmented or longer than 125 bytes, a 64-bit
// length with its top bit set, non-minimal lengths, and a mask bit that
// differs from wantMasked (client frames are masked, server frames not).
// A frame cut short is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, wantMasked bool) (Frame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err // io.EOF only at a frame boundary
	}
	f := Frame{Fin: h[0]&0x80 != 0, Op: h[0] & 0x0f, Masked: h[1]&0x80 != 0}
	switch {
	case h[0]&0x70 != 0:
		return f, fmt.Errorf("%w: reserved bits %#x", ErrMalformed, h[0]&0x70)
	case f.Op > OpBinary && f.Op < OpClose || f.Op > OpPong:
		return f, fmt.Errorf("%w: opcode %#x", ErrMalformed, f.Op)
	case f.Masked != wantMasked:
		return f, fmt.Errorf("%w: masked %v, want %v", ErrMalformed, f.Masked, wantMasked)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, unexpected(err)
		}
		if n = uint64(binary.BigEndian.Uint16(b[:])); n < 126 {
			return f, fmt.Errorf("%w: 16-bit length %d", ErrMalformed, n)
		}
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return f, unexpected(err)
		}
		if n = binary.BigEndian.Uint64(b[:]); n>>63 != 0 || n <= 0xffff {
			return f, fmt.Errorf("%w: 64-bit length %d", ErrMalformed, n)
		}
	}
	if f.Op >= OpClose && (!f.Fin || n > 125) {
		return f, fmt.Errorf("%w: control frame fin %v length %d", ErrMalformed, f.Fin, n)
	}
	if n > 64<<20 {
		return f, fmt.Errorf("%w: %d bytes is more than a test sends", ErrMalformed, n)
	}
	var key [4]byte
	if f.Masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, unexpected(err)
		}
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return f, unexpected(err)
	}
	if f.Masked {
		for i := range f.Payload {
			f.Payload[i] ^= key[i%4]
		}
	}
	if f.Op == OpClose && len(f.Payload) == 1 {
		return f, fmt.Errorf("%w: close payload of one byte", ErrMalformed)
	}
	return f, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame appends one final frame with the minimal length encoding,
// masked with a random key when masked (as a client must).
func AppendFrame(b []byte, op byte, payload []byte, masked bool) []byte {
	b = append(b, 0x80|op)
	var mbit byte
	if masked {
		mbit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, mbit|byte(n))
	case n <= 0xffff:
		b = append(b, mbit|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, mbit|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !masked {
		return append(b, payload...)
	}
	var key [4]byte
	rand.Read(key[:])
	b = append(b, key[:]...)
	start := len(b)
	b = append(b, payload...)
	for i := range payload {
		b[start+i] ^= key[i%4]
	}
	return b
}

// WriteFrame writes one final frame.
func WriteFrame(w io.Writer, op byte, payload []byte, masked bool) error {
	_, err := w.Write(AppendFrame(nil, op, payload, masked))
	return err
}

// ClosePayload is a close frame's payload: code, then reason.
func ClosePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}
