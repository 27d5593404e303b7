package webclient

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// EchoWebSocket is the demo upstream's WebSocket endpoint: a minimal RFC
// 6455 server (no extensions, no fragmented messages) that first sends one
// text message {"upstream", "path", "x_user_id"} telling what it received,
// then echoes every text or binary message. It exists so the demo page and
// the browser tests can show a WebSocket authenticated by ?token= reaching
// an upstream; it is not a general WebSocket library.
func EchoWebSocket() http.Handler { return http.HandlerFunc(echoWebSocket) }

// RFC 6455 §1.3: the GUID hashed with the client's key.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA

	wsMaxPayload   = 64 << 10
	wsIdleTimeout  = 2 * time.Minute
	wsWriteTimeout = 10 * time.Second
)

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// wsAccept is the Sec-WebSocket-Accept value for a client key (§4.2.2).
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func echoWebSocket(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !headerHasToken(r.Header, "Upgrade", "websocket") || !headerHasToken(r.Header, "Connection", "upgrade") {
		w.Header().Set("Upgrade", "websocket")
		http.Error(w, "this endpoint speaks WebSocket only", http.StatusUpgradeRequired)
		return
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) != 16 || r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		http.Error(w, "bad WebSocket handshake", http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot take over the connection", http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(key))
	hello, _ := json.Marshal(struct {
		Upstream string `json:"upstream"`
		Path     string `json:"path"`
		UserID   string `json:"x_user_id"`
	}{"authsidecar demo echo", r.URL.Path, r.Header.Get("X-User-Id")})
	ws := &wsConn{conn: conn, rw: rw}
	if ws.write(opText, hello) != nil {
		return
	}
	ws.echo()
}

type wsConn struct {
	conn net.Conn
	rw   *bufio.ReadWriter
}

// echo answers frames until the peer closes, errs or idles out.
func (c *wsConn) echo() {
	for {
		c.conn.SetReadDeadline(time.Now().Add(wsIdleTimeout))
		fin, op, payload, err := c.read()
		if err != nil {
			var ce closeError
			if errors.As(err, &ce) {
				c.close(uint16(ce), ce.Error())
			}
			return
		}
		switch {
		case op == opClose:
			// Echo the status code back, as §5.5.1 asks.
			c.write(opClose, payload[:min(len(payload), 2)])
			return
		case op == opPing:
			if c.write(opPong, payload) != nil {
				return
			}
		case op == opPong:
		case !fin || op == opContinuation:
			c.close(1003, "fragmented messages are not supported")
			return
		case op == opText || op == opBinary:
			if c.write(op, payload) != nil {
				return
			}
		default:
			c.close(1002, "unknown opcode")
			return
		}
	}
}

// closeError is a protocol violation to answer with a close frame.
type closeError uint16

func (e closeError) Error() string {
	switch e {
	case 1009:
		return "message too big"
	default:
		return "protocol error"
	}
}

// read returns one frame, unmasked (§5.2). Client frames must be masked.
func (c *wsConn) read() (fin bool, op byte, payload []byte, err error) {
	var hdr [2]byte
	if _, err = io.ReadFull(c.rw, hdr[:]); err != nil {
		return
	}
	fin, op = hdr[0]&0x80 != 0, hdr[0]&0x0F
	if hdr[0]&0x70 != 0 || hdr[1]&0x80 == 0 {
		return fin, op, nil, closeError(1002) // reserved bits set, or unmasked
	}
	n := uint64(hdr[1] & 0x7F)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(c.rw, b[:]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(c.rw, b[:]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > wsMaxPayload || op >= opClose && n > 125 {
		return fin, op, nil, closeError(1009)
	}
	var mask [4]byte
	if _, err = io.ReadFull(c.rw, mask[:]); err != nil {
		return
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(c.rw, payload); err != nil {
		return
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return fin, op, payload, nil
}

// write sends one unmasked, final frame.
func (c *wsConn) write(op byte, payload []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	hdr := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, byte(n))
	case n <= 0xFFFF:
		hdr = append(hdr, 126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	c.rw.Write(hdr)
	c.rw.Write(payload)
	return c.rw.Flush()
}

func (c *wsConn) close(code uint16, reason string) {
	c.write(opClose, append(binary.BigEndian.AppendUint16(nil, code), reason...))
}
