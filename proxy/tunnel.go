package proxy

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A WebSocket tunnel ends with the token that opened it. A JWT is checked
// once, at the upgrade; without this a tunnel opened a minute before exp
// would carry the user's identity for as long as the peers keep it alive,
// past the token's life and so past any session that ended with it.
//
// ReverseProxy still does the upgrade and runs the two copy loops; the
// tunnel only wraps the two connections it copies between. Each Write
// toward a peer passes through a frame tracker (RFC 6455 §5.2) that knows
// where the current frame and message end, without copying or buffering.
// At exp + leeway each direction gets a close frame, code 1008 (policy
// violation), at its next boundary (at once when it is idle): the end of a
// frame outside a fragmented message, so no frame or message is cut in
// half; toward the upstream it is masked, as a client's frames must be.
// Bytes that are not WebSocket frames end the tunnel at once (reject),
// whatever the deadline, with a log line saying who sent them.
// Whatever either peer sends after that is read and dropped, until both
// have answered with their own close frame or hung up. Then, or
// wsCloseWait after exp at the latest, both connections are closed: a peer
// that never finishes its frame or never answers cannot keep the tunnel
// open.
//
// The state machine. The tunnel as a whole:
//
//	open     before the deadline: every byte passes, each direction's
//	         frame tracker follows where the current frame ends.
//	closing  from the deadline (expire): each direction finishes the frame
//	         in flight, sends its close frame, then drops what follows.
//	closed   both connections closed (closeBoth): both handshakes are over
//	         (check), wsCloseWait passed (the bound timer), ReverseProxy
//	         closed a side after the deadline (stop), or a peer sent bytes
//	         that are not frames (reject, from open or closing).
//
// Each direction (wsDir) while closing: waiting for a frame boundary ->
// sent (our close, or the sender's own close, went out, or writing
// failed) -> over (sent, and the sender answered with its close or hung
// up: srcDone). Who moves them: the deadline timer (expire), the copy
// loops' writes (forward, at a boundary) and reads (ended, at EOF),
// ReverseProxy's close (stop), and the bound timer (closeBoth). stop
// before the deadline ends the tunnel with no close frame at all: the
// peers ended it themselves.

// CloseReasonTokenExpired is RequestInfo.CloseReason (and the access log's
// close_reason) of a tunnel the proxy closed because its token expired.
const CloseReasonTokenExpired = "token_expired"

// CloseReasonNotWebSocket is the CloseReason of a tunnel the proxy closed
// because a peer sent bytes that are not RFC 6455 frames: whatever they
// are, they are not what the token was checked for.
const CloseReasonNotWebSocket = "not_websocket"

const (
	// wsCloseWait bounds the closing handshake: from the deadline until
	// both connections are closed whatever the peers do. Long enough for a
	// frame in flight to finish and for both peers to answer the close on
	// any sane link; short enough that an expired token buys nothing.
	wsCloseWait = 2 * time.Second
	// wsPolicyViolation is the close code for "the endpoint's policy ended
	// this connection" (RFC 6455 §7.4.1).
	wsPolicyViolation = 1008
	wsOpClose         = 0x8
	wsCloseReason     = "token expired"
)

// wsTunnel is one upgraded connection with a deadline.
type wsTunnel struct {
	deadline time.Time
	// toClient carries the upstream's frames, toUpstream the client's.
	toClient, toUpstream wsDir

	client   *wsClientConn
	upstream *wsUpstreamConn

	begin    sync.Once
	mu       sync.Mutex // guards timer, bound, done
	timer    *time.Timer
	bound    *time.Timer
	done     bool          // the tunnel ended (ReverseProxy closed a side)
	expired  atomic.Bool   // the deadline passed while the tunnel was open
	broken   atomic.Bool   // a peer sent bytes that are not WebSocket frames
	finished chan struct{} // closed once both connections are closed
	finish   sync.Once
	log      *slog.Logger
}

func newWSTunnel(deadline time.Time, log *slog.Logger) *wsTunnel {
	t := &wsTunnel{deadline: deadline, finished: make(chan struct{}), log: log}
	t.toClient.t, t.toUpstream.t = t, t
	t.toUpstream.masked = true
	t.toUpstream.frames.masked = true
	t.toClient.from, t.toUpstream.from = "upstream", "client"
	return t
}

// reject ends the tunnel at once, both connections closed, when d's
// sender sent bytes that are not WebSocket frames; none of them is
// forwarded. No close frame: the stream it would follow is not WebSocket.
func (t *wsTunnel) reject(d *wsDir, err error) {
	if t.broken.CompareAndSwap(false, true) {
		t.log.Warn("websocket tunnel closed: bytes that are not WebSocket frames (RFC 6455) after the upgrade",
			"from", d.from, "error", err.Error())
	}
	t.closeBoth()
}

