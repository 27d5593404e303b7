package proxy

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
)

// maxInformational bounds the 1xx answers passed on for one request: the
// next fails it with 502. Real upstreams send one or two (100 Continue,
// 103 Early Hints); one that keeps sending them is broken or hostile, and
// dropping the extra ones would leave the request, its upstream slot and
// its client waiting on the flood until the header timeout. Go's
// Transport failed a request after 5 until golang.org/issue/65035, which
// now bounds their total size instead, except when a hook takes them
// (relay's and ReverseProxy's do).
const maxInformational = 16

var errTooManyInformational = errors.New("upstream sent more than 16 informational (1xx) answers")

// informational returns the header of a 1xx answer as the client gets it:
// without hop-by-hop headers and those its Connection header names (which
// ReverseProxy passes on with a 1xx), without Set-Cookie, and without the
// headers the proxy strips from requests (the identity header in any
// spelling, other proxies' identity headers, proxy.strip_headers). A 1xx
// is not the answer: a cookie it set would stay when the final answer
// fails or is refused (as after the 16th 1xx), and identity headers on an
// answer would read as the sidecar's word on who the user is, which the
// upstream may echo but not give.
func (p *Proxy) informational(src http.Header) http.Header {
	h := src.Clone()
	removeHopHeaders(h)
	delete(h, "Set-Cookie")
	delete(h, "Set-Cookie2")
	for name := range h {
		if p.strip.drops(name) {
			delete(h, name)
		}
	}
	return h
}

// upgradeWriter is the ResponseWriter an upgrade is forwarded on by
// ReverseProxy, whose trace hook passes each 1xx on as relay's informer
// does, but whole and without a bound: it adds the 1xx's header to the
// ResponseWriter's and calls WriteHeader (then clears the header, the
// sidecar's own headers with it). Here that header loses what
// informational removes, and a 1xx past maxInformational is not written;
// the hook withTrace adds then fails the request.
type upgradeWriter struct {
	http.ResponseWriter
	p *Proxy
	n atomic.Int32 // 1xx answers so far (written on the Transport's reader)
}

func (w *upgradeWriter) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		if w.n.Add(1) > maxInformational {
			return
		}
		h := w.Header()
		keep := w.p.informational(h)
		clear(h)
		maps.Copy(h, keep)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *upgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withTrace returns r with a trace hook that fails the request at the
// 1xx past maxInformational. httptrace calls it after ReverseProxy's,
// and its answer is the one that counts.
func (w *upgradeWriter) withTrace(r *http.Request) *http.Request {
	return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(int, textproto.MIMEHeader) error {
			if w.n.Load() > maxInformational {
				return errTooManyInformational
			}
			return nil
		},
	}))
}

// forwardUpgrade forwards r, an upgrade, by ReverseProxy, with its 1xx
// answers bounded and filtered as relay's.
func (p *Proxy) forwardUpgrade(w http.ResponseWriter, r *http.Request) {
	uw := &upgradeWriter{ResponseWriter: w, p: p}
	p.rp.ServeHTTP(uw, uw.withTrace(r))
}
