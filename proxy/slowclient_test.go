package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/proxy"
)

// The body rate of these tests: a second's worth of a client's silence
// is long, so a trickle is cut within a fraction of a second.
const (
	testRate  = 1024 // bytes per second
	testGrace = 200 * time.Millisecond
)

// slowStack is the request path as sidecar/stack.go chains it (request
// id, metrics and access log, recover, proxy) around newStack's proxy,
// with an upstream pool of its own and the body rate shrunk.
type slowStack struct {
	*stack
	pool   http.RoundTripper
	front  *httptest.Server
	reg    *prometheus.Registry
	access *syncbuf.Buffer
}

func newSlowStack(t *testing.T, uo proxy.UpstreamOptions, mutate ...func(*proxy.Options)) *slowStack {
	t.Helper()
	pool := proxy.NewUpstream(uo)
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg)
	opts := append([]func(*proxy.Options){func(o *proxy.Options) {
		o.Transport, o.Metrics = pool, m
		o.BodyMinRate, o.BodyRateGrace = testRate, testGrace
	}}, mutate...)
	s := newStack(t, opts...)
	access := &syncbuf.Buffer{}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	front := httptest.NewUnstartedServer(proxy.Chain(s.proxy,
		proxy.RequestID(), proxy.Observe(m, proxy.JSONAccessLog(access, discard)), proxy.Recover(discard)))
	front.Config.ErrorLog = log.New(io.Discard, "", 0)
	front.Start()
	t.Cleanup(front.Close)
	return &slowStack{stack: s, pool: pool, front: front, reg: reg, access: access}
}

// get sends a GET through the front.
func (s *slowStack) get(t *testing.T, path string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest("GET", s.front.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := s.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, string(b)}
}

// closeReasons closes the front (every handler has returned, every line
// is written) and returns each access log line's status and close_reason.
func (s *slowStack) closeReasons(t *testing.T) []string {
	t.Helper()
	s.front.Close()
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(s.access.String()), "\n") {
		var e struct {
			Status      int    `json:"status"`
			CloseReason string `json:"close_reason"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		out = append(out, fmt.Sprintf("%d %s", e.Status, e.CloseReason))
	}
	return out
}

// trickle sends head (a request's header block) on a new connection to
// addr, then body, n bytes every interval, until it is sent or the
// connection fails.
func trickle(t *testing.T, addr, head string, body []byte, n int, every time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		for len(body) > 0 {
			k := min(n, len(body))
			if _, err := c.Write(body[:k]); err != nil {
				return
			}
			body = body[k:]
			time.Sleep(every)
		}
	}()
	return c
}

// answer reads the answer on c. The code before the body rate never
// answered a trickle: after 10s the test fails instead of hanging.
func answer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

func head(method, target string, size int, hdr ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n", method, target, size)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	return b.String()
}

func slowCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return metricValue(t, reg, "authsidecar_slow_clients_total", "reason", reason)
}

// metricValue is the counter name{labels...} in reg (label, value pairs),
// 0 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestSlowBodyEveryRoute: a body trickled below the minimum rate is
// answered 408 REQUEST_TIMEOUT in JSON, the connection closed, on every
// route that forwards; the upstream slot it held is free by the time the
// client reads the 408, and the upstream sees its request cut. A small
// body never reaches the upstream at all.
func TestSlowBodyEveryRoute(t *testing.T) {
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 4, MaxConnsPerClient: 4})
	cookie, _, jwt := s.user("slow@example.com")
	_, adminID, adminJWT := s.user("admin@example.com")
	if err := s.db.GrantRole(context.Background(), adminID, "admin"); err != nil {
		t.Fatal(err)
	}
	reached := make(chan string, 16)
	ends := make(chan error, 16)
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		reached <- r.URL.Path
		_, err := io.Copy(io.Discard, r.Body)
		ends <- err
	}
	const large, small = 100000, 1000
	cases := []struct {
		name, method, target string
		size                 int
		hdr                  []string
	}{
		{"public", "POST", "/upload", large, nil},
		{"public, small body", "POST", "/upload", small, nil},
		{"passthrough", "POST", "/ws/browser", large, nil},
		{"business", "PUT", "/api/files/1", large, bearer(jwt)},
		{"business, small body", "POST", "/api/tasks", small, bearer(jwt)},
		{"admin", "POST", "/api/admin/import", large, bearer(adminJWT)},
		{"cookie-only", "GET", "/api/mcp-oauth/authorize", large, []string{"Cookie", cookie}},
		{"websocket route without upgrade", "POST", "/ws/chat?token=" + jwt, large, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := trickle(t, s.front.Listener.Addr().String(), head(tc.method, tc.target, tc.size, tc.hdr...),
				bytes.Repeat([]byte("x"), tc.size), 1, 20*time.Millisecond)
			res, body := answer(t, c)
			if n := proxy.UpstreamInUse(s.pool); n != 0 {
				t.Errorf("upstream slots in use once the 408 is read: %d, want 0", n)
			}
			if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"REQUEST_TIMEOUT"`) ||
				res.Header.Get("Content-Type") != "application/json" || !res.Close {
				t.Errorf("got %d %s %q (close %v), want 408 REQUEST_TIMEOUT in JSON, connection closed", res.StatusCode, body, res.Header.Get("Content-Type"), res.Close)
			}
			if tc.size == small {
				select {
				case path := <-reached:
					t.Errorf("upstream got %s, want nothing: a small body is read before it is forwarded", path)
				default:
				}
				return
			}
			<-reached
			select {
			case err := <-ends:
				if err == nil {
					t.Errorf("upstream read the whole body, want it cut")
				}
			case <-time.After(10 * time.Second):
				t.Errorf("upstream still reading the body 10s after the 408")
			}
		})
	}
	if got, want := slowCount(t, s.reg, proxy.CloseReasonSlowBody), float64(len(cases)); got != want {
		t.Errorf("authsidecar_slow_clients_total{reason=slow_body} = %v, want %v", got, want)
	}
	for _, line := range s.closeReasons(t) {
		if line != "408 "+proxy.CloseReasonSlowBody {
			t.Errorf("access log: status and close_reason %q, want \"408 slow_body\"", line)
		}
	}
}

