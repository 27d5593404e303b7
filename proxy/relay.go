package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// relay forwards a request that switches no protocol: every request but
// a WebSocket (or other) upgrade, which httputil.ReverseProxy tunnels.
//
// It does what ReverseProxy does for such a request, on the same
// Transport, with the same result on the wire (TestRelayMatchesReverseProxy
// holds the two side by side), and less work: ReverseProxy is written for
// any Director or Rewrite, so it clones the whole request and its header,
// then deletes the hop-by-hop and forwarding headers one by one, then
// lets Rewrite delete ours, then copies the request once more to attach
// its 1xx trace, and parses the response's Content-Type as a media type
// to spot a stream. Knowing the rules in advance, relay builds the
// outbound request once, in one allocation, and its header in one pass
// over the client's, keeping only what may go upstream.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, info *RequestInfo) {
	out := p.outbound(w, r, info)
	if body := out.req.Body; body != nil {
		// The Transport may read the body after the handler returns, and
		// closes it on errors, perhaps while the client still sends it
		// (Expect: 100-continue): it gets a wrapper whose Close only stops
		// further reads (golang.org/issue/46866).
		defer body.Close()
	}
	res, err := p.o.Transport.RoundTrip(out.req)
	out.info.done()
	if err != nil {
		p.upstreamError(w, out.req, err)
		return
	}
	// Closed on every way out, a panic's included: the body holds the
	// upstream connection and its slot (closing twice is harmless).
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusSwitchingProtocols:
		// Nobody asked to switch: the upstream is confused.
		p.upstreamError(w, out.req, fmt.Errorf("upstream switched protocols (%q) on a request that asked for none", res.Header.Get("Upgrade")))
		return
	case res.StatusCode < 100:
		// Three digits, so ReadResponse takes it, but no status HTTP
		// defines (WriteHeader would panic on it).
		p.upstreamError(w, out.req, fmt.Errorf("upstream answered status %03d", res.StatusCode))
		return
	}
	removeHopHeaders(res.Header)
	if p.router.api.match(info.path) {
		dropUpstreamCORS(res.Header)
	}
	h := w.Header()
	for name, vals := range res.Header {
		if len(vals) == 0 {
			continue
		}
		if old, ok := h[name]; ok {
			h[name] = append(old, vals...)
		} else {
			// The response is ours alone and read no more: share its
			// values instead of copying them.
			h[name] = vals
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for name := range res.Trailer {
			names = append(names, name)
		}
		h.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(res.StatusCode)
	if err := p.copyBody(w, res, info); err != nil {
		res.Body.Close()
		if r.Context().Value(http.ServerContextKey) != nil {
			// Part of the answer is gone: the client must see it cut,
			// not complete (golang.org/issue/23643). The server recovers
			// this panic and closes the connection.
			panic(http.ErrAbortHandler)
		}
		return
	}
	res.Body.Close() // now, so that res.Trailer is filled
	if len(res.Trailer) == 0 {
		return
	}
	// Trailers force chunking: net/http would otherwise compute a length
	// for a short body.
	http.NewResponseController(w).Flush()
	if len(res.Trailer) == announced {
		for name, vals := range res.Trailer {
			h[name] = append(h[name], vals...)
		}
		return
	}
	for name, vals := range res.Trailer {
		name = http.TrailerPrefix + name
		h[name] = append(h[name], vals...)
	}
}

// outbound is what relay sends upstream besides the request itself: its
// URL, body wrapper and 1xx forwarding, in one allocation.
type outbound struct {
	req   *http.Request
	url   url.URL
	trace httptrace.ClientTrace
	info  informer
	body  relayBody
}

// outbound builds the upstream request for r: the same method, path,
// query, body and end-to-end headers, minus what the sidecar keeps from
// the upstream, plus what it tells it (docs/protocol.md).
func (p *Proxy) outbound(w http.ResponseWriter, r *http.Request, info *RequestInfo) *outbound {
	o := &outbound{}
	o.url = url.URL{
		Scheme:     p.upstream.Scheme,
		Host:       p.upstream.Host,
		Path:       p.basePath + info.path,
		RawQuery:   cleanQuery(r.URL.RawQuery),
		ForceQuery: r.URL.ForceQuery,
	}
	if info.token {
		o.url.RawQuery = withoutToken(o.url.RawQuery)
	}
	o.info.w, o.info.p = w, p
	o.trace.Got1xxResponse = o.info.got1xx
	req := http.Request{
		Method:           r.Method,
		URL:              &o.url,
		Proto:            r.Proto,
		ProtoMajor:       r.ProtoMajor,
		ProtoMinor:       r.ProtoMinor,
		Header:           p.outboundHeader(r, info),
		ContentLength:    r.ContentLength,
		TransferEncoding: r.TransferEncoding, // read, never written, by the Transport
	}
	if r.ContentLength != 0 && r.Body != nil {
		o.body.rc = r.Body
		req.Body = &o.body
	}
	if r.Trailer != nil {
		req.Trailer = r.Trailer.Clone()
	}
	// WithContext is the one way to give a request its context; the
	// copy it makes is the request's only allocation of its own.
	o.req = req.WithContext(httptrace.WithClientTrace(r.Context(), &o.trace))
	return o
}

// outboundHeader is r's header as the upstream gets it, built in one
// pass. What it leaves out and adds, and in which order the rules apply,
// is what ReverseProxy and rewrite do to a copy of it: hop-by-hop headers
// (RFC 9110 section 7.6.1) and those Connection names go, and so do the
// client's Forwarded and X-Forwarded-*; TE: trailers is kept if asked
// for; then X-Forwarded-* are set; then the stripped headers go (the
// identity header in any spelling, underscores, the legacy and other
// proxies' identity headers, proxy.strip_headers, the session cookie);
// then the identity header is set, and a verified Bearer token leaves.
func (p *Proxy) outboundHeader(r *http.Request, info *RequestInfo) http.Header {
	in := r.Header
	var named map[string]bool // what Connection names, rarely anything
	for _, v := range in["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	dropAuth := info.bearer && !p.o.ForwardAuthorization
	h := make(http.Header, len(in)+5)
	for name, vals := range in {
		if p.unsent[name] || named[name] || p.strip.dropsSpelling(name) || dropAuth && name == "Authorization" {
			continue
		}
		// Shared with the client's request, whose header nobody writes:
		// the values are replaced, never written in place.
		h[name] = vals
	}
	if p.keepTE && headerHasToken(in, "Te", "trailers") {
		h["Te"] = teTrailers
	}
	p.forwardedHeaders(r, h)
	for _, name := range p.stripForwarded {
		delete(h, name)
	}
	p.strip.stripSessionCookie(h)
	if info.UserID != "" {
		h[p.identityKey] = []string{info.UserID}
	}
	if _, ok := h["User-Agent"]; !ok {
		// Without one, the Transport would send Go's own.
		h["User-Agent"] = emptyValue
	}
	return h
}

var (
	teTrailers = []string{"trailers"}
	emptyValue = []string{""}
)

// hopHeaders are the hop-by-hop headers a proxy never forwards, either
// way (RFC 9110 section 7.6.1; Proxy-Connection is libcurl's, Trailer is
// the name as RFC 7230 erratum 4522 has it). ReverseProxy drops the same.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// clientForwarded are the forwarding headers a client may not set: the
// sidecar sets X-Forwarded-* itself (extending a trusted proxy's chain).
var clientForwarded = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// removeHopHeaders deletes the response's hop-by-hop headers and those
// its Connection names.
func removeHopHeaders(h http.Header) {
	removeConnectionNamed(h)
	for _, name := range hopHeaders {
		delete(h, name)
	}
}

// removeConnectionNamed deletes the headers h's Connection header names,
// but for those in keep.
func removeConnectionNamed(h http.Header, keep ...string) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" && !anyEqualFold(keep, name) {
				h.Del(name)
			}
		}
	}
}

func anyEqualFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// dropUpstreamCORS removes the upstream's CORS headers: on /api/* the
// sidecar owns CORS, and two answers would confuse browsers.
func dropUpstreamCORS(h http.Header) {
	for name := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			delete(h, name)
		}
	}
}

// cleanQuery drops what url.ParseQuery cannot parse (a ";" separator, a
// bad escape) from a query, as ReverseProxy does, so that the upstream
// never reads parameters the sidecar did not see: the query is then
// re-encoded from what parsed. Most queries parse whole and pass as sent.
func cleanQuery(q string) string {
	if q == "" || !reencodeQueries && parsesWhole(q) {
		return q
	}
	v, _ := url.ParseQuery(q)
	return v.Encode()
}

// maxQueryParams is net/url's limit on the parameters it parses.
const maxQueryParams = 10000

// reencodeQueries: ReverseProxy re-encodes every query when GODEBUG sets
// a limit of its own on the parameters.
var reencodeQueries = strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams=")

func parsesWhole(q string) bool {
	if strings.Count(q, "&")+1 > maxQueryParams {
		return false
	}
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

// relayBody is the client's request body as the Transport reads it:
// closing it only stops further reads, so the Transport cannot close the
// client's body under a server still reading it.
type relayBody struct {
	rc     io.ReadCloser
	closed atomic.Bool
}

var errBodyClosed = errors.New("proxy: read of the request body after it was closed")

func (b *relayBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	return b.rc.Read(p)
}

func (b *relayBody) Close() error {
	b.closed.Store(true)
	return nil
}

// informer passes the upstream's 1xx answers (103 Early Hints, 100
// Continue) on to the client, until the final answer has come: at most
// maxInformational of them, each without what only a final answer may
// carry (informational.go).
type informer struct {
	mu       sync.Mutex
	finished bool
	w        http.ResponseWriter
	p        *Proxy
	n        int // 1xx answers so far
}

func (i *informer) got1xx(code int, header textproto.MIMEHeader) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.finished {
		// RoundTrip has returned: the header map belongs to the final
		// answer now.
		return nil
	}
	if i.n++; i.n > maxInformational {
		return errTooManyInformational
	}
	h := i.w.Header()
	// The sidecar's own headers (request id, Vary, CORS) go out with the
	// 1xx, and stay for the final answer; the 1xx's do not.
	own := maps.Clone(h)
	for name, vals := range i.p.informational(http.Header(header)) {
		h[name] = append(h[name], vals...)
	}
	i.w.WriteHeader(code)
	clear(h)
	maps.Copy(h, own)
	return nil
}