// writer wraps w so that the hijacked client connection and, through
// Proxy.modifyResponse, the upstream's connection pass through the tunnel.
func (t *wsTunnel) writer(w http.ResponseWriter) http.ResponseWriter {
	return &tunnelWriter{ResponseWriter: w, t: t}
}

type tunnelWriter struct {
	http.ResponseWriter
	t *wsTunnel
}

func (w *tunnelWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return conn, brw, err
	}
	c := &wsClientConn{Conn: conn, t: w.t}
	if brw != nil {
		c.br = brw.Reader
	}
	w.t.client = c
	w.t.toClient.w = conn
	return c, brw, nil
}

func (w *tunnelWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrapUpstream returns the upstream's side of a 101 response, to put in
// res.Body where ReverseProxy takes it from.
func (t *wsTunnel) wrapUpstream(rwc io.ReadWriteCloser) io.ReadWriteCloser {
	t.upstream = &wsUpstreamConn{rwc: rwc, t: t}
	t.toUpstream.w = rwc
	return t.upstream
}

// start arms the deadline. It runs on the first read or write of either
// copy loop: ReverseProxy starts them only once the 101 has been flushed
// to the client, so a close frame can never precede it.
func (t *wsTunnel) start() {
	t.begin.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.done {
			t.timer = time.AfterFunc(time.Until(t.deadline), t.expire)
		}
	})
}

// expire runs at the deadline: close frames out both ways, and a bound on
// how long the peers get to answer.
func (t *wsTunnel) expire() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.expired.Store(true)
	t.bound = time.AfterFunc(wsCloseWait, t.closeBoth)
	t.mu.Unlock()
	// Either write may block on a peer that does not read; the bound
	// closes the connection under it.
	var wg sync.WaitGroup
	wg.Go(t.toUpstream.expire)
	t.toClient.expire()
	wg.Wait()
	t.check()
}

// check closes both connections once the closing handshake is over both
// ways: a close frame went to each peer (or could not be written) and each
// peer answered with its own or hung up.
func (t *wsTunnel) check() {
	if t.expired.Load() && t.toClient.over() && t.toUpstream.over() {
		t.closeBoth()
	}
}

// closeBoth closes both connections, which ends both copy loops.
func (t *wsTunnel) closeBoth() {
	t.finish.Do(func() {
		close(t.finished)
		if t.client != nil {
			t.client.Conn.Close()
		}
		if t.upstream != nil {
			t.upstream.rwc.Close()
		}
	})
}

// stop is called when ReverseProxy closes either side: the tunnel is over
// and no deadline may fire any more.
func (t *wsTunnel) stop() {
	t.mu.Lock()
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.bound != nil {
		t.bound.Stop()
	}
	t.mu.Unlock()
	if t.expired.Load() {
		t.closeBoth()
	}
}

// ended is called when a peer's connection stops giving bytes. In a
// tunnel being closed for expiry the copy loop then waits for the other
// peer's close (bounded by wsCloseWait): ReverseProxy closes both
// connections as soon as one loop returns, and a close with unread bytes
// turns into a reset that can destroy our close frame before the peer
// reads it.
func (t *wsTunnel) ended(d *wsDir) {
	d.srcDone.Store(true)
	if !t.expired.Load() {
		return
	}
	d.mu.Lock()
	d.giveUpIfStuck()
	d.mu.Unlock()
	t.check()
	<-t.finished
}

// wsDir is one direction of the tunnel: the frames one peer sends, written
// to the other.
type wsDir struct {
	t      *wsTunnel
	w      io.Writer // the receiving peer's connection
	masked bool      // toward the upstream: frames from a client are masked
	from   string    // the sending peer, for the log: "client" or "upstream"

	mu     sync.Mutex // serializes writes to w; guards frames
	frames wsFrames
	// sent: a close frame went out this way (ours, or the sender's own),
	// or writing failed: nothing more goes to the receiving peer.
	sent atomic.Bool
	// srcDone: the sending peer sent its close frame or hung up.
	srcDone atomic.Bool
}

func (d *wsDir) over() bool { return d.sent.Load() && d.srcDone.Load() }