// TestSlowBodyAttack is issue 30's attack, scaled down: twice as many
// connections as the upstream has slots each send a large body one byte
// at a time, from one address (its share is not the defence here). A
// legitimate GET is still served: every trickle is cut at the minimum
// rate, and its slot freed. Before, the GET waited for a slot and got 503.
func TestSlowBodyAttack(t *testing.T) {
	const slots = 4
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: slots, MaxConnsPerClient: slots, ResponseHeaderTimeout: 5 * time.Second},
		withHeaderTimeout(5*time.Second))
	var inFlight atomic.Int32
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}
	var attackers []net.Conn
	for range 2 * slots {
		attackers = append(attackers, trickle(t, s.front.Listener.Addr().String(), head("POST", "/anything", 100000),
			bytes.Repeat([]byte("x"), 100000), 1, 20*time.Millisecond))
	}
	// Every slot is taken by a trickle before the legitimate request.
	for deadline := time.Now().Add(10 * time.Second); inFlight.Load() < slots; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d trickles reached the upstream, want %d", inFlight.Load(), slots)
		}
	}
	if r := s.do("GET", "/anything", nil); r.status != 200 {
		t.Errorf("legitimate GET during the attack: got %d %s, want 200", r.status, r.body)
	}
	for i, c := range attackers {
		if res, body := answer(t, c); res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("attacker %d: got %d %s, want 408", i, res.StatusCode, body)
		}
	}
}

// TestBodyMinRate: what the rate cuts and what it lets through. A client
// silent or too slow for longer than the grace is cut, whatever it sent
// before (the credit a burst earns is capped at the grace); one sending
// at the rate or above, pausing less than the grace, or held back by an
// upstream that does not read, is not.
func TestBodyMinRate(t *testing.T) {
	const grace = 500 * time.Millisecond
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 8, MaxConnsPerClient: 8},
		func(o *proxy.Options) { o.BodyRateGrace, o.BodyBuffer = grace, 4096 })
	whole := make(chan int64, 1) // the size of each body the upstream read whole
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stalled" {
			time.Sleep(4 * grace) // the sidecar cannot hand the body on meanwhile
		}
		if n, err := io.Copy(io.Discard, r.Body); err == nil {
			whole <- n
		}
		w.Write([]byte(`{"ok":true}`))
	}
	cases := []struct {
		name   string
		path   string
		size   int
		send   int           // bytes per write
		every  time.Duration // between writes
		pause  int           // after this many bytes, stop for good (0: never)
		status int
	}{
		{"trickle", "/up", 100000, 1, 20 * time.Millisecond, 0, 408},
		{"silent after the header", "/up", 100000, 1, 0, -1, 408},
		{"a burst, then silence", "/up", 100000, 50000, 0, 50000, 408},
		{"at ten times the rate", "/up", 8192, 256, 25 * time.Millisecond, 0, 200},
		{"pauses shorter than the grace", "/up", 16384, 4096, grace / 3, 0, 200},
		{"held back by an upstream that does not read", "/stalled", 16 << 20, 1 << 20, 0, 0, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), tc.size)
			switch {
			case tc.pause < 0:
				body = nil
			case tc.pause > 0:
				body = body[:tc.pause]
			}
			c := trickle(t, s.front.Listener.Addr().String(), head("POST", tc.path, tc.size), body, tc.send, tc.every)
			res, text := answer(t, c)
			if res.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", res.StatusCode, text, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if n := <-whole; n != int64(tc.size) {
				t.Errorf("upstream read %d bytes, want %d", n, tc.size)
			}
		})
	}
}

