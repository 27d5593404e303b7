package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// conns sends the common request, a GET or HEAD without a body to a
// plain-http upstream, on the handler's own goroutine: it writes the
// request on an idle keep-alive connection and reads the answer there.
// http.Transport hands each request to a writer goroutine and each answer
// back from a reader goroutine, which it also parks on every idle
// connection: goroutine switches and channel operations that a proxy on
// two cores pays for in throughput (row a went from 0.93-1.04x of the
// bare proxy to 1.13-1.18x, its CPU per request from 1.02-1.13x to
// 0.80-0.85x; docs/benchmarks.md). Everything else (a body, another
// method, an upgrade, TLS) stays on the Transport.
//
// The wire is net/http's own, Request.Write and ReadResponse as the
// Transport calls them, and so are the rules around them: an answer's
// header bounded to 10 MiB and its wait to the header timeout, 1xx
// answers passed to the request's trace, the connection cut when the
// request's context ends, a reused connection that fails before any
// answer byte retried on another (a GET or HEAD is safe to send again),
// and a connection kept only when its answer was read to a clean end
// with nothing after it (TestConns*).
type conns struct {
	dial          func(ctx context.Context, network, addr string) (net.Conn, error)
	headerTimeout time.Duration
	idleTimeout   time.Duration
	maxIdle       int

	mu       sync.Mutex
	idle     map[string][]*upConn // by host:port, the most recently used last
	sweeping bool                 // a sweep of expired idle connections is due
}

// maxResponseHeader is the Transport's default bound on an answer's
// header (http.Transport.MaxResponseHeaderBytes).
const maxResponseHeader = 10 << 20

// upstreamIdleTimeout is how long an idle upstream connection is kept,
// as on the Transport (newTransport).
const upstreamIdleTimeout = 90 * time.Second

func newConns(headerTimeout time.Duration, maxIdle int) *conns {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // http.DefaultTransport's
	return &conns{dial: d.DialContext, headerTimeout: headerTimeout, idleTimeout: upstreamIdleTimeout,
		maxIdle: maxIdle, idle: map[string][]*upConn{}}
}

// eligible reports whether r goes by conns: a request whose exchange is
// one request written, then one answer read.
func (c *conns) eligible(r *http.Request) bool {
	if !connAliveCheck || r.URL.Scheme != "http" || r.Method != http.MethodGet && r.Method != http.MethodHead ||
		r.Body != nil && r.Body != http.NoBody || r.ContentLength != 0 || len(r.Trailer) != 0 || len(r.TransferEncoding) != 0 {
		return false
	}
	if _, ok := r.Header["Upgrade"]; ok {
		return false
	}
	// A host the Transport would turn into punycode stays with it.
	for i := 0; i < len(r.URL.Host); i++ {
		if r.URL.Host[i] >= 0x80 {
			return false
		}
	}
	// The Transport refuses a header value it cannot send as it is, where
	// Request.Write would turn a line break into a space. The client's
	// values passed the server's own check, so only what the proxy added
	// could fail; such a request gets the Transport's refusal.
	for _, vals := range r.Header {
		for _, v := range vals {
			if !validHeaderValue(v) {
				return false
			}
		}
	}
	return true
}

// validHeaderValue: no control byte but a tab (RFC 9110 section 5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// upConn is one keep-alive connection to the upstream.
type upConn struct {
	c      net.Conn
	host   string
	lr     limitedConn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	hops   hopNames // what the current answer's Connection headers named
}

// limitedConn is the connection as the reader sees it: reads are bounded
// by limit (the answer's header; math.MaxInt64 for its body), n counts
// the bytes of the current exchange (none: the upstream never answered),
// and scan reads the answer's Connection names before ReadResponse drops
// them (hopnames.go).
type limitedConn struct {
	c     net.Conn
	limit int64
	n     int64
	scan  hopScan
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.limit <= 0 {
		return 0, fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", maxResponseHeader)
	}
	if int64(len(p)) > l.limit {
		p = p[:l.limit]
	}
	n, err := l.c.Read(p)
	l.limit -= int64(n)
	l.n += int64(n)
	l.scan.feed(p[:n])
	return n, err
}

