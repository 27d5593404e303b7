package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectionNamesDropped: the headers an upstream's Connection header
// names never reach the client, when the header also says close (which
// makes net/http drop it before any hop-by-hop removal can read it), on
// every forwarding path, in every spelling net/http accepts; a 1xx
// answer's too; the headers it does not name pass.
func TestConnectionNamesDropped(t *testing.T) {
	answers := []struct{ name, head string }{
		{"one line", "Connection: X-Secret, close\r\n"},
		{"close first", "Connection: close, X-Secret\r\n"},
		{"two lines", "Connection: X-Secret\r\nConnection: close\r\n"},
		{"lower case", "connection: x-secret, CLOSE\r\n"},
		{"two names", "Connection: X-Other,X-Secret , close\r\n"},
		{"folded", "Connection: X-Secret,\r\n close\r\n"},
		{"without close", "Connection: X-Secret\r\n"},
	}
	for _, tc := range answers {
		for _, rq := range hopRequests {
			t.Run(tc.name+" "+rq.path, func(t *testing.T) {
				addr := rawProxy(t, func(r *http.Request) string {
					return "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n" + strings.NewReplacer("Secret", "Hint", "secret", "hint").Replace(tc.head) +
						"X-Hint: leaked\r\n\r\n" +
						"HTTP/1.1 403 Forbidden\r\n" + tc.head + "X-Secret: leaked\r\nX-Other: leaked\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nno"
				})
				a := rawExchange(t, addr, rq.request)
				if a.final.StatusCode != http.StatusForbidden {
					t.Fatalf("got %d, want 403", a.final.StatusCode)
				}
				if v, ok := a.final.Header["X-Secret"]; ok {
					t.Errorf("client got X-Secret: %q", v)
				}
				if got := a.final.Header.Get("X-Kept"); got != "yes" {
					t.Errorf("got X-Kept %q, want yes", got)
				}
				if strings.Contains(tc.head, "Other") && a.final.Header.Get("X-Other") != "" {
					t.Errorf("client got X-Other")
				}
				if rq.path != "upgrade" {
					// ReverseProxy writes each 1xx as it comes; only the
					// final answer is the point there.
					if len(a.informational) != 1 {
						t.Fatalf("got %d 1xx answers, want 1", len(a.informational))
					}
					h := a.informational[0].Header
					if v, ok := h["X-Hint"]; ok {
						t.Errorf("client got X-Hint on the 103: %q", v)
					}
					if h.Get("Link") == "" {
						t.Errorf("the 103 lost its Link")
					}
				}
			})
		}
	}
}

// TestConnectionNamesDropped101: a 101's Connection header is passed on
// (the client needs "Upgrade"), but not the other headers it names.
func TestConnectionNamesDropped101(t *testing.T) {
	addr := rawProxy(t, func(r *http.Request) string {
		return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade, X-Secret\r\nX-Secret: leaked\r\n" +
			"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
	})
	a := rawExchange(t, addr, hopRequests[3].request)
	if a.final.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("got %d, want 101", a.final.StatusCode)
	}
	if v, ok := a.final.Header["X-Secret"]; ok {
		t.Errorf("client got X-Secret: %q", v)
	}
	if a.final.Header.Get("Upgrade") != "websocket" || a.final.Header.Get("Sec-Websocket-Accept") == "" {
		t.Errorf("the 101 lost what the client needs: %v", a.final.Header)
	}
}

// TestHopScan feeds answers to the scan split at every byte, and wants
// each header section's names whatever the split.
func TestHopScan(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   string // section:name,... in order
		final  int
	}{
		{"plain", "HTTP/1.1 200 OK\r\nConnection: X-A, close\r\nContent-Length: 0\r\n\r\n", "0:X-A", 0},
		{"none", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "", 0},
		{"keep-alive only", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n", "", 0},
		{"bare LF", "HTTP/1.1 200 OK\nConnection: X-A\n\n", "0:X-A", 0},
		{"folded", "HTTP/1.1 200 OK\r\nConnection: X-A,\r\n\tX-B\r\nX-C: 1\r\n\r\n", "0:X-A,X-B", 0},
		{"continuation of another field", "HTTP/1.1 200 OK\r\nX-C: 1\r\n X-D\r\nConnection: X-A\r\n\r\n", "0:X-A", 0},
		{"1xx then final", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nConnection: X-H\r\n\r\nHTTP/1.1 200 OK\r\nConnection: X-A\r\n\r\n", "1:X-H 2:X-A", 2},
		{"101 is final", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade, X-A\r\n\r\nHTTP/1.1 200 OK\r\nConnection: X-B\r\n\r\n", "0:Upgrade,X-A", 0},
		{"body not scanned", "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nHTTP/1.1 200 OK\r\nConnection: X-B\r\n\r\n", "", 0},
		{"field named like it", "HTTP/1.1 200 OK\r\nConnection-X: X-B\r\nXConnection: X-C\r\n\r\n", "", 0},
		{"spaces before the code", "HTTP/1.1   103 Early\r\nConnection: X-H\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", "0:X-H", 1},
	}
	for _, tt := range tests {
		for split := 1; split <= len(tt.answer); split++ {
			var s hopScan
			var out hopNames
			s.begin(&out)
			for b := []byte(tt.answer); len(b) > 0; {
				n := min(split, len(b))
				s.feed(b[:n])
				b = b[n:]
			}
			var got []string
			for _, sec := range out.list {
				got = append(got, fmt.Sprintf("%d:%s", sec.section, strings.Join(sec.names, ",")))
			}
			if g := strings.Join(got, " "); g != tt.want || out.final != tt.final {
				t.Fatalf("%s, split %d: got %q final %d, want %q final %d", tt.name, split, g, out.final, tt.want, tt.final)
			}
		}
	}
}

// TestTapConnHalfClose: through an upgrade, the client's half-close
// reaches the upstream as the end of its input, and what the upstream
// writes after it still reaches the client (ReverseProxy ends the tunnel
// when the upstream connection cannot half-close).
func TestTapConnHalfClose(t *testing.T) {
	addr := rawProxyServing(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		got, _ := io.ReadAll(br) // to the client's half-close
		io.WriteString(c, "after "+string(got))
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, hopRequests[3].request)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("got %v %v, want 101", res, err)
	}
	io.WriteString(c, "hello")
	c.(*net.TCPConn).CloseWrite()
	if got, _ := io.ReadAll(br); string(got) != "after hello" {
		t.Fatalf("got %q, want %q", got, "after hello")
	}
}

// BenchmarkHopScan: the scan of a common answer's header, as conns pays it
// on every answer (Node's, with Connection: keep-alive, and Go's, without
// a Connection header), read in one piece with the start of the body.
func BenchmarkHopScan(b *testing.B) {
	for name, answer := range map[string]string{
		"node": "HTTP/1.1 200 OK\r\nX-Powered-By: Express\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 11\r\n" +
			"ETag: W/\"b-Ai2R8hgEarLmHKwesT1qcY913ys\"\r\nDate: Thu, 28 Nov 2030 07:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n{\"ok\":true}",
		"go": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 28 Nov 2030 07:00:00 GMT\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
	} {
		b.Run(name, func(b *testing.B) {
			var s hopScan
			var out hopNames
			buf := []byte(answer)
			b.ReportAllocs()
			for b.Loop() {
				s.begin(&out)
				s.feed(buf)
			}
		})
	}
}