// TestSmallBodyReadFirst: a body of at most BodyBuffer bytes is read
// whole before the request takes an upstream slot. With one slot, a GET
// is served while a small body is still on its way, and the upstream
// sees the POST only once its body is complete.
func TestSmallBodyReadFirst(t *testing.T) {
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 1, ResponseHeaderTimeout: 2 * time.Second},
		withHeaderTimeout(2*time.Second))
	complete := make(chan struct{})
	posted := make(chan int64, 1)
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			select {
			case <-complete:
			default:
				t.Errorf("upstream got the POST before its body was complete")
			}
			n, _ := io.Copy(io.Discard, r.Body)
			posted <- n
		}
		w.Write([]byte(`{"ok":true}`))
	}
	c, err := net.Dial("tcp", s.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s%s", head("POST", "/form", 1000), strings.Repeat("a", 500))
	if r := s.do("GET", "/page", nil); r.status != 200 {
		t.Errorf("GET while a small body is on its way: got %d %s, want 200", r.status, r.body)
	}
	close(complete)
	io.WriteString(c, strings.Repeat("b", 500))
	if res, body := answer(t, c); res.StatusCode != 200 {
		t.Errorf("POST: got %d %s, want 200", res.StatusCode, body)
	}
	if n := <-posted; n != 1000 {
		t.Errorf("upstream read %d bytes of the POST, want 1000", n)
	}
}

// dialSmallWindow connects with a 4 KiB receive buffer, so that a client
// that stops reading makes the sidecar's writes wait at once.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAnswerMinRate: a client that stops taking a large answer is cut off
// at the minimum rate and the upstream slot freed (before, it held the
// slot for as long as it kept the connection open); an event stream the
// upstream produces slowly, and the client reads at once, is not cut.
func TestAnswerMinRate(t *testing.T) {
	const big = 32 << 20 // beyond what the sockets' buffers hold
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 4, MaxConnsPerClient: 4},
		func(o *proxy.Options) { o.BodyMinRate = 1 << 20 }) // a 32 KiB write may wait 31ms past the grace
	started := make(chan struct{}, 1)
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			started <- struct{}{}
			w.Header().Set("Content-Length", fmt.Sprint(big))
			chunk := bytes.Repeat([]byte("y"), 1<<20)
			for range big >> 20 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 8 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				http.NewResponseController(w).Flush()
				time.Sleep(testGrace / 2) // 4x the grace in all
			}
		}
	}
	t.Run("stops reading", func(t *testing.T) {
		c := dialSmallWindow(t, s.front.Listener.Addr().String())
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
		<-started
		for deadline := time.Now().Add(10 * time.Second); proxy.UpstreamInUse(s.pool) != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("upstream slot still held 10s after the client stopped reading")
			}
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		if err == nil || n >= big {
			t.Errorf("client read %d bytes (%v), want the answer cut", n, err)
		}
	})
	t.Run("slow event stream", func(t *testing.T) {
		res, err := http.Get(s.front.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || strings.Count(string(b), "data: ") != 8 {
			t.Errorf("stream: got %q (%v), want 8 events", b, err)
		}
	})
	if got := slowCount(t, s.reg, proxy.CloseReasonSlowRead); got != 1 {
		t.Errorf("authsidecar_slow_clients_total{reason=slow_read} = %v, want 1", got)
	}
	lines := s.closeReasons(t)
	slices.Sort(lines)
	if want := []string{"200 ", "200 " + proxy.CloseReasonSlowRead}; !slices.Equal(lines, want) {
		t.Errorf("access log status and close_reason: %q, want %q", lines, want)
	}
}

