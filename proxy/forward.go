package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// newTransport clones the default transport for a sidecar that sends
// everything to one host: idle connections kept up to the bound on those
// in use, so a steady load never re-dials. ResponseHeaderTimeout bounds
// only the wait for headers, so long streams are not cut.
func newTransport(responseHeaderTimeout time.Duration, maxConns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// http.DefaultTransport's dialer, whose connections scan the answers'
	// Connection names (hopnames.go).
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c}, nil
	}
	t.MaxIdleConns = maxConns
	t.MaxIdleConnsPerHost = maxConns
	t.IdleConnTimeout = upstreamIdleTimeout
	t.ResponseHeaderTimeout = responseHeaderTimeout
	// The upstream's encoding passes through untouched.
	t.DisableCompression = true
	t.Proxy = nil // never send the upstream hop through an environment proxy
	return t
}

// bufferPool recycles the 32 KiB copy buffers ReverseProxy would
// otherwise allocate for every response.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// rewrite builds the outbound request. It runs after ReverseProxy removed
// hop-by-hop headers (including any named in Connection), so the identity
// header set here cannot be deleted by a client's "Connection: X-User-Id".
// ReverseProxy also drops the client's Forwarded and X-Forwarded-* before
// calling it, so SetXForwarded replaces rather than appends.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	info := Info(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = p.upstream.Scheme
	out.URL.Host = p.upstream.Host
	out.URL.Path = p.basePath + info.path
	out.URL.RawPath = ""
	out.URL.Opaque = ""
	if info.token {
		out.URL.RawQuery = withoutToken(out.URL.RawQuery)
	}
	out.Host = ""
	p.setForwarded(pr)
	p.strip.apply(out.Header)
	if info.UserID != "" {
		out.Header[p.identityKey] = []string{info.UserID}
	}
	// A verified Bearer token has done its job: the identity header says
	// who the user is, and an upstream that never holds the credential
	// cannot log or replay it.
	if info.bearer && !p.o.ForwardAuthorization {
		delete(out.Header, "Authorization")
	}
}

// setForwarded sets X-Forwarded-For/Host/Proto on a ReverseProxy request.
func (p *Proxy) setForwarded(pr *httputil.ProxyRequest) { p.forwardedHeaders(pr.In, pr.Out.Header) }

// forwardedHeaders sets X-Forwarded-For/Host/Proto in h, the header of
// in's upstream request. From an untrusted peer the client's own values
// were already dropped and fresh ones are set; behind a trusted proxy its
// values are kept and the peer is appended to the chain.
func (p *Proxy) forwardedHeaders(in *http.Request, h http.Header) {
	if !trustedProxies(p.o.TrustedProxies).peerTrusted(in) {
		// SetXForwarded's work, with one allocation for the three values
		// and no re-canonicalizing of the names: this runs on every
		// business request.
		ip, _, err := net.SplitHostPort(in.RemoteAddr)
		proto := "http"
		if in.TLS != nil {
			proto = "https"
		}
		vals := []string{ip, in.Host, proto}
		if err == nil {
			h["X-Forwarded-For"] = vals[0:1:1]
		} else {
			delete(h, "X-Forwarded-For")
		}
		h["X-Forwarded-Host"] = vals[1:2:2]
		h["X-Forwarded-Proto"] = vals[2:3:3]
		return
	}
	if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
		h["X-Forwarded-For"] = append([]string(nil), prior...)
	}
	// Appends the peer to the chain copied above.
	(&httputil.ProxyRequest{In: in, Out: &http.Request{Header: h}}).SetXForwarded()
	for _, name := range []string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := in.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
}

// modifyResponse removes the upstream's CORS headers on /api/*: the
// sidecar owns CORS there, and two answers would confuse browsers. A
// WebSocket tunnel's upstream side is wrapped so it ends with its token.
func (p *Proxy) modifyResponse(res *http.Response) error {
	info := Info(res.Request.Context())
	if res.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy passes a 101's header on whole: the client needs
		// its Connection and Upgrade. The other names Connection gives
		// are for this hop only.
		removeConnectionNamed(res.Header, "Connection", "Upgrade")
	}
	if info != nil && info.tunnel != nil && res.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy copies between the hijacked client connection and
		// this body; both now pass through the tunnel.
		if rwc, ok := res.Body.(io.ReadWriteCloser); ok {
			res.Body = info.tunnel.wrapUpstream(rwc)
		}
	}
	if info != nil && p.router.api.match(info.path) {
		dropUpstreamCORS(res.Header)
	}
	return nil
}

// Upstream error kinds, the authsidecar_upstream_errors_total label.
const (
	upstreamCanceled    = "canceled"
	upstreamTimeout     = "timeout"
	upstreamUnreachable = "unreachable"
	upstreamBusy        = "busy" // every connection in use and the queue for one full
	upstreamClientShare = "client_share"
)

// upstreamError answers 502 when the upstream cannot be reached and 504
// when it does not answer in time, in JSON like every other refusal.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if p.refuseSlowBody(w, Info(r.Context())) {
		// The request's context ended with the body: the client's doing,
		// not the upstream's.
		return
	}
	if errors.Is(err, errClientShare) {
		p.warnClientShare(Info(r.Context()))
		p.refuseBusy(w, r, upstreamClientShare, "Too many requests in flight from this client")
		return
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads this answer.
		p.o.Metrics.upstreamError(upstreamCanceled)
		w.WriteHeader(499)
		return
	}
	if errors.Is(err, errUpstreamBusy) {
		p.log.Warn("upstream busy", "error", err.Error())
		p.refuseBusy(w, r, upstreamBusy, "Upstream busy")
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		p.o.Metrics.upstreamError(upstreamTimeout)
		p.log.Warn("upstream timeout", "error", err.Error())
		writeError(w, http.StatusGatewayTimeout, "GATEWAY_TIMEOUT", "Upstream did not answer in time")
		return
	}
	p.o.Metrics.upstreamError(upstreamUnreachable)
	p.log.Warn("upstream unavailable", "error", err.Error())
	writeError(w, http.StatusBadGateway, "BAD_GATEWAY", "Upstream unavailable")
}

// hasUpgrade reports any attempt to switch protocols.
func hasUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || headerHasToken(r.Header, "Connection", "upgrade")
}

// upgradeAllowed: only a GET without a body asking for exactly websocket,
// and only where WebSockets are expected. h2c and anything else is
// refused. A handshake has no body (RFC 6455 section 4.1), and a body is
// read under deadlines on the connection (minrate.go) that the tunnel
// would inherit once hijacked.
func (p *Proxy) upgradeAllowed(r *http.Request, class Class) bool {
	if class != ClassWebSocket && class != ClassPassthrough || hasBody(r) {
		return false
	}
	up := r.Header.Values("Upgrade")
	return r.Method == http.MethodGet && len(up) == 1 && strings.EqualFold(strings.TrimSpace(up[0]), "websocket") &&
		headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// refuseBusy answers 503 with Retry-After for a request the upstream pool
// had no room for, counted as kind. A request with a body gets its
// connection closed: a body larger than Options.BodyBuffer is still
// unread, and the answer then goes at once, where net/http would first
// read what is left of it, at the client's pace.
func (p *Proxy) refuseBusy(w http.ResponseWriter, r *http.Request, kind, message string) {
	p.o.Metrics.upstreamError(kind)
	if r.Body != nil && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", message)
}