func (i *informer) done() {
	i.mu.Lock()
	i.finished = true
	i.mu.Unlock()
}

// copyBody copies the upstream's body to the client. A stream (an event
// stream, or any body of unknown length) is flushed at once and after
// every read, as ReverseProxy does, so each event reaches the client as
// it comes.
//
// While the upstream's body is open, it holds an upstream connection, so
// the client must take it at the minimum rate (pace, answerWriter). A
// body known to fit the buffer is read whole first, and closed (the
// connection goes back) before the client gets a byte of it: the common
// small answer costs no deadline, whatever the client's pace.
func (p *Proxy) copyBody(w http.ResponseWriter, res *http.Response, info *RequestInfo) error {
	stream := res.ContentLength == -1 || isEventStream(res.Header)
	out := newAnswerWriter(w, stream, p.o.BodyMinRate, p.o.BodyRateGrace)
	if stream {
		out.ctl.Flush()
	}
	buf := bufferPool{}.Get()
	defer bufferPool{}.Put(buf)
	whole := !stream && res.ContentLength <= int64(len(buf))
	for {
		var n int
		var rerr error
		if whole {
			n, rerr = readFull(res.Body, buf)
		} else {
			n, rerr = res.Body.Read(buf)
		}
		if rerr != nil && rerr != io.EOF && rerr != context.Canceled {
			p.rp.ErrorLog.Printf("proxy: reading the upstream's body: %v", rerr)
		}
		if rerr == io.EOF {
			// All of it is here: the connection goes back before the
			// client takes the rest.
			res.Body.Close()
		}
		if n > 0 {
			if err := out.write(buf[:n], rerr == io.EOF); err != nil {
				if out.slow {
					p.tooSlow(info, CloseReasonSlowRead)
				} else {
					// The request's body may have ended it (an upstream
					// that answers before it has read the body).
					p.slowEnd(info)
				}
				return err
			}
		}
		if rerr == io.EOF {
			out.end()
			return nil
		}
		if rerr != nil {
			p.slowEnd(info)
			return rerr
		}
	}
}

// isEventStream reports a text/event-stream Content-Type (with any
// parameters). The media type is parsed only when it could be one.
func isEventStream(h http.Header) bool {
	v := h["Content-Type"]
	if len(v) == 0 || !containsFold(v[0], "event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(v[0])
	return base == "text/event-stream"
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
