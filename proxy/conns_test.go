package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConnsEligible(t *testing.T) {
	c := newConns(time.Second, 4)
	get := func(mutate func(r *http.Request)) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/api/tasks", nil)
		r.Header.Set("X-User-Id", "u1")
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	cases := []struct {
		name string
		req  *http.Request
		want bool
	}{
		{"GET", get(nil), connAliveCheck},
		{"HEAD", get(func(r *http.Request) { r.Method = http.MethodHead }), connAliveCheck},
		{"GET with NoBody", get(func(r *http.Request) { r.Body = http.NoBody }), connAliveCheck},
		{"POST", get(func(r *http.Request) { r.Method = http.MethodPost }), false},
		{"DELETE", get(func(r *http.Request) { r.Method = http.MethodDelete }), false},
		{"GET with a body", get(func(r *http.Request) { r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), 1 }), false},
		{"GET with a body of unknown length", get(func(r *http.Request) { r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), -1 }), false},
		{"GET with trailers", get(func(r *http.Request) { r.Trailer = http.Header{"X-T": nil} }), false},
		{"GET chunked", get(func(r *http.Request) { r.TransferEncoding = []string{"chunked"} }), false},
		{"upgrade", get(func(r *http.Request) { r.Header.Set("Upgrade", "websocket") }), false},
		{"https", get(func(r *http.Request) { r.URL.Scheme = "https" }), false},
		{"line break in a value", get(func(r *http.Request) { r.Header.Set("X-User-Id", "a\r\nX-Admin: 1") }), false},
		{"NUL in a value", get(func(r *http.Request) { r.Header.Set("X-User-Id", "a\x00") }), false},
		{"tab in a value", get(func(r *http.Request) { r.Header.Set("X-User-Id", "a\tb") }), connAliveCheck},
	}
	for _, tc := range cases {
		if got := c.eligible(tc.req); got != tc.want {
			t.Errorf("%s: eligible %v, want %v", tc.name, got, tc.want)
		}
	}
}

// rawUpstream is an upstream written by hand, to answer what net/http's
// server never would; serve gets each connection, numbered from 1.
type rawUpstream struct {
	addr  string
	conns atomic.Int32
}

func newRawUpstream(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(u.conns.Add(1))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(n, c, bufio.NewReader(c))
			}()
		}
	}()
	return u
}

// testUpstream is NewUpstream whose idle connections close with the test
// (a raw upstream waits for them).
func testUpstream(t *testing.T, o UpstreamOptions) http.RoundTripper {
	rt := NewUpstream(o)
	t.Cleanup(rt.(*boundedTransport).CloseIdleConnections)
	return rt
}

// readRequest reads one request's header (the requests here have no
// body), false at the connection's end.
func readRequest(br *bufio.Reader) bool {
	_, err := http.ReadRequest(br)
	return err == nil
}

// fetch sends a GET through rt and reads the whole answer.
func fetch(t *testing.T, rt http.RoundTripper, ctx context.Context, rawURL string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestConnsReuse: answers read to their end leave the connection for the
// next request, sequential requests share one connection, and requests
// side by side get their own answers.
func TestConnsReuse(t *testing.T) {
	var accepted atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "5")
			return
		}
		fmt.Fprintf(w, "answer to %s", r.URL.Query().Get("n"))
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	rt := testUpstream(t, UpstreamOptions{MaxConns: 8})
	for i := range 20 {
		got, err := fetch(t, rt, context.Background(), fmt.Sprintf("%s/x?n=%d", up.URL, i))
		if want := fmt.Sprintf("answer to %d", i); err != nil || got != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
		}
		req, _ := http.NewRequest(http.MethodHead, up.URL+"/x", nil)
		res, err := rt.RoundTrip(req)
		if err != nil || res.ContentLength != 5 {
			t.Fatalf("HEAD %d: %v, %+v", i, err, res)
		}
		res.Body.Close()
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("40 requests one after another opened %d connections, want 1", n)
	}

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				n := g*1000 + i
				got, err := fetch(t, rt, context.Background(), fmt.Sprintf("%s/x?n=%d", up.URL, n))
				if want := fmt.Sprintf("answer to %d", n); err != nil || got != want {
					t.Errorf("request %d: %q, %v; want %q", n, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := accepted.Load(); n > 9 {
		t.Errorf("8 clients side by side opened %d connections in all, want at most 9", n)
	}
}

// TestConnsNotReused: a connection whose answer did not end cleanly, or
// asked to close, or brought bytes nobody asked for, is never used for
// another request; the next request gets its own answer on a new one.
func TestConnsNotReused(t *testing.T) {
	const second = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
	cases := []struct {
		name string
		// first answers the connection's first request.
		first func(c net.Conn)
		// readAll: the client reads the first answer to its end.
		readAll bool
		want    string
	}{
		{"Connection: close", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nfirst")
		}, true, "first"},
		{"HTTP/1.0", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
		}, true, "first"},
		{"stray bytes in the same packet", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"+"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstolen")
		}, true, "first"},
		{"stray bytes later", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstolen")
		}, true, "first"},
		{"body cut short", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nfirst")
			time.Sleep(20 * time.Millisecond)
			c.(*net.TCPConn).CloseWrite()
		}, true, "first"},
		{"body not read to its end", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst")
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, "rest!")
		}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newRawUpstream(t, func(n int, c net.Conn, br *bufio.Reader) {
				for i := 0; readRequest(br); i++ {
					if n == 1 && i == 0 {
						tc.first(c)
						continue
					}
					io.WriteString(c, second)
				}
			})
			rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
			req, _ := http.NewRequest(http.MethodGet, "http://"+up.addr+"/x", nil)
			res, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.readAll {
				b, _ := io.ReadAll(res.Body)
				if string(b) != tc.want {
					t.Errorf("first answer %q, want %q", b, tc.want)
				}
			} else {
				res.Body.Read(make([]byte, 2))
			}
			res.Body.Close()
			time.Sleep(60 * time.Millisecond) // the late bytes are in
			got, err := fetch(t, rt, context.Background(), "http://"+up.addr+"/x")
			if err != nil || got != "second" {
				t.Errorf("second request: %q, %v; want %q", got, err, "second")
			}
			if n := up.conns.Load(); n != 2 {
				t.Errorf("%d connections, want 2 (a new one for the second request)", n)
			}
		})
	}
}

