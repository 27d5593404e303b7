package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawProxy is a proxy (passthrough under /open/, public elsewhere) on
// NewUpstream, in front of a hand-written upstream that reads each request
// (and its body) and writes answer(request) as it is; it closes the
// connection when the answer says close.
func rawProxy(t *testing.T, answer func(r *http.Request) string) string {
	t.Helper()
	return rawProxyServing(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			a := answer(req)
			if req.Method == http.MethodHead {
				a = a[:strings.LastIndex(a, "\r\n\r\n")+4]
			}
			io.WriteString(c, a)
			if strings.Contains(strings.ToLower(a), "close\r\n") || strings.HasPrefix(a, "HTTP/1.1 101") {
				return
			}
		}
	})
}

// rawProxyServing is rawProxy with an upstream that serves each
// connection as it likes; it returns the proxy's address.
func rawProxyServing(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	up := newRawUpstream(t, serve)
	u, _ := url.Parse("http://" + up.addr)
	// One upstream slot: a request that leaked its slot makes the next
	// one wait, then answer 503.
	rt := testUpstream(t, UpstreamOptions{MaxConns: 1, ResponseHeaderTimeout: 5 * time.Second})
	p, err := New(Options{Upstream: u, Auth: http.NotFoundHandler(), Verifier: refuseAll{}, Passthrough: []string{"/open/"}, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// rawAnswer is what a client read back: the 1xx answers, then the final
// one (its body read, unless it switched protocols).
type rawAnswer struct {
	informational []*http.Response
	final         *http.Response
	body          string
}

// rawExchange writes request on a new connection to addr and reads the
// answers.
func rawExchange(t *testing.T, addr, request string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(request)))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var a rawAnswer
	for {
		res, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("reading the answer: %v (after %d 1xx)", err, len(a.informational))
		}
		if res.StatusCode >= 100 && res.StatusCode <= 199 && res.StatusCode != http.StatusSwitchingProtocols {
			a.informational = append(a.informational, res)
			continue
		}
		a.final = res
		if res.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(res.Body)
			a.body = string(b)
		}
		return a
	}
}

// hopRequests are the forwarding paths: a bodiless GET or HEAD goes by
// conns, a request with a body by the Transport, a WebSocket upgrade by
// the Transport through httputil.ReverseProxy.
var hopRequests = []struct{ path, request string }{
	{"conns", "GET /open/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"},
	{"conns HEAD", "HEAD /open/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"},
	{"Transport", "POST /open/x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nx=1"},
	{"upgrade", "GET /open/ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"},
}