// dialAddr is the address a request to u is sent to: its host and port,
// 80 when the URL names none (http://app, as the Transport dials it).
func dialAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// aLongTimeAgo is a deadline that has passed: it wakes any read or write
// on the connection at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends r (eligible) and returns the answer, its body reading
// from the connection.
func (c *conns) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	addr := dialAddr(r.URL)
	for {
		if err := ctx.Err(); err != nil {
			// Already over: nothing goes upstream (as on the Transport).
			return nil, err
		}
		pc, reused, err := c.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		res, err := c.exchange(ctx, pc, r)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if reused && pc.lr.n == 0 && !isTimeout(err) {
			// The upstream closed the idle connection as the request went
			// out, and answered nothing: the Transport's retry.
			continue
		}
		return nil, err
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// exchange writes r on pc and reads its answer's header. Whenever it
// fails, pc is unusable.
func (c *conns) exchange(ctx context.Context, pc *upConn, r *http.Request) (*http.Response, error) {
	// The context's end cuts the connection, in the header wait as in the
	// body. A deadline set after it would undo that: setReadDeadline
	// looks at the context after each.
	stop := context.AfterFunc(ctx, func() { pc.c.SetDeadline(aLongTimeAgo) })
	handedOver := false
	defer func() {
		if !handedOver { // an error, or a panic in a 1xx trace hook
			stop()
			pc.c.Close()
		}
	}()
	res, err := c.exchangeHeader(ctx, pc, r)
	if err != nil {
		return nil, err
	}
	if res.StatusCode <= 199 {
		// A 101 nobody asked for (eligible sends no Upgrade), after which
		// the connection is no longer HTTP, or a status below 100, which
		// no HTTP defines: the caller refuses the answer, and the
		// connection goes (as the Transport's reader does).
		res.Body = http.NoBody
		return res, nil
	}
	// No body (HEAD, 204, 304, a length of 0) is an end already.
	body := &connBody{ctx: ctx, rc: res.Body, pc: pc, c: c, keep: !res.Close && !r.Close, stop: stop}
	body.eof.Store(res.Body == http.NoBody)
	res.Body = body
	handedOver = true
	return res, nil
}

func (c *conns) exchangeHeader(ctx context.Context, pc *upConn, r *http.Request) (*http.Response, error) {
	pc.lr.n = 0
	pc.lr.scan.begin(&pc.hops)
	if err := r.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	pc.setReadDeadline(ctx, time.Now().Add(c.headerTimeout))
	pc.lr.limit = maxResponseHeader
	trace := httptrace.ContextClientTrace(ctx)
	for section := 0; ; section++ {
		res, err := http.ReadResponse(pc.br, r)
		if err != nil {
			return nil, err
		}
		// What a Connection header ReadResponse dropped named goes too.
		pc.hops.strip(section, res.Header)
		if code := res.StatusCode; code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			pc.lr.limit = math.MaxInt64
			pc.setReadDeadline(ctx, time.Time{}) // a body may stream for long
			return res, nil
		}
		// An informational answer (103 Early Hints), then the real one.
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
				return nil, err
			}
			// Passed on, it was bounded by the client's reader; the next
			// header gets its own bound (as on the Transport).
			pc.lr.limit = maxResponseHeader
		}
	}
}

// setReadDeadline sets the read deadline unless ctx has ended, whose
// deadline in the past (exchange) it would replace.
func (pc *upConn) setReadDeadline(ctx context.Context, t time.Time) {
	pc.c.SetReadDeadline(t)
	if ctx.Err() != nil {
		pc.c.SetDeadline(aLongTimeAgo)
	}
}

// connBody is an answer's body; closed, it hands its connection back if
// the answer was read to a clean end.
type connBody struct {
	ctx  context.Context
	rc   io.ReadCloser
	pc   *upConn
	c    *conns
	keep bool        // neither side asked to close the connection
	stop func() bool // the context's watch on the connection
	// eof and done are atomic: Close may come from another goroutine
	// while a Read waits (as http.Response.Body allows).
	eof  atomic.Bool
	done atomic.Bool
}

