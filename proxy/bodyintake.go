package proxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"time"
)

// DefaultBodyBuffer is Options.BodyBuffer's default.
const DefaultBodyBuffer = 64 << 10

// admit readies r for the upstream: it names the client for the
// upstream's per-client bound and takes the body (takeBody). It answers
// and returns false when the body could not be taken.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	info.client, info.clientAddr = p.clientOf(r)
	return p.takeBody(w, r, info)
}

// boundBody gives r's body the grace to start coming before anything
// reads it. A request refused before its body is read (401, 403, 503) is
// answered once net/http has read and dropped what is left of the body
// (up to 256 KiB), and nothing else bounds that read: a trickled body
// would hold the connection and its goroutine for ever. takeBody's reads
// (and the issuer's) set deadlines of their own.
func (p *Proxy) boundBody(w http.ResponseWriter, r *http.Request) {
	if p.o.BodyMinRate > 0 && hasBody(r) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(p.o.BodyRateGrace))
	}
}

func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// takeBody puts r's body under the minimum rate and, when it is at most
// BodyBuffer bytes, reads it whole before any upstream connection is
// taken: a small body sent slowly then holds a goroutine and what it has
// sent so far, never a connection. A larger body streams as it comes,
// under the rate still. The body is forwarded as it was framed (a length,
// or chunked), its trailer names without their values, as before.
func (p *Proxy) takeBody(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	if !hasBody(r) {
		return true
	}
	body := r.Body
	if p.o.BodyMinRate > 0 {
		info.body = &slowBody{rc: r.Body, ctl: http.NewResponseController(w), pace: newPace(p.o.BodyMinRate, p.o.BodyRateGrace)}
		body = info.body
	}
	if p.o.BodyBuffer < 0 || r.ContentLength > p.o.BodyBuffer {
		r.Body = body
		return true
	}
	// Reading the body to its end fills r.Trailer's values. The upstream
	// gets the names without values, as before and as from ReverseProxy
	// (which copies them before it reads): no check has seen the values,
	// and one may be named X-User-Id.
	var announced http.Header
	if len(r.Trailer) > 0 {
		announced = r.Trailer.Clone()
		defer func() { r.Trailer = announced }()
	}
	head, whole, err := readHead(body, r.ContentLength, p.o.BodyBuffer)
	switch {
	case err != nil:
		if !p.refuseSlowBody(w, info) {
			p.log.Debug("request body unreadable", "error", err.Error())
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "Could not read request body")
		}
		return false
	case whole:
		r.Body = io.NopCloser(bytes.NewReader(head))
	default:
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), body), body}
	}
	return true
}

// readHead reads r to its end if that comes within limit bytes (whole),
// else limit+1 bytes of it. size is the length r announced, -1 if none;
// the buffer grows with what comes, not with what was announced.
func readHead(r io.Reader, size, limit int64) (head []byte, whole bool, err error) {
	want := limit + 1 // a byte past limit says the body is larger
	if size >= 0 {
		want = min(want, size+1)
	}
	buf := make([]byte, 0, min(want, 4<<10))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == want {
				return buf, false, nil
			}
			buf = slices.Grow(buf, int(min(want, 2*int64(cap(buf))))-len(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// refuseSlowBody answers 408 when the request's body came below the minimum
// rate, counts it, and reports whether it did.
func (p *Proxy) refuseSlowBody(w http.ResponseWriter, info *RequestInfo) bool {
	if info == nil || info.body == nil || !info.body.tripped.Load() {
		return false
	}
	p.tooSlow(info, CloseReasonSlowBody)
	// The rest of the body is not read: the connection cannot carry
	// another request.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestTimeout, "REQUEST_TIMEOUT", "Request body not received in time")
	return true
}

// tooSlow records that the proxy ended the request for a client too slow.
func (p *Proxy) tooSlow(info *RequestInfo, reason string) {
	if info.slow != "" {
		return
	}
	info.slow = reason
	p.o.Metrics.slowClient(reason)
	p.log.Info("client too slow", "reason", reason, "min_rate", p.o.BodyMinRate, "grace", p.o.BodyRateGrace.String())
}

// slowEnd records a request cut because its body came too slowly.
func (p *Proxy) slowEnd(info *RequestInfo) {
	if info.body != nil && info.body.tripped.Load() {
		p.tooSlow(info, CloseReasonSlowBody)
	}
}

// readFull reads r into buf until buf is full or r ends (io.EOF); an
// answer's body must be read to its io.EOF for its connection to be kept.
func readFull(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
