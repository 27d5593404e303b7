package webclient

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestClientJS(t *testing.T) {
	srv := httptest.NewServer(ClientJS())
	defer srv.Close()
	src, _ := os.ReadFile("authclient.js")

	res, err := http.Get(srv.URL + ClientPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	etag := res.Header.Get("ETag")
	for name, want := range map[string]string{
		"Content-Type":           "text/javascript; charset=utf-8",
		"Cache-Control":          "public, max-age=300",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := res.Header.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if res.StatusCode != 200 || !bytes.Equal(body, src) {
		t.Fatalf("got %d and %d bytes, want 200 and authclient.js (%d bytes)", res.StatusCode, len(body), len(src))
	}
	if len(etag) < 10 || etag[0] != '"' {
		t.Fatalf("ETag: got %q, want a quoted content hash", etag)
	}

	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		req, _ := http.NewRequest("GET", srv.URL+ClientPath, nil)
		req.Header.Set("If-None-Match", inm)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotModified || len(b) != 0 || res.Header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: got %d (%d bytes, ETag %q), want 304 with the ETag", inm, res.StatusCode, len(b), res.Header.Get("ETag"))
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+ClientPath, nil)
	req.Header.Set("If-None-Match", `"stale"`)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("stale If-None-Match: got %v %v, want 200", res, err)
	}
	if res, err := http.Post(srv.URL+ClientPath, "text/plain", nil); err != nil || res.StatusCode != 405 {
		t.Errorf("POST: got %v %v, want 405", res, err)
	}
}

// Issue 7 caps the client at "5 KB minified-equivalent readable source":
// the code without its comments and indentation (what any minifier drops
// first; one that also renamed identifiers would only shrink it more). The
// comments that say why are not counted, so they need not be cut to make
// room for code.
func TestClientJSSize(t *testing.T) {
	src, err := os.ReadFile("authclient.js")
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "//") {
			code += len(line) + 1
		}
	}
	if code == 0 || code >= 5000 {
		t.Errorf("authclient.js has %d bytes of code (%d with comments and indentation), want 1..4999", code, len(src))
	}
	t.Logf("authclient.js: %d bytes of code, %d bytes in all", code, len(src))
}

func TestDemoPage(t *testing.T) {
	rec := httptest.NewRecorder()
	DemoPage().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if ct := rec.Header().Get("Content-Type"); rec.Code != 200 || ct != "text/html; charset=utf-8" {
		t.Fatalf("got %d %q", rec.Code, ct)
	}
	if body := rec.Body.String(); !strings.Contains(body, `from "/api/auth/client.js"`) {
		t.Error("the demo page does not import the served client")
	}
}

// wsDial performs the client side of the RFC 6455 handshake by hand.
func wsDial(t *testing.T, srv *httptest.Server, path, userID string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "+key+"\r\nX-User-Id: "+userID+"\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 || res.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("handshake: got %d accept %q", res.StatusCode, res.Header.Get("Sec-WebSocket-Accept"))
	}
	return conn, br
}

func wsSend(t *testing.T, conn net.Conn, op byte, payload []byte) {
	t.Helper()
	mask := [4]byte{1, 2, 3, 4}
	frame := []byte{0x80 | op}
	if len(payload) < 126 {
		frame = append(frame, 0x80|byte(len(payload)))
	} else {
		frame = append(frame, 0x80|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(len(payload)))
	}
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
}

func wsRecv(t *testing.T, br *bufio.Reader) (byte, []byte) {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if hdr[1]&0x80 != 0 {
		t.Fatal("server frame is masked")
	}
	n := int(hdr[1] & 0x7F)
	if n == 126 {
		var b [2]byte
		io.ReadFull(br, b[:])
		n = int(binary.BigEndian.Uint16(b[:]))
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return hdr[0] & 0x0F, p
}

func TestEchoWebSocket(t *testing.T) {
	srv := httptest.NewServer(EchoWebSocket())
	defer srv.Close()
	conn, br := wsDial(t, srv, "/ws/echo", "user-1")

	op, p := wsRecv(t, br)
	var hello struct {
		Path   string `json:"path"`
		UserID string `json:"x_user_id"`
	}
	if op != opText || json.Unmarshal(p, &hello) != nil || hello.UserID != "user-1" || hello.Path != "/ws/echo" {
		t.Fatalf("greeting: got op %d %s", op, p)
	}
	big := bytes.Repeat([]byte("x"), 300)
	for _, msg := range [][]byte{[]byte("hello"), big} {
		wsSend(t, conn, opText, msg)
		if op, p := wsRecv(t, br); op != opText || !bytes.Equal(p, msg) {
			t.Errorf("echo of %d bytes: got op %d, %d bytes", len(msg), op, len(p))
		}
	}
	wsSend(t, conn, opPing, []byte("p"))
	if op, p := wsRecv(t, br); op != opPong || string(p) != "p" {
		t.Errorf("ping: got op %d %q, want pong", op, p)
	}
	wsSend(t, conn, opClose, []byte{0x03, 0xE8})
	if op, p := wsRecv(t, br); op != opClose || !bytes.Equal(p, []byte{0x03, 0xE8}) {
		t.Errorf("close: got op %d %v, want the status echoed", op, p)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after close: got %v, want EOF", err)
	}
}

func TestEchoWebSocketRefusals(t *testing.T) {
	srv := httptest.NewServer(EchoWebSocket())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/ws/echo")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: got %d, want 426", res.StatusCode)
	}

	// An unmasked client frame is a protocol error: close 1002.
	conn, br := wsDial(t, srv, "/ws/echo", "")
	wsRecv(t, br)
	conn.Write([]byte{0x81, 0x02, 'h', 'i'})
	if op, p := wsRecv(t, br); op != opClose || len(p) < 2 || binary.BigEndian.Uint16(p) != 1002 {
		t.Errorf("unmasked frame: got op %d %v, want close 1002", op, p)
	}
}