// forward writes p to the receiving peer, following the frames. Before
// the deadline it is a plain write. After it the write stops at the end of
// the current frame, the close frame follows, and the rest is dropped.
func (d *wsDir) forward(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(p)
	// The tunnel's flag, not one of this direction's own: it is set before
	// either close frame goes out, so a peer's answer to the first one
	// cannot slip through this direction ahead of ours.
	if !d.t.expired.Load() {
		if err := d.track(p); err != nil {
			return 0, err
		}
		return d.w.Write(p)
	}
	for {
		if d.sent.Load() {
			if err := d.track(p); err != nil { // only to see the sender's close frame
				return 0, err
			}
			break
		}
		if d.frames.boundary() {
			// At once, even when p ended with the frame (or message) in
			// flight: the sender may send nothing more.
			if err := d.sendClose(); err != nil {
				return n - len(p), err
			}
			continue
		}
		if len(p) == 0 {
			break
		}
		k, ended, op, err := d.frames.next(p)
		if err != nil {
			d.t.reject(d, err)
			return n - len(p), err
		}
		_, err = d.w.Write(p[:k])
		if ended {
			d.frameEnded(op)
		}
		if err != nil {
			d.sent.Store(true)
			return n - len(p), err
		}
		p = p[k:]
	}
	d.t.check()
	return n, nil
}

// track follows the frames of p without writing it; bytes that are not
// frames end the tunnel.
func (d *wsDir) track(p []byte) error {
	for len(p) > 0 {
		k, ended, op, err := d.frames.next(p)
		if err != nil {
			d.t.reject(d, err)
			return err
		}
		if ended {
			d.frameEnded(op)
		}
		p = p[k:]
	}
	return nil
}

// frameEnded notes the sender's close frame: it closes this direction as
// ours would, and it is the sender's answer to our close.
func (d *wsDir) frameEnded(op byte) {
	if op == wsOpClose {
		d.sent.Store(true)
		d.srcDone.Store(true)
	}
}

// expire runs at the deadline: the close frame goes out at once if no
// frame is half written, else forward sends it when the frame ends.
func (d *wsDir) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.sent.Load() && d.frames.boundary() {
		d.sendClose()
	}
	d.giveUpIfStuck()
}

// giveUpIfStuck: a sender that hung up in the middle of a frame will
// never finish it, so there will be no boundary for our close frame; the
// direction is over without one. Called with d.mu held.
func (d *wsDir) giveUpIfStuck() {
	if d.t.expired.Load() && d.srcDone.Load() && !d.frames.boundary() {
		d.sent.Store(true)
	}
}

// sendClose writes a close frame, code 1008, reason "token expired":
// masked toward the upstream (RFC 6455 §5.3, a fresh random key), plain
// toward the client. Called with d.mu held.
func (d *wsDir) sendClose() error {
	var f [2 + 4 + 2 + 32]byte
	payload := len(wsCloseReason) + 2
	f[0] = 0x80 | wsOpClose // FIN, close
	f[1] = byte(payload)
	body := f[2:]
	var key [4]byte
	if d.masked {
		f[1] |= 0x80
		rand.Read(key[:])
		copy(f[2:6], key[:])
		body = f[6:]
	}
	binary.BigEndian.PutUint16(body, wsPolicyViolation)
	copy(body[2:], wsCloseReason)
	if d.masked {
		for i := range payload {
			body[i] ^= key[i%4]
		}
	}
	frame := f[:len(f)-len(body)+payload]
	_, err := d.w.Write(frame)
	d.sent.Store(true)
	return err
}

// wsClientConn is the hijacked client connection. Reads first drain what
// the server had already buffered past the upgrade request (ReverseProxy
// would drop it, and the frame tracker must see every byte). It hides
// TCPConn's ReadFrom and WriteTo so every byte goes through Read and
// Write.
type wsClientConn struct {
	net.Conn
	t  *wsTunnel
	br *bufio.Reader
}

func (c *wsClientConn) Read(p []byte) (int, error) {
	c.t.start()
	var n int
	var err error
	if c.br != nil && c.br.Buffered() > 0 {
		n, err = c.br.Read(p[:min(len(p), c.br.Buffered())])
	} else {
		n, err = c.Conn.Read(p)
	}
	if err != nil {
		c.t.ended(&c.t.toUpstream)
	}
	return n, err
}

func (c *wsClientConn) Write(p []byte) (int, error) {
	c.t.start()
	return c.t.toClient.forward(p)
}

func (c *wsClientConn) Close() error {
	c.t.stop()
	return c.Conn.Close()
}

