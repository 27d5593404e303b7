package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/internal/wstest"
)

// wsHandshake writes a WebSocket upgrade on a raw connection (the way a
// browser does, token in the query) and returns the status line and the
// connection's reader.
func wsHandshake(t *testing.T, s *stack, target string) (string, *bufio.Reader, net.Conn) {
	t.Helper()
	u, _ := url.Parse(s.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", target, u.Host)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for { // skip the headers
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(status), br, conn
}

// echoUpgrade is an upstream that accepts the upgrade and echoes each
// frame (the client's are masked, its own are not).
func echoUpgrade(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "websocket" {
		http.Error(w, "want upgrade", 400)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Seen-User: %s\r\n\r\n", r.Header.Get("X-User-Id"))
	brw.Flush()
	for {
		f, err := wstest.ReadFrame(brw, true)
		if err != nil || wstest.WriteFrame(conn, f.Op, f.Payload, false) != nil {
			return
		}
	}
}

func TestWebSocketThroughProxy(t *testing.T) {
	s := newStack(t)
	_, uid, jwt := s.user("kim@example.com")
	s.up.handle = echoUpgrade

	status, br, conn := wsHandshake(t, s, "/ws/chat?room=7&token="+jwt)
	if !strings.Contains(status, "101") {
		t.Fatalf("got %q, want 101 Switching Protocols", status)
	}
	if err := wstest.WriteFrame(conn, wstest.OpText, []byte("ping"), true); err != nil {
		t.Fatal(err)
	}
	if f, err := wstest.ReadFrame(br, false); err != nil || string(f.Payload) != "ping" {
		t.Fatalf("echo through the tunnel: got %+v %v", f, err)
	}
	got := s.up.take()
	if len(got) != 1 || got[0].Header.Get("X-User-Id") != uid || got[0].RawQuery != "room=7" {
		t.Fatalf("upstream saw %+v, want X-User-Id %s and query room=7", got, uid)
	}

	for _, target := range []string{"/ws/chat", "/ws/chat?token=bogus", "/ws/chat?token=" + jwt[:len(jwt)-4] + "AAAA"} {
		status, _, _ := wsHandshake(t, s, target)
		if !strings.Contains(status, "401") {
			t.Errorf("%s: got %q, want 401", target, status)
		}
	}
	if got := s.up.take(); len(got) != 0 {
		t.Errorf("refused upgrades reached the upstream: %+v", got)
	}
	// Passthrough: tunneled with no token, identity stripped.
	status, _, _ = wsHandshake(t, s, "/ws/browser")
	if !strings.Contains(status, "101") {
		t.Fatalf("passthrough: got %q, want 101", status)
	}
}

// TestSSEStreams: each event reaches the client before the upstream sends
// the next one.
func TestSSEStreams(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("lee@example.com")
	next := make(chan struct{})
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 3 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			rc.Flush()
			<-next // the client must have seen this event before we go on
		}
	}
	req, _ := http.NewRequest("GET", s.srv.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
			t.Fatalf("event %d: got %q %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
}

// zeros is a 50 MB body that allocates nothing.
type zeros struct{ left int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), z.left)
	clear(p[:n])
	z.left -= n
	return n, nil
}

// TestLargeUploadStreams: a 50 MB upload reaches the upstream whole
// without the proxy buffering it (allocation stays far below the size).
func TestLargeUploadStreams(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("max@example.com")
	const size = 50 << 20
	received := make(chan int64, 1)
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received <- n
		w.WriteHeader(204)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest("POST", s.srv.URL+"/api/upload", &zeros{left: size})
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+jwt)
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	runtime.ReadMemStats(&after)
	if res.StatusCode != 204 {
		t.Fatalf("got %d, want 204", res.StatusCode)
	}
	if n := <-received; n != size {
		t.Fatalf("upstream received %d bytes, want %d", n, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("uploading %d MB allocated %d MB: the body was buffered", size>>20, alloc>>20)
	}
}