func (b *connBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	} else if err != nil && b.ctx.Err() != nil {
		// The deadline the context's end set, as the Transport says it:
		// the client went away, nothing for the log.
		err = b.ctx.Err()
	}
	return n, err
}

func (b *connBody) Close() error {
	if b.done.Swap(true) {
		return nil
	}
	if !b.eof.Load() {
		// Cut short: the connection goes first, which also wakes a Read
		// waiting on it; the transfer body's Close would otherwise read
		// the rest of the answer (an endless stream: forever), where the
		// Transport drops it.
		b.stop()
		b.pc.c.Close()
		b.rc.Close()
		return nil
	}
	b.rc.Close()
	// The watch must be stopped before the connection is shared again:
	// false means it ran, and the connection's deadline has passed. Bytes
	// already read past the answer were not asked for.
	if b.stop() && b.keep && b.pc.br.Buffered() == 0 {
		b.c.put(b.pc)
	} else {
		b.pc.c.Close()
	}
	return nil
}

// get returns an idle connection to host that is still open, with
// nothing waiting to be read, or a new one; reused says which.
func (c *conns) get(ctx context.Context, host string) (pc *upConn, reused bool, err error) {
	for {
		c.mu.Lock()
		list := c.idle[host]
		n := len(list)
		if n == 0 {
			c.mu.Unlock()
			break
		}
		pc = list[n-1]
		list[n-1] = nil
		c.idle[host] = list[:n-1]
		c.mu.Unlock()
		if time.Since(pc.idleAt) < c.idleTimeout && connAlive(pc.c) {
			return pc, true, nil
		}
		pc.c.Close()
	}
	nc, err := c.dial(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
	}
	pc = &upConn{c: nc, host: host}
	pc.lr.c = nc
	pc.br = bufio.NewReaderSize(&pc.lr, 4<<10) // the Transport's sizes
	pc.bw = bufio.NewWriterSize(nc, 4<<10)
	return pc, false, nil
}

// put keeps pc for the next request to its host, unless maxIdle are kept.
func (c *conns) put(pc *upConn) {
	pc.idleAt = time.Now()
	c.mu.Lock()
	list := c.idle[pc.host]
	if len(list) >= c.maxIdle {
		c.mu.Unlock()
		pc.c.Close()
		return
	}
	c.idle[pc.host] = append(list, pc)
	if !c.sweeping {
		c.sweeping = true
		time.AfterFunc(c.idleTimeout, c.sweep)
	}
	c.mu.Unlock()
}

// sweep closes the connections idle for idleTimeout, which the stack of
// idle connections leaves at its bottom when fewer are in use than kept
// (the Transport closes them on a timer each), and comes again while any
// are kept.
func (c *conns) sweep() {
	now := time.Now()
	var expired []*upConn
	c.mu.Lock()
	next := time.Duration(-1)
	for host, list := range c.idle {
		i := 0
		for i < len(list) && now.Sub(list[i].idleAt) >= c.idleTimeout {
			i++
		}
		expired = append(expired, list[:i]...)
		if i == len(list) {
			delete(c.idle, host)
			continue
		}
		if wait := c.idleTimeout - now.Sub(list[i].idleAt); next < 0 || wait < next {
			next = wait
		}
		kept := copy(list, list[i:])
		clear(list[kept:])
		c.idle[host] = list[:kept]
	}
	c.sweeping = next >= 0
	if c.sweeping {
		time.AfterFunc(next, c.sweep)
	}
	c.mu.Unlock()
	for _, pc := range expired {
		pc.c.Close()
	}
}

// CloseIdleConnections closes every idle connection.
func (c *conns) CloseIdleConnections() {
	c.mu.Lock()
	idle := c.idle
	c.idle = map[string][]*upConn{}
	c.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.c.Close()
		}
	}
}
