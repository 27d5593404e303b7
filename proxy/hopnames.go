package proxy

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
)

// An answer's Connection header names the headers that are meant for one
// hop only, and a proxy must remove them before it forwards the answer
// (RFC 9110 section 7.6.1). But http.ReadResponse deletes the Connection
// header when it says "close" (it sets Response.Close instead: shouldClose
// in net/http/transfer.go), and nothing in net/http reports what else it
// said: after "Connection: X-Secret, close" the hop-by-hop removal, ours
// as httputil.ReverseProxy's, finds no Connection header and forwards
// X-Secret to the client. A 1xx answer loses its Connection header the
// same way.
//
// So the names are read from the wire as the bytes go by, before
// ReadResponse sees them: conns scans what its own reader reads, and the
// Transport's connections are dialed as tapConns that scan what the
// Transport reads, from the moment a request is given the connection
// (httptrace's GotConn: the previous answer on it has been read to its
// end, so the next bytes are the start of this one). The scan follows the
// header sections at the start of an answer, any 1xx and then the final
// one, with the line rules of net/textproto (a line ends at "\n", one
// "\r" before it is dropped, a line that starts with a space or a tab
// continues the field before it), and stops after the final one: a body
// costs one check per read. Then every header section whose Connection
// header net/http dropped loses the headers it named; one that kept its
// Connection header is left to the hop-by-hop removal downstream, as
// before.
//
// An https upstream's bytes are encrypted below the Transport's TLS, so
// its connections are not scanned: over HTTP/2 the Connection header is
// not used at all, over HTTP/1.1 the names are not known
// (docs/protocol.md).

// maxScannedSections bounds the 1xx answers whose names are kept: the
// proxy passes on 16 at most (maxInformational), and a flood of them must
// not grow the list. The final answer's names are always kept.
const maxScannedSections = 64

// hopNames are what the Connection headers of one answer's header
// sections named, besides close and keep-alive.
type hopNames struct {
	list  []sectionNames
	final int // the final answer's section, -1 until it was read
}

type sectionNames struct {
	section int
	names   []string
}

func (h *hopNames) reset() {
	clear(h.list)
	h.list = h.list[:0]
	h.final = -1
}

// strip removes from h, the header of section's answer as net/http read
// it, the headers its Connection header named, if net/http dropped that
// header.
func (h *hopNames) strip(section int, hdr http.Header) {
	if _, kept := hdr["Connection"]; kept || section < 0 {
		return
	}
	for _, s := range h.list {
		if s.section == section {
			for _, name := range s.names {
				hdr.Del(name)
			}
		}
	}
}

// hopScan follows the header sections at the start of an answer, as its
// bytes are read, and records their Connection names in out.
type hopScan struct {
	out     *hopNames // nil: not scanning
	line    []byte    // the current line so far, while it may matter
	skip    bool      // the current line cannot matter: its bytes are dropped
	started bool      // the current section's status line was read
	final   bool      // the current section is the final answer's
	inConn  bool      // the last field is a Connection field
	conn    []byte    // its value, continuation lines joined
	names   []string  // the current section's names so far
	section int
}

// begin starts the scan of an answer, whose names go to out.
func (s *hopScan) begin(out *hopNames) {
	out.reset()
	*s = hopScan{out: out, line: keepSmall(s.line), conn: keepSmall(s.conn)}
}

// keepSmall empties a buffer for reuse, unless a long line grew it: a
// connection kept idle must not hold on to it.
func keepSmall(b []byte) []byte {
	if cap(b) > 4<<10 {
		return nil
	}
	return b[:0]
}

// feed scans b, the next bytes read.
func (s *hopScan) feed(b []byte) {
	for len(b) > 0 && s.out != nil {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !s.skip {
				s.line = append(s.line, b...)
				s.decide()
			}
			return
		}
		switch {
		case s.skip:
		case len(s.line) == 0:
			s.endLine(b[:i]) // the whole line is in b: no copy
		default:
			s.line = append(s.line, b[:i]...)
			s.endLine(s.line)
		}
		s.line, s.skip = s.line[:0], false
		b = b[i+1:]
	}
}

var (
	connectionField = []byte("connection:")
	tokenClose      = []byte("close")
	tokenKeepAlive  = []byte("keep-alive")
)

// decide drops an unfinished line as soon as it is known not to matter: a
// field other than Connection, or the continuation of one.
func (s *hopScan) decide() {
	l := s.line
	switch {
	case !s.started || len(l) == 0:
	case l[0] == ' ' || l[0] == '\t':
		s.skip = !s.inConn
	case len(l) >= len(connectionField) && !bytes.EqualFold(l[:len(connectionField)], connectionField):
		s.endField()
		s.skip = true
	}
	if s.skip {
		s.line = s.line[:0]
	}
}

