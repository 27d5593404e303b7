package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// UpstreamOptions size the pool of connections to the upstream.
type UpstreamOptions struct {
	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers (not the body: SSE streams are not cut), and the wait for a
	// free connection. Zero: 60s.
	ResponseHeaderTimeout time.Duration
	// MaxConns bounds the requests in flight to the upstream, and so the
	// connections to it (HTTP/1.1 carries one request at a time). A
	// response streamed for long (SSE, a long poll) holds its connection
	// all along; an open WebSocket tunnel does not. Zero: 256.
	MaxConns int
	// MaxPending bounds the requests waiting for a connection: one more is
	// answered 503 at once, as is one still waiting after
	// ResponseHeaderTimeout. Zero: 1024.
	MaxPending int
	// MaxConnsPerClient bounds the requests one client (Options.IPv6Prefix
	// groups IPv6 clients) has in flight or waiting: one more is answered
	// 503 with Retry-After at once, so that no single source takes every
	// connection. Zero: a quarter of MaxConns, at least 1. At MaxConns or
	// above: no bound of its own.
	MaxConnsPerClient int
}

// Defaults of UpstreamOptions.
const (
	DefaultUpstreamMaxConns   = 256
	DefaultUpstreamMaxPending = 1024
)

// NewUpstream returns the RoundTripper a Proxy sends requests upstream
// with: conns for a GET or HEAD without a body to an http upstream (the
// common case, on the caller's goroutine), a tuned clone of
// http.DefaultTransport for anything else, both behind a bound on the
// requests in flight, as Envoy's circuit breakers bound an upstream
// cluster (max_requests, max_pending_requests). Without it, a thousand
// clients arriving at once open a thousand upstream connections, each
// with two goroutines and 8 KiB of buffers kept in the idle pool; with it
// they share MaxConns, which a proxy on a few cores keeps busy anyway
// (measured: less memory, and a higher rate and lower p99 at 1,000
// connections, docs/benchmarks.md). Proxies built one after another for
// the same upstream (a config reload) should share one.
func NewUpstream(o UpstreamOptions) http.RoundTripper {
	if o.ResponseHeaderTimeout == 0 {
		o.ResponseHeaderTimeout = 60 * time.Second
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultUpstreamMaxConns
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultUpstreamMaxPending
	}
	if o.MaxConnsPerClient == 0 {
		o.MaxConnsPerClient = max(1, o.MaxConns/4)
	}
	t := &boundedTransport{
		rt:         newTransport(o.ResponseHeaderTimeout, o.MaxConns),
		direct:     newConns(o.ResponseHeaderTimeout, o.MaxConns),
		slots:      make(chan struct{}, o.MaxConns),
		maxPending: int64(o.MaxPending),
		wait:       o.ResponseHeaderTimeout,
	}
	if o.MaxConnsPerClient < o.MaxConns {
		t.clients.max = int32(o.MaxConnsPerClient)
	}
	return t
}

// errUpstreamBusy: every connection to the upstream is in use and the
// queue for one is full, or the wait for one was too long. The answer is
// 503 with Retry-After, like any overload.
var errUpstreamBusy = errors.New("upstream: every connection busy")

// boundedTransport lets at most cap(slots) requests through to direct
// or rt at once; the next maxPending wait for a slot. A client with
// clients.max requests in flight or waiting has no more.
type boundedTransport struct {
	rt         *http.Transport
	direct     *conns
	slots      chan struct{}
	pending    atomic.Int64
	maxPending int64
	wait       time.Duration
	clients    clientShare
}

func (t *boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var key uint64
	if info := Info(r.Context()); info != nil {
		key = info.client
	}
	c, ok := t.clients.take(key)
	if !ok {
		return nil, errClientShare
	}
	if err := t.acquire(r.Context()); err != nil {
		t.clients.give(c)
		return nil, err
	}
	var res *http.Response
	var err error
	if t.direct.eligible(r) {
		res, err = t.direct.RoundTrip(r)
	} else {
		var hops transportHops
		res, err = t.rt.RoundTrip(hops.withTrace(r))
		if err == nil {
			hops.final(res)
		}
	}
	if err != nil {
		t.release(c)
		return nil, err
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// The connection has left the pool for the tunnel, and its body
		// must stay the io.ReadWriteCloser ReverseProxy switches to.
		t.release(c)
		return res, nil
	}
	res.Body = &slotBody{ReadCloser: res.Body, t: t, client: c}
	return res, nil
}

// CloseIdleConnections closes the idle upstream connections.
func (t *boundedTransport) CloseIdleConnections() {
	t.rt.CloseIdleConnections()
	t.direct.CloseIdleConnections()
}

func (t *boundedTransport) acquire(ctx context.Context) error {
	select {
	case t.slots <- struct{}{}:
		return nil
	default:
	}
	if t.pending.Add(1) > t.maxPending {
		t.pending.Add(-1)
		return errUpstreamBusy
	}
	defer t.pending.Add(-1)
	timer := time.NewTimer(t.wait)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
		return nil
	case <-timer.C:
		return errUpstreamBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives back a slot and the client's count c.
func (t *boundedTransport) release(c int) {
	<-t.slots
	t.clients.give(c)
}

// slotBody gives the slot back when the response body is closed: the
// connection is free for the next request then (ReverseProxy always
// closes it).
type slotBody struct {
	io.ReadCloser
	t      *boundedTransport
	client int // the client's count, given back with the slot
	closed atomic.Bool
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	if b.closed.CompareAndSwap(false, true) {
		b.t.release(b.client)
	}
	return err
}