// TestConnsRetry: an idle connection the upstream closes as the next
// request goes out (it read the request and answered nothing) is retried
// on a new connection, as the Transport does; a new connection that
// fails so is not.
func TestConnsRetry(t *testing.T) {
	up := newRawUpstream(t, func(n int, c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d", n)
		}
		readRequest(br) // and close without an answer
	})
	rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
	for i, want := range []string{"1", "2", "3"} {
		got, err := fetch(t, rt, context.Background(), "http://"+up.addr+"/x")
		if err != nil || got != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
		}
	}

	dead := newRawUpstream(t, func(_ int, _ net.Conn, br *bufio.Reader) { readRequest(br) })
	if _, err := fetch(t, rt, context.Background(), "http://"+dead.addr+"/x"); err == nil {
		t.Error("an upstream that never answers: no error")
	}
	if n := dead.conns.Load(); n != 1 {
		t.Errorf("a new connection that failed was retried: %d connections, want 1", n)
	}
}

// TestConnsDeadlines: the header wait ends at the header timeout, with a
// timeout error (504 upstream); the request's context ending cuts the
// wait for the header and the body at once; neither connection is kept.
func TestConnsDeadlines(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up := newRawUpstream(t, func(_ int, _ net.Conn, br *bufio.Reader) {
		if !readRequest(br) {
			return
		}
		<-hold // no answer
	})
	rt := testUpstream(t, UpstreamOptions{ResponseHeaderTimeout: 150 * time.Millisecond, MaxConns: 4})
	start := time.Now()
	_, err := fetch(t, rt, context.Background(), "http://"+up.addr+"/x")
	if !isTimeout(err) {
		t.Errorf("no answer: %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the header wait took %v, bound 150ms", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	rt = testUpstream(t, UpstreamOptions{ResponseHeaderTimeout: time.Minute, MaxConns: 4})
	start = time.Now()
	if _, err := fetch(t, rt, ctx, "http://"+up.addr+"/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled in the header wait: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the canceled header wait took %v", d)
	}

	stream := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			<-hold
		}
	})
	ctx, cancel = context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+stream.addr+"/events", nil)
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("first event %q, %v", buf, err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if _, err := res.Body.Read(buf); !errors.Is(err, context.Canceled) {
		t.Errorf("a read after the context ended: %v, want context.Canceled (as the Transport says it)", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the canceled stream read took %v", d)
	}
	res.Body.Close()
	if n := len(rt.(*boundedTransport).direct.idle); n != 0 {
		t.Errorf("%d hosts with idle connections after failures, want 0", n)
	}
}

// TestConnsHeaderBound: an endless header ends in an error once it passes
// the Transport's 10 MiB, not in memory without end.
func TestConnsHeaderBound(t *testing.T) {
	up := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if !readRequest(br) {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
	_, err := fetch(t, rt, context.Background(), "http://"+up.addr+"/x")
	if err == nil || !strings.Contains(err.Error(), "exceeded") {
		t.Errorf("endless header: %v, want the bound's error", err)
	}
}

// TestConns1xx: informational answers reach the request's trace, and the
// final answer follows on the same connection.
func TestConns1xx(t *testing.T) {
	up := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for readRequest(br) {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
	for range 2 {
		var hints []string
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
				return nil
			},
		})
		got, err := fetch(t, rt, ctx, "http://"+up.addr+"/x")
		if err != nil || got != "ok" {
			t.Fatalf("%q, %v", got, err)
		}
		if len(hints) != 1 || hints[0] != "103 </a.css>; rel=preload" {
			t.Errorf("informational answers %q", hints)
		}
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestConnsSweep: connections idle for the idle timeout are closed, even
// with no request to notice them.
func TestConnsSweep(t *testing.T) {
	var open atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	up.Start()
	defer up.Close()
	c := newConns(time.Minute, 8)
	c.idleTimeout = 100 * time.Millisecond
	u, _ := url.Parse(up.URL)
	var wg sync.WaitGroup
	for range 3 { // three connections at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
			res, err := c.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}()
	}
	wg.Wait()
	if n := open.Load(); n != 3 {
		t.Fatalf("%d connections open, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d connections still open after the idle timeout", n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) != 0 || c.sweeping {
		t.Errorf("after the sweep: %d hosts idle, sweeping %v", len(c.idle), c.sweeping)
	}
}

func TestConnsDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"http://app":            "app:80",
		"http://app:8080":       "app:8080",
		"http://127.0.0.1":      "127.0.0.1:80",
		"http://[::1]":          "[::1]:80",
		"http://[::1]:3000/x?y": "[::1]:3000",
	} {
		u, _ := url.Parse(in)
		if got := dialAddr(u); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
	r, _ := http.NewRequest(http.MethodGet, "http://bücher.example/x", nil)
	if newConns(time.Second, 1).eligible(r) {
		t.Error("a host the Transport would write in punycode went to conns")
	}
}

// TestConnsOddStatus: an answer with a status below 100 (three digits,
// which ReadResponse takes) is a 502 on either path, not a panic, and
// the slot and the connection go back: with one slot, the next request
// is answered.
func TestConnsOddStatus(t *testing.T) {
	up := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if req.URL.Path == "/open/odd" {
				io.WriteString(c, "HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	u, _ := url.Parse("http://" + up.addr)
	rt := testUpstream(t, UpstreamOptions{MaxConns: 1, ResponseHeaderTimeout: 5 * time.Second})
	p, err := New(Options{Upstream: u, Auth: http.NotFoundHandler(), Verifier: refuseAll{}, Passthrough: []string{"/open/"}, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, tc := range []struct {
			path string
			want int
		}{{"/open/odd", http.StatusBadGateway}, {"/open/ok", http.StatusOK}, {"/open/odd", http.StatusBadGateway}, {"/open/ok", http.StatusOK}} {
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("x=1")
			}
			req, _ := http.NewRequest(method, srv.URL+tc.path, body)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, tc.path, err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("%s %s: %d, want %d", method, tc.path, res.StatusCode, tc.want)
			}
		}
	}
}

// TestConnsEarlyClose: a body closed before its end drops the connection
// at once, as the Transport does, instead of reading the rest (here an
// endless stream), and a Close from another goroutine wakes a Read
// waiting on the connection.
func TestConnsEarlyClose(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	up := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if !readRequest(br) {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		for {
			select {
			case <-hold:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := io.WriteString(c, "1\r\nx\r\n"); err != nil {
				return
			}
		}
	})
	rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
	req, _ := http.NewRequest(http.MethodGet, "http://"+up.addr+"/stream", nil)
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	io.ReadFull(res.Body, buf)
	closed := make(chan struct{})
	go func() { res.Body.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("Close before the end of an endless body did not return")
	}

	quiet := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome")
			<-hold
		}
	})
	req, _ = http.NewRequest(http.MethodGet, "http://"+quiet.addr+"/slow", nil)
	res, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(res.Body)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // the Read waits for the rest
	res.Body.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Error("a Read cut by Close: no error")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close from another goroutine did not wake the waiting Read")
	}
}