// TestUpstreamClientShare: one client (an IPv4 address, an IPv6 /64, as
// the trusted proxy names it) holds at most its share of the upstream
// slots, a quarter of them by default; one more request of its own is
// answered 503 JSON with Retry-After at once, while other clients are
// served.
func TestUpstreamClientShare(t *testing.T) {
	logs := &syncbuf.Buffer{}
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 8, ResponseHeaderTimeout: 5 * time.Second}, func(o *proxy.Options) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	release := make(chan struct{})
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		w.Write([]byte(`{"ok":true}`))
	}
	defer close(release)
	held := 0
	hold := func(client string) {
		held++
		go func() {
			req, _ := http.NewRequest("GET", s.front.URL+"/hold", nil)
			req.Header.Set("X-Forwarded-For", client)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); proxy.UpstreamInUse(s.pool) < held; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("request of %s never reached the upstream", client)
			}
		}
	}
	// Each holds its share: two of eight slots.
	hold("192.0.2.1")
	hold("192.0.2.1")
	hold("2001:db8::1")
	hold("2001:db8::2")
	// Two clients whose hashes meet share one count (stricter for both):
	// the others of this test are picked on counters of their own, so
	// that the test does not fail one run in two thousand.
	busy := []int{proxy.ClientCounter("192.0.2.1", 64), proxy.ClientCounter("2001:db8::1", 64)}
	other := func(candidates ...string) string {
		for _, c := range candidates {
			if !slices.Contains(busy, proxy.ClientCounter(c, 64)) {
				return c
			}
		}
		t.Fatalf("every one of %q shares a counter with a busy client", candidates)
		return ""
	}
	cases := []struct {
		client string
		status int
	}{
		{"192.0.2.1", 503},
		{"::ffff:192.0.2.1", 503}, // the same address, IPv4-mapped
		{"2001:db8::3", 503},      // the same /64
		{other("192.0.2.2", "192.0.2.3", "192.0.2.4"), 200},
		{other("2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1"), 200},
		{"198.51.100.7, 192.0.2.1", 503}, // the rightmost untrusted hop is the client
	}
	for _, tc := range cases {
		r := s.get(t, "/fast", "X-Forwarded-For", tc.client)
		if r.status != tc.status {
			t.Errorf("%s: got %d %s, want %d", tc.client, r.status, r.body, tc.status)
		}
		if tc.status == 503 && (r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, `"SERVICE_UNAVAILABLE"`)) {
			t.Errorf("%s: got Retry-After %q, body %s; want 1 and SERVICE_UNAVAILABLE in JSON", tc.client, r.header.Get("Retry-After"), r.body)
		}
	}
	if got := metricValue(t, s.reg, "authsidecar_upstream_errors_total", "kind", "client_share"); got != 4 {
		t.Errorf(`authsidecar_upstream_errors_total{kind="client_share"} = %v, want 4`, got)
	}
	// One warning for the four refusals, naming the first client and the
	// likely cause (a load balancer not in trusted_proxies).
	if n := strings.Count(logs.String(), "proxy.trusted_proxies"); n != 1 || !strings.Contains(logs.String(), `"client":"192.0.2.1"`) {
		t.Errorf("warnings: got %d in\n%s\nwant one, naming 192.0.2.1", n, logs.String())
	}
}

// TestRefusalOfATrickle: a request refused before its body is read is
// answered, and its connection closed, though the body trickles. net/http
// reads what is left of a body (up to 256 KiB) before it answers, or
// before it closes a connection marked to close, and the grace bounds
// that read: the 401 comes after the grace, the upstream share's 503 at
// once. Before, neither answer ever left, and each held its connection
// and goroutine for as long as the trickle lasted.
func TestRefusalOfATrickle(t *testing.T) {
	s := newSlowStack(t, proxy.UpstreamOptions{MaxConns: 4, ResponseHeaderTimeout: 5 * time.Second})
	release := make(chan struct{})
	s.up.handle = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		io.Copy(io.Discard, r.Body)
	}
	defer close(release)
	go func() {
		if res, err := http.Get(s.front.URL + "/hold"); err == nil {
			res.Body.Close()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); proxy.UpstreamInUse(s.pool) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held request never reached the upstream")
		}
	}
	cases := []struct {
		name, target string
		status       int
	}{
		{"no token", "/api/tasks", 401},
		{"beyond the client's share", "/upload", 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := trickle(t, s.front.Listener.Addr().String(), head("POST", tc.target, 100000),
				bytes.Repeat([]byte("x"), 100000), 1, 20*time.Millisecond)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.status {
				t.Errorf("got %d %s, want %d", res.StatusCode, body, tc.status)
			}
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Errorf("after the answer: %v, want the connection closed", err)
			}
		})
	}
}

// TestUpgradeWithBodyRefused: a WebSocket handshake with a body is
// refused (400 BAD_UPGRADE): the body would be read under the minimum
// rate's deadlines on the connection, which the tunnel would inherit once
// hijacked, and a handshake has none. Before, it was forwarded.
func TestUpgradeWithBodyRefused(t *testing.T) {
	s := newSlowStack(t, proxy.UpstreamOptions{})
	c, err := net.Dial("tcp", s.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /ws/browser HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nContent-Length: 5\r\n\r\nhello")
	if res, body := answer(t, c); res.StatusCode != 400 || !strings.Contains(body, `"BAD_UPGRADE"`) {
		t.Errorf("handshake with a body: got %d %s, want 400 BAD_UPGRADE", res.StatusCode, body)
	}
}
