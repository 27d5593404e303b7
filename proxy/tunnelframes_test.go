package proxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/wstest"
	"github.com/authsidecar/authsidecar/proxy"
)

// fragment is one frame of a fragmented message: FIN cleared unless fin.
func fragment(op byte, payload []byte, masked, fin bool) []byte {
	f := wstest.AppendFrame(nil, op, payload, masked)
	if !fin {
		f[0] &^= 0x80
	}
	return f
}

// TestWebSocketCloseNotBetweenFragments: at the deadline the upstream is
// in the middle of a fragmented message (its first fragment sent, the
// rest to come). The close frame toward the client waits for the message's
// last fragment, not only for the end of a frame: the client never sees a
// message cut by a close. A ping between the fragments still passes.
func TestWebSocketCloseNotBetweenFragments(t *testing.T) {
	const leeway = 200 * time.Millisecond
	s := newWSStack(t, leeway)
	exp := time.Unix(time.Now().Unix()+2, 0)
	deadline := exp.Add(leeway)
	client, up := s.open(t, "/ws/frag?token="+s.token("user-6", exp))
	if _, err := up.conn.Write(fragment(wstest.OpText, []byte("first "), false, false)); err != nil {
		t.Fatal(err)
	}
	if f, err := client.read(); err != nil || f.Fin || f.Op != wstest.OpText {
		t.Fatalf("first fragment: got %+v %v", f, err)
	}
	// Past the deadline, the message still open: nothing reaches the
	// client, a close frame least of all.
	time.Sleep(time.Until(deadline) + 300*time.Millisecond)
	client.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if f, err := client.read(); !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
		t.Fatalf("mid-message, past the deadline: got %+v %v, want nothing (the message is not over)", f, err)
	}
	client.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := up.conn.Write(append(fragment(wstest.OpPing, []byte("p"), false, true), fragment(0, []byte("last"), false, true)...)); err != nil {
		t.Fatal(err)
	}
	if f, err := client.read(); err != nil || f.Op != wstest.OpPing {
		t.Fatalf("ping between the fragments: got %+v %v", f, err)
	}
	if f, err := client.read(); err != nil || f.Op != 0 || !f.Fin || !bytes.Equal(f.Payload, []byte("last")) {
		t.Fatalf("last fragment: got %+v %v, want it before any close frame", f, err)
	}
	cs := awaitClose(client, true, nil)
	checkClosed(t, "client", cs, deadline)
	if cs.frames != 0 {
		t.Errorf("%d frames between the last fragment and the close frame", cs.frames)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestWebSocketNotWebSocketBytes: bytes after the upgrade that are not
// RFC 6455 frames (an HTTP answer, a client's unmasked frame, a fragmented
// control frame, an unknown opcode, a continuation with no message) end
// the tunnel at once: neither peer gets them, both connections close, the
// log says which peer sent what, and the access log and the metric say
// not_websocket. A live token, so it is not the expiry.
func TestWebSocketNotWebSocketBytes(t *testing.T) {
	tests := []struct {
		name       string
		fromClient bool
		bytes      []byte
		why        string
	}{
		{"an HTTP answer from the upstream", false, []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), "upstream"},
		{"an HTTP request from the client", true, []byte("GET /admin HTTP/1.1\r\nHost: x\r\n\r\n"), "client"},
		{"an unmasked frame from the client", true, wstest.AppendFrame(nil, wstest.OpText, []byte("hi"), false), "unmasked"},
		{"a masked frame from the upstream", false, wstest.AppendFrame(nil, wstest.OpText, []byte("hi"), true), "masked"},
		{"a fragmented ping", false, fragment(wstest.OpPing, []byte("p"), false, false), "control"},
		{"a reserved opcode", false, fragment(0x3, []byte("x"), false, true), "opcode"},
		{"a continuation without a message", false, fragment(0, []byte("x"), false, true), "continuation"},
		{"a new message inside another", false, append(fragment(wstest.OpText, []byte("a"), false, false), fragment(wstest.OpText, []byte("b"), false, true)...), "message"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newWSStack(t, 0)
			user := "user-nb-" + string(rune('a'+i))
			client, up := s.open(t, "/ws/chat?token="+s.token(user, time.Now().Add(time.Hour)))
			roundTrip(t, client, up)
			from, to := up, client
			if tt.fromClient {
				from, to = client, up
			}
			if _, err := from.conn.Write(tt.bytes); err != nil {
				t.Fatal(err)
			}
			// The receiving peer gets nothing of it (at most a frame
			// before the bad one), then the end of the connection.
			var got []wstest.Frame
			var err error
			for {
				var f wstest.Frame
				if f, err = to.read(); err != nil {
					break
				}
				got = append(got, f)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
				t.Errorf("receiving peer: got %v after %d frames, want the connection closed", err, len(got))
			}
			for _, f := range got {
				if f.Op != wstest.OpText || !bytes.Equal(f.Payload, []byte("a")) || f.Fin {
					t.Errorf("receiving peer got %+v of the bad bytes", f)
				}
			}
			if _, err := from.read(); err == nil {
				t.Error("sending peer: its connection is still open")
			}
			l := s.accessLine(t, user)
			if l["close_reason"] != "not_websocket" {
				t.Errorf("access log: got %v, want close_reason not_websocket", l)
			}
			if n := s.closedBy(t, "not_websocket"); n != 1 {
				t.Errorf("websocket_closed_total{reason=not_websocket}: got %v, want 1", n)
			}
			log := s.log.String()
			if !strings.Contains(log, "websocket tunnel closed: bytes that are not WebSocket frames") || !strings.Contains(log, tt.why) {
				t.Errorf("log: want a line saying the tunnel was closed for non-WebSocket bytes and %q:\n%s", tt.why, log)
			}
			if strings.Contains(log, "token=") {
				t.Errorf("log holds the token:\n%s", log)
			}
		})
	}
	_ = proxy.CloseReasonTokenExpired
}