// CloseWrite passes the upstream's end of stream on, as ReverseProxy does
// with a TCP connection.
func (c *wsClientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

var errNoCloseWrite = &net.OpError{Op: "close write", Err: http.ErrNotSupported}

// wsUpstreamConn is the upstream's side of the tunnel (the 101 response's
// body).
type wsUpstreamConn struct {
	rwc io.ReadWriteCloser
	t   *wsTunnel
}

func (u *wsUpstreamConn) Read(p []byte) (int, error) {
	u.t.start()
	n, err := u.rwc.Read(p)
	if err != nil {
		u.t.ended(&u.t.toClient)
	}
	return n, err
}

func (u *wsUpstreamConn) Write(p []byte) (int, error) {
	u.t.start()
	return u.t.toUpstream.forward(p)
}

// Close is how ReverseProxy ends the tunnel: when a copy loop returns, or
// when the request is canceled (shutdown at the end of the grace).
func (u *wsUpstreamConn) Close() error {
	u.t.stop()
	return u.rwc.Close()
}

// wsFrames follows RFC 6455 §5.2 framing through a byte stream, so the
// proxy knows where each frame and each message ends without buffering or
// copying it. It checks each header as far as framing goes (§5.2, §5.4,
// §5.5): a known opcode, the mask bit the sender's side must set, control
// frames final and short, continuations only inside a message and a new
// message only outside one. Anything else is not WebSocket, and next says
// so. Reserved bits are left alone: an extension the peers negotiated may
// use them.
type wsFrames struct {
	hdr       [14]byte // the current frame's header, as far as read
	nhdr      int
	left      uint64 // payload bytes of the current frame still to come
	inPayload bool
	// inMessage: a fragmented message has begun (a data frame without FIN)
	// and its last fragment has not come. A close frame may not be sent
	// into it: control frames between fragments are legal, but a peer
	// that reads a message whole would see it cut.
	inMessage bool
	masked    bool // the sender is a client: its frames must be masked
}

// boundary reports whether a close frame may go now: between frames, and
// not inside a fragmented message.
func (f *wsFrames) boundary() bool { return f.nhdr == 0 && !f.inPayload && !f.inMessage }

// errNotWebSocket wraps what next finds wrong with a header.
var errNotWebSocket = errors.New("not a WebSocket frame")

// check judges the current header, whole (h holds headerLen bytes).
func (f *wsFrames) check(h []byte) error {
	op, fin, masked := h[0]&0x0f, h[0]&0x80 != 0, h[1]&0x80 != 0
	switch {
	case op > 0x2 && op < 0x8 || op > 0xa:
		return fmt.Errorf("%w: opcode %#x", errNotWebSocket, op)
	case f.masked && !masked:
		return fmt.Errorf("%w: an unmasked frame from the client", errNotWebSocket)
	case !f.masked && masked:
		return fmt.Errorf("%w: a masked frame from the upstream", errNotWebSocket)
	case op >= 0x8 && (!fin || h[1]&0x7f > 125):
		return fmt.Errorf("%w: control frame %#x fragmented or longer than 125 bytes", errNotWebSocket, op)
	case op == 0x0 && !f.inMessage:
		return fmt.Errorf("%w: a continuation frame with no message begun", errNotWebSocket)
	case (op == 0x1 || op == 0x2) && f.inMessage:
		return fmt.Errorf("%w: a new message before the last one's final fragment", errNotWebSocket)
	case h[1]&0x7f == 127 && h[2]&0x80 != 0:
		return fmt.Errorf("%w: a 64-bit length with its top bit set", errNotWebSocket)
	}
	return nil
}

// headerLen is the header's length as far as the bytes read tell: 2, plus
// 2 or 8 for an extended length, plus 4 for a masking key.
func (f *wsFrames) headerLen() int {
	if f.nhdr < 2 {
		return 2
	}
	n := 2
	switch f.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f.hdr[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// next consumes p up to the end of the current frame and returns how many
// bytes that took; when the frame ended there, ended is true and op is its
// opcode. A header that is not WebSocket is an error wrapping
// errNotWebSocket, with nothing consumed of p counted.
func (f *wsFrames) next(p []byte) (n int, ended bool, op byte, err error) {
	for n < len(p) {
		if !f.inPayload {
			var h []byte
			if f.nhdr == 0 && len(p)-n >= 14 {
				// The whole header is in p (14 bytes is the longest):
				// read it in place, the usual case.
				h = p[n:]
				f.hdr[0], f.hdr[1] = h[0], h[1]
				f.nhdr = 2
				n += f.headerLen()
			} else {
				k := copy(f.hdr[f.nhdr:f.headerLen()], p[n:])
				f.nhdr += k
				n += k
				if f.nhdr < f.headerLen() {
					continue // the length byte may have made the header longer
				}
				h = f.hdr[:]
			}
			if err := f.check(h[:f.headerLen()]); err != nil {
				return 0, false, 0, err
			}
			switch l := h[1] & 0x7f; l {
			case 126:
				f.left = uint64(binary.BigEndian.Uint16(h[2:4]))
			case 127:
				f.left = binary.BigEndian.Uint64(h[2:10])
			default:
				f.left = uint64(l)
			}
			f.inPayload = true
		}
		k := min(uint64(len(p)-n), f.left)
		n += int(k)
		f.left -= k
		if f.left == 0 {
			op = f.hdr[0] & 0x0f
			if op < 0x8 { // data: a message goes on until a final frame
				f.inMessage = f.hdr[0]&0x80 == 0
			}
			f.nhdr, f.inPayload = 0, false
			return n, true, op, nil
		}
	}
	return n, false, 0, nil
}
