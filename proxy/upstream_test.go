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
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type refuseAll struct{}

func (refuseAll) Verify(context.Context, string) (Claims, error) {
	return Claims{}, authErr(ReasonBadSignature, errors.New("test verifier refuses every token"))
}

// boundedStack is a proxy on a bounded upstream pool in front of a real
// upstream whose /open/slow requests wait for release, and which counts
// the requests in flight and the connections it accepted.
type boundedStack struct {
	srv      *httptest.Server
	pool     *boundedTransport
	release  chan struct{}
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	conns    atomic.Int32
}

func newBoundedStack(t *testing.T, o UpstreamOptions) *boundedStack {
	t.Helper()
	s := &boundedStack{release: make(chan struct{})}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws/browser" {
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			io.Copy(io.Discard, c) // open until the client closes it
			return
		}
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.maxSeen.Load(); n > m && !s.maxSeen.CompareAndSwap(m, n); m = s.maxSeen.Load() {
		}
		if r.URL.Path == "/open/slow" {
			<-s.release
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	s.pool = NewUpstream(o).(*boundedTransport)
	p, err := New(Options{Upstream: u, Auth: http.NotFoundHandler(), Verifier: refuseAll{},
		Passthrough: []string{"/open/", "/ws/browser"}, Transport: s.pool})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(p)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *boundedStack) get(path string) (int, string, http.Header, error) {
	res, err := http.Get(s.srv.URL + path)
	if err != nil {
		return 0, "", nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header, err
}

// TestUpstreamBound: however many clients, at most MaxConns requests are
// in flight upstream, over at most MaxConns connections, and every client
// is answered once one is free.
func TestUpstreamBound(t *testing.T) {
	const maxConns, clients = 2, 12
	// Every client here is 127.0.0.1: no share of its own
	// (TestUpstreamClientShare holds that bound).
	s := newBoundedStack(t, UpstreamOptions{MaxConns: maxConns, MaxPending: clients, MaxConnsPerClient: maxConns})
	var wg sync.WaitGroup
	statuses := make([]int, clients)
	for i := range clients {
		wg.Go(func() {
			code, body, _, err := s.get("/open/slow")
			if err != nil || code != 200 {
				t.Errorf("client %d: %d %s %v", i, code, body, err)
			}
			statuses[i] = code
		})
	}
	// Every client in: maxConns upstream, the others queued.
	for deadline := time.Now().Add(10 * time.Second); s.inFlight.Load() < maxConns || s.pool.pending.Load() < clients-maxConns; {
		if n := s.inFlight.Load(); n > maxConns || time.Now().After(deadline) {
			t.Errorf("%d requests in flight upstream, %d queued; want %d and %d", n, s.pool.pending.Load(), maxConns, clients-maxConns)
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(s.release)
	wg.Wait()
	if got := s.maxSeen.Load(); got != maxConns {
		t.Errorf("requests in flight upstream at once: got %d, want %d", got, maxConns)
	}
	if got := s.conns.Load(); got > maxConns {
		t.Errorf("upstream connections: got %d, want at most %d", got, maxConns)
	}
	if n := len(s.pool.slots); n != 0 {
		t.Errorf("slots held after every answer: %d, want 0", n)
	}
}

// TestUpstreamQueueFull: with every slot taken and the queue full, a
// request is answered 503 JSON with Retry-After at once; one that waits
// past ResponseHeaderTimeout for a slot gets the same; the client's own
// cancellation stays a cancellation.
func TestUpstreamQueueFull(t *testing.T) {
	s := newBoundedStack(t, UpstreamOptions{MaxConns: 1, MaxPending: 1, ResponseHeaderTimeout: 200 * time.Millisecond})
	s.pool.slots <- struct{}{} // the one connection is busy
	s.pool.pending.Store(1)    // and the queue is full
	code, body, h, err := s.get("/open/fast")
	if err != nil || code != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, `"SERVICE_UNAVAILABLE"`) {
		t.Errorf("queue full: got %d %q Retry-After %q %v; want 503 SERVICE_UNAVAILABLE with Retry-After", code, body, h.Get("Retry-After"), err)
	}
	s.pool.pending.Store(0)
	if code, body, _, err := s.get("/open/fast"); err != nil || code != 503 {
		t.Errorf("no slot within ResponseHeaderTimeout: got %d %q %v; want 503", code, body, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://upstream.invalid/", nil)
	if _, err := s.pool.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled while queued: got %v, want context.Canceled", err)
	}
	<-s.pool.slots
	if code, _, _, err := s.get("/open/fast"); err != nil || code != 200 {
		t.Errorf("slot free again: got %d %v, want 200", code, err)
	}
}

// TestUpstreamTunnelHoldsNoSlot: an open WebSocket tunnel has left the
// pool, so with one slot the next request still goes through.
func TestUpstreamTunnelHoldsNoSlot(t *testing.T) {
	s := newBoundedStack(t, UpstreamOptions{MaxConns: 1, ResponseHeaderTimeout: time.Second})
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /ws/browser HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", s.srv.Listener.Addr())
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	if code, body, _, err := s.get("/open/fast"); err != nil || code != 200 {
		t.Errorf("request beside an open tunnel with one slot: got %d %q %v, want 200", code, body, err)
	}
}
