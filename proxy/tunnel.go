package proxy

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
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
// close_reason) of a tunnel the proxy closed because its token expired;
// CloseReasonTokenRevoked of one closed because its token was revoked
// (tunnel_revoke.go).
const (
	CloseReasonTokenExpired = "token_expired"
	CloseReasonTokenRevoked = "token_revoked"
)

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
	// The close frame's reason, the same length either way.
	wsCloseExpired = "token expired"
	wsCloseRevoked = "token revoked"
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
	expired  atomic.Bool   // the deadline passed (or the token was revoked) while the tunnel was open
	revoked  atomic.Bool   // it was the token's revocation, not its expiry
	broken   atomic.Bool   // a peer sent bytes that are not WebSocket frames
	finished chan struct{} // closed once both connections are closed
	finish   sync.Once
	log      *slog.Logger
	// stopped is closed once ReverseProxy has closed a side: a revocation
	// watcher waits on it.
	stopped  chan struct{}
	stopOnce sync.Once
	// watch, when set, watches for the token's revocation
	// (tunnel_revoke.go); start runs it, so no close frame can precede the
	// 101.
	watch func()
}

func newWSTunnel(deadline time.Time, log *slog.Logger) *wsTunnel {
	t := &wsTunnel{deadline: deadline, finished: make(chan struct{}), log: log, stopped: make(chan struct{})}
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
			if t.watch != nil {
				go t.watch()
			}
		}
	})
}

// expire runs at the deadline: close frames out both ways, and a bound on
// how long the peers get to answer.
func (t *wsTunnel) expire() {
	t.mu.Lock()
	if t.done || t.expired.Load() { // the deadline and a revocation may both come
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
	t.stopOnce.Do(func() { close(t.stopped) })
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

// sendClose writes a close frame, code 1008, reason "token expired" (or "token revoked"):
// masked toward the upstream (RFC 6455 §5.3, a fresh random key), plain
// toward the client. Called with d.mu held.
func (d *wsDir) sendClose() error {
	var f [2 + 4 + 2 + 32]byte
	reason := wsCloseExpired
	if d.t != nil && d.t.revoked.Load() {
		reason = wsCloseRevoked
	}
	payload := len(reason) + 2
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
	copy(body[2:], reason)
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