// TestConnsCanceledNotSent: a request whose context has already ended is
// not sent upstream, even with a connection idle and ready.
func TestConnsCanceledNotSent(t *testing.T) {
	var got atomic.Int32
	up := newRawUpstream(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for readRequest(br) {
			got.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	rt := testUpstream(t, UpstreamOptions{MaxConns: 4})
	if _, err := fetch(t, rt, context.Background(), "http://"+up.addr+"/warm"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		if _, err := fetch(t, rt, ctx, "http://"+up.addr+"/x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a canceled request: %v, want context.Canceled", err)
		}
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the upstream got %d requests, want 1 (the warm-up)", n)
	}
}

// BenchmarkConnsGet is one GET through NewUpstream by conns, to a
// hand-written upstream on loopback that answers at once: the cost of
// the direct path, syscalls included. BenchmarkTransportPost is the same
// with a body, by the Transport.
func BenchmarkConnsGet(b *testing.B) { benchUpstream(b, http.MethodGet) }

func BenchmarkTransportPost(b *testing.B) { benchUpstream(b, http.MethodPost) }

func benchUpstream(b *testing.B, method string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
				}
			}()
		}
	}()
	rt := NewUpstream(UpstreamOptions{})
	defer rt.(*boundedTransport).CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"title":"x"}`)
		}
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+"/api/tasks", body)
		res, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}