// endLine takes one whole line, without its "\n".
func (s *hopScan) endLine(l []byte) {
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	switch {
	case !s.started:
		s.started = true
		code, ok := statusCode(l)
		// A malformed status line fails ReadResponse: nothing follows.
		s.final = !ok || code < 100 || code > 199 || code == http.StatusSwitchingProtocols
	case len(l) == 0:
		s.endField()
		s.endSection()
	case l[0] == ' ' || l[0] == '\t':
		if s.inConn {
			s.conn = append(s.conn, ' ')
			s.conn = append(s.conn, bytes.TrimLeft(l, " \t")...)
		}
	default:
		s.endField()
		if len(l) >= len(connectionField) && bytes.EqualFold(l[:len(connectionField)], connectionField) {
			s.inConn = true
			s.conn = append(s.conn[:0], l[len(connectionField):]...)
		}
	}
}

// endField records the names of the Connection field that ends, if any.
func (s *hopScan) endField() {
	if !s.inConn {
		return
	}
	s.inConn = false
	for tok := range bytes.SplitSeq(s.conn, []byte(",")) {
		name := textproto.TrimBytes(tok)
		if len(name) == 0 || bytes.EqualFold(name, tokenClose) || bytes.EqualFold(name, tokenKeepAlive) {
			continue
		}
		s.names = append(s.names, string(name))
	}
}

func (s *hopScan) endSection() {
	if len(s.names) > 0 && (s.final || len(s.out.list) < maxScannedSections) {
		s.out.list = append(s.out.list, sectionNames{s.section, s.names})
	}
	s.names = nil
	if s.final {
		s.out.final = s.section
		s.out = nil
		return
	}
	s.section++
	s.started = false
}

// statusCode reads a status line's code as ReadResponse does: after the
// first space and any spaces more, three characters up to a space.
func statusCode(line []byte) (int, bool) {
	_, status, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return 0, false
	}
	code, _, _ := bytes.Cut(bytes.TrimLeft(status, " "), []byte(" "))
	if len(code) != 3 {
		return 0, false
	}
	n := 0
	for i, c := range code {
		switch {
		case '0' <= c && c <= '9':
			n = n*10 + int(c-'0')
		case i == 0 && c == '+': // strconv.Atoi takes a sign
		default:
			return 0, false
		}
	}
	return n, true
}

// tapConn is a connection the Transport dialed: it scans what the
// Transport reads for the names of the answer begun on it last.
type tapConn struct {
	net.Conn
	mu   sync.Mutex // the Transport reads on its own goroutine
	scan hopScan
}

func (c *tapConn) begin(out *hopNames) {
	c.mu.Lock()
	c.scan.begin(out)
	c.mu.Unlock()
}

// CloseWrite passes a tunnel's half-close on: ReverseProxy calls it
// through the 101's body, and ends the tunnel if it fails.
func (c *tapConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.scan.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// transportHops strips, for one request on the Transport, the headers the
// answers' dropped Connection headers named.
type transportHops struct {
	// names are those of the connection the request went out on last (the
	// Transport may retry on another); nil if it is not a tapConn. Set on
	// the request's goroutine before the request is written, read on the
	// Transport's reader after, and by RoundTrip after it returned.
	names     *hopNames
	informers int // the 1xx answers so far
}

// withTrace returns r with the request's trace extended by the hooks
// that scan and strip.
func (x *transportHops) withTrace(r *http.Request) *http.Request {
	tr := &httptrace.ClientTrace{GotConn: x.gotConn}
	if caller := httptrace.ContextClientTrace(r.Context()); caller != nil && caller.Got1xxResponse != nil {
		// httptrace calls this hook first, then the caller's, whose
		// answer counts. Without one of the caller's, the Transport
		// passes no 1xx on, and bounds them all by its header limit.
		tr.Got1xxResponse = x.got1xx
	}
	return r.WithContext(httptrace.WithClientTrace(r.Context(), tr))
}

func (x *transportHops) gotConn(info httptrace.GotConnInfo) {
	x.names = nil
	if c, ok := info.Conn.(*tapConn); ok {
		x.names = &hopNames{}
		c.begin(x.names)
	}
}

func (x *transportHops) got1xx(_ int, h textproto.MIMEHeader) error {
	if x.names != nil {
		x.names.strip(x.informers, http.Header(h))
	}
	x.informers++
	return nil
}

// final strips the final answer's header.
func (x *transportHops) final(res *http.Response) {
	if x.names != nil {
		x.names.strip(x.names.final, res.Header)
	}
}
