package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/internal/wstest"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/server"
)

// lockedBuffer is an access log the handler goroutines and the test share.
type lockedBuffer = syncbuf.Buffer

// wsStack is the proxy with a key of the test's own, so tokens of any
// lifetime can be forged, in front of a real RFC 6455 upstream, with
// metrics, a JSON access log and the server's shutdown tracker.
type wsStack struct {
	priv    ed25519.PrivateKey
	reg     *prometheus.Registry
	access  *lockedBuffer
	log     *lockedBuffer // the proxy's log
	addr    string
	tracker *server.Tracker
	peers   chan *wsEnd // the upstream's side of each accepted WebSocket
}

func newWSStack(t testing.TB, leeway time.Duration) *wsStack {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub, priv, _ := ed25519.GenerateKey(nil)
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}, Logger: discard})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	s := &wsStack{priv: priv, reg: prometheus.NewRegistry(), access: &lockedBuffer{}, log: &lockedBuffer{}, tracker: server.NewTracker(), peers: make(chan *wsEnd, 8)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, br, err := wstest.Accept(w, r)
		if err != nil {
			return
		}
		s.peers <- &wsEnd{conn: conn, br: br, user: r.Header.Get("X-User-Id")}
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	m := proxy.NewMetrics(s.reg)
	p, err := proxy.New(proxy.Options{
		Upstream: upURL,
		Auth:     http.NotFoundHandler(),
		Verifier: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
			Keys: kc, Issuer: origin, Audience: origin, Leeway: leeway,
		}),
		WebSocketPrefixes: []string{"/ws/"},
		Passthrough:       []string{"/ws/browser"},
		Leeway:            leeway,
		Metrics:           m,
		Logger:            slog.New(slog.NewTextHandler(s.log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.tracker.Middleware(proxy.Chain(p, proxy.Observe(m, proxy.JSONAccessLog(s.access, discard))))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.addr = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// token forges a JWT for sub expiring at exp (whole seconds, as a JWT
// carries it), signed with the stack's key.
func (s *wsStack) token(sub string, exp time.Time) string {
	return sign(s.priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"},
		map[string]any{"sub": sub, "iat": time.Now().Unix(), "exp": exp.Unix(), "iss": origin, "aud": origin})
}

// open makes a WebSocket through the proxy and returns the client's end
// and the upstream's.
func (s *wsStack) open(t testing.TB, target string, header ...string) (client, upstream *wsEnd) {
	t.Helper()
	code, conn, br, err := wstest.Dial(s.addr, target, header...)
	if err != nil || code != http.StatusSwitchingProtocols {
		t.Fatalf("%s: got %d %v, want 101", target, code, err)
	}
	t.Cleanup(func() { conn.Close() })
	select {
	case up := <-s.peers:
		t.Cleanup(func() { up.conn.Close() })
		// A safety net only: a broken proxy fails the test instead of
		// hanging it.
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		up.conn.SetDeadline(time.Now().Add(30 * time.Second))
		return &wsEnd{conn: conn, br: br, client: true}, up
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the upstream never got the upgrade", target)
	}
	return nil, nil
}

// closedCount is authsidecar_websocket_closed_total{reason="token_expired"}.
func (s *wsStack) closedCount(t *testing.T) float64 {
	t.Helper()
	return s.closedBy(t, proxy.CloseReasonTokenExpired)
}

// closedBy is authsidecar_websocket_closed_total{reason=reason}.
func (s *wsStack) closedBy(t *testing.T, reason string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "authsidecar_websocket_closed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf(`no authsidecar_websocket_closed_total{reason=%q} series`, reason)
	return 0
}

// accessLine waits for the access log line of the upgrade to path made by
// user (written when its tunnel ends).
func (s *wsStack) accessLine(t *testing.T, user string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(s.access.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) == nil && l["user_id"] == user {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line for %s within 5s:\n%s", user, s.access.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wsEnd is one peer of a tunnel: the client (sends masked frames, reads
// plain ones) or the upstream (the other way round).
type wsEnd struct {
	conn    net.Conn
	br      *bufio.Reader
	client  bool
	user    string // upstream: the X-User-Id it was given
	wmu     sync.Mutex
	closing atomic.Bool // a close frame arrived: writers stop
}

func (e *wsEnd) write(op byte, p []byte) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return wstest.WriteFrame(e.conn, op, p, e.client)
}

func (e *wsEnd) read() (wstest.Frame, error) { return wstest.ReadFrame(e.br, !e.client) }

// roundTrip proves a tunnel carries frames both ways.
func roundTrip(t *testing.T, client, up *wsEnd) {
	t.Helper()
	for _, d := range []struct{ from, to *wsEnd }{{client, up}, {up, client}} {
		msg := []byte(fmt.Sprintf("hello from client=%v", d.from.client))
		if err := d.from.write(wstest.OpText, msg); err != nil {
			t.Fatalf("write: %v", err)
		}
		f, err := d.to.read()
		if err != nil || f.Op != wstest.OpText || !bytes.Equal(f.Payload, msg) {
			t.Fatalf("round trip: got %+v %v, want text %q", f, err, msg)
		}
	}
}

// closeSeen is what one peer saw of the proxy's close.
type closeSeen struct {
	at, endAt time.Time
	code      int
	reason    string
	frames    int   // data frames before the close frame
	end       error // the read after the close frame
	err       error // anything before the close frame
}

// awaitClose reads frames until the close frame, checking each data frame
// with data; answers the close when answer is set (an RFC 6455 peer
// does); then reads once more: after its close frame the proxy must send
// nothing but the end of the connection.
func awaitClose(e *wsEnd, answer bool, data func(wstest.Frame) error) (cs closeSeen) {
	for {
		f, err := e.read()
		if err != nil {
			cs.err = fmt.Errorf("after %d data frames, before any close frame: %w", cs.frames, err)
			return cs
		}
		if f.Op == wstest.OpClose {
			cs.at = time.Now()
			cs.code, cs.reason = f.CloseCode()
			break
		}
		if data != nil {
			if err := data(f); err != nil {
				cs.err = fmt.Errorf("data frame %d: %w", cs.frames, err)
				return cs
			}
		}
		cs.frames++
	}
	e.closing.Store(true)
	if answer {
		e.write(wstest.OpClose, wstest.ClosePayload(cs.code, ""))
	}
	_, cs.end = e.read()
	cs.endAt = time.Now()
	return cs
}

// checkClosed: a close frame 1008 "token expired", not before the
// deadline (a generous 5s after it at most), then the end of the
// connection.
func checkClosed(t *testing.T, who string, cs closeSeen, deadline time.Time) {
	t.Helper()
	switch {
	case cs.err != nil:
		t.Errorf("%s: %v", who, cs.err)
	case cs.code != 1008 || cs.reason != "token expired":
		t.Errorf("%s: got close %d %q, want 1008 \"token expired\"", who, cs.code, cs.reason)
	case cs.at.Before(deadline):
		t.Errorf("%s: close frame %v before exp + leeway", who, deadline.Sub(cs.at))
	case cs.at.Sub(deadline) > 5*time.Second:
		t.Errorf("%s: close frame %v after exp + leeway, want within 5s", who, cs.at.Sub(deadline))
	case !errors.Is(cs.end, io.EOF):
		t.Errorf("%s: after the close frame got %v, want EOF", who, cs.end)
	}
	if cs.err == nil {
		t.Logf("%s: close frame %v after exp+leeway (%d data frames before it), EOF %v after it",
			who, cs.at.Sub(deadline).Round(time.Millisecond), cs.frames, cs.endAt.Sub(cs.at).Round(time.Millisecond))
	}
}

// TestWebSocketEndsWithToken: a tunnel opened with a token that expires
// gets a close frame 1008 both ways at exp + leeway, not before, and then
// both connections end; the access log line and the metric say why.
// Tunnels opened with a live token or none (passthrough) carry on.
func TestWebSocketEndsWithToken(t *testing.T) {
	tests := []struct {
		name   string
		bearer bool // the token in Authorization instead of ?token=
		answer bool // the peers answer the close frame
	}{
		{"token in query, peers answer", false, true},
		{"token in Authorization, peers answer", true, true},
		{"peers never answer", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const leeway = 500 * time.Millisecond
			s := newWSStack(t, leeway)
			// 1 to 2 s from now: exp is whole seconds.
			exp := time.Unix(time.Now().Unix()+2, 0)
			deadline := exp.Add(leeway)
			tok := s.token("user-1", exp)
			target, hdr := "/ws/chat?room=1&token="+tok, []string(nil)
			if tt.bearer {
				target, hdr = "/ws/chat?room=1", []string{"Authorization", "Bearer " + tok}
			}
			client, up := s.open(t, target, hdr...)
			if up.user != "user-1" {
				t.Fatalf("upstream got X-User-Id %q, want user-1", up.user)
			}
			roundTrip(t, client, up)
			live, liveUp := s.open(t, "/ws/chat?token="+s.token("user-2", time.Now().Add(time.Hour)))
			pass, passUp := s.open(t, "/ws/browser")

			var cs, us closeSeen
			var wg sync.WaitGroup
			wg.Go(func() { cs = awaitClose(client, tt.answer, nil) })
			wg.Go(func() { us = awaitClose(up, tt.answer, nil) })
			wg.Wait()
			checkClosed(t, "client", cs, deadline)
			checkClosed(t, "upstream", us, deadline)
			if !tt.answer {
				// Nobody answered: the proxy waited out the bound.
				for who, at := range map[string]time.Time{"client": cs.endAt, "upstream": us.endAt} {
					if at.Before(deadline.Add(proxy.WSCloseWait)) {
						t.Errorf("%s: connection closed %v after exp+leeway with no answer, want at least %v", who, at.Sub(deadline), proxy.WSCloseWait)
					}
				}
			}
			roundTrip(t, live, liveUp)
			roundTrip(t, pass, passUp)

			l := s.accessLine(t, "user-1")
			if l["status"] != 101.0 || l["class"] != "websocket" || l["path"] != "/ws/chat" || l["close_reason"] != "token_expired" {
				t.Errorf("access log: got %v, want status 101, class websocket, path /ws/chat, close_reason token_expired", l)
			}
			if n := s.closedCount(t); n != 1 {
				t.Errorf("websocket_closed_total{reason=token_expired}: got %v, want 1", n)
			}
		})
	}
}

// streamFrames writes binary frames of size bytes until the end sees a
// close frame or a write fails. Each payload is its sequence number and
// then a pattern, so the reader can tell a whole frame from a cut one.
func streamFrames(e *wsEnd, size int) {
	payload := make([]byte, size)
	for seq := uint64(0); !e.closing.Load(); seq++ {
		fillFrame(payload, seq)
		e.wmu.Lock()
		err := error(nil)
		if !e.closing.Load() {
			err = wstest.WriteFrame(e.conn, wstest.OpBinary, payload, e.client)
		}
		e.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func fillFrame(p []byte, seq uint64) {
	binary.BigEndian.PutUint64(p, seq)
	for i := 8; i < len(p); i++ {
		p[i] = byte(uint64(i)*7 + seq)
	}
}

// frameChecker accepts only the frames streamFrames writes, in order.
func frameChecker(size int) func(wstest.Frame) error {
	want := make([]byte, size)
	var seq uint64
	return func(f wstest.Frame) error {
		fillFrame(want, seq)
		if f.Op != wstest.OpBinary || !f.Fin || !bytes.Equal(f.Payload, want) {
			return fmt.Errorf("frame %d: op %#x, %d bytes, not the frame written", seq, f.Op, len(f.Payload))
		}
		seq++
		return nil
	}
}

// TestWebSocketCloseBetweenFrames: both peers stream 256 KiB frames
// without pause, so at the deadline each direction is almost surely in
// the middle of one. Every frame each peer reads before the close frame
// is whole and in order (a strict reader), and the close frame comes
// right after one: the proxy finished the frame in flight, then closed.
func TestWebSocketCloseBetweenFrames(t *testing.T) {
	const size = 256 << 10
	const leeway = 200 * time.Millisecond
	s := newWSStack(t, leeway)
	exp := time.Unix(time.Now().Unix()+2, 0)
	client, up := s.open(t, "/ws/stream?token="+s.token("user-3", exp))

	var cs, us closeSeen
	var wg sync.WaitGroup
	wg.Go(func() { streamFrames(client, size) })
	wg.Go(func() { streamFrames(up, size) })
	wg.Go(func() { cs = awaitClose(client, true, frameChecker(size)) })
	wg.Go(func() { us = awaitClose(up, true, frameChecker(size)) })
	wg.Wait()
	checkClosed(t, "client", cs, exp.Add(leeway))
	checkClosed(t, "upstream", us, exp.Add(leeway))
	if cs.frames == 0 || us.frames == 0 {
		t.Errorf("data frames before the close: client %d, upstream %d; want both streaming", cs.frames, us.frames)
	}
	if l := s.accessLine(t, "user-3"); l["close_reason"] != "token_expired" {
		t.Errorf("access log: got %v, want close_reason token_expired", l)
	}
}

// TestWebSocketStalledFrameCut: an upstream that stops in the middle of a
// frame leaves no boundary for a close frame toward the client. The
// proxy does not wait for one past the bound: the client gets the start
// of the frame and then the end of the connection, wsCloseWait after the
// deadline; the idle direction still got its close frame on time.
func TestWebSocketStalledFrameCut(t *testing.T) {
	const leeway = 200 * time.Millisecond
	s := newWSStack(t, leeway)
	exp := time.Unix(time.Now().Unix()+2, 0)
	deadline := exp.Add(leeway)
	client, up := s.open(t, "/ws/stall?token="+s.token("user-4", exp))
	frame := wstest.AppendFrame(nil, wstest.OpBinary, make([]byte, 1000), false)
	if _, err := up.conn.Write(frame[:4+10]); err != nil { // header and 10 of 1000 bytes
		t.Fatal(err)
	}
	var us closeSeen
	done := make(chan struct{})
	go func() { us = awaitClose(up, false, nil); close(done) }()
	_, err := client.read()
	cut := time.Now()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("client: got %v, want the frame cut short (unexpected EOF)", err)
	}
	if cut.Before(deadline.Add(proxy.WSCloseWait)) {
		t.Errorf("client: connection ended %v after exp+leeway, want at least %v (the bound)", cut.Sub(deadline), proxy.WSCloseWait)
	}
	<-done
	checkClosed(t, "upstream", us, deadline)
	t.Logf("client: stalled frame cut %v after exp+leeway", cut.Sub(deadline).Round(time.Millisecond))
	// The line is written once the handler returned, after the count.
	if l := s.accessLine(t, "user-4"); l["close_reason"] != "token_expired" {
		t.Errorf("access log: got %v, want close_reason token_expired", l)
	}
	if n := s.closedCount(t); n != 1 {
		t.Errorf("websocket_closed_total{reason=token_expired}: got %v, want 1", n)
	}
}

// TestWebSocketShutdownStillCloses: a tunnel with a live token is still
// closed by the shutdown (the tracker's StopAll at the end of the grace),
// and that is not counted as an expiry.
func TestWebSocketShutdownStillCloses(t *testing.T) {
	s := newWSStack(t, 0)
	client, up := s.open(t, "/ws/chat?token="+s.token("user-5", time.Now().Add(time.Hour)))
	roundTrip(t, client, up)
	start := time.Now()
	s.tracker.StopAll()
	for who, e := range map[string]*wsEnd{"client": client, "upstream": up} {
		if _, err := e.read(); !errors.Is(err, io.EOF) {
			t.Errorf("%s after StopAll: got %v, want EOF", who, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("tunnel closed %v after StopAll, want within 5s", d)
	}
	if l := s.accessLine(t, "user-5"); l["status"] != 101.0 || l["close_reason"] != nil {
		t.Errorf("access log: got %v, want status 101 and no close_reason", l)
	}
	if n := s.closedCount(t); n != 0 {
		t.Errorf("websocket_closed_total{reason=token_expired}: got %v, want 0", n)
	}
}

// BenchmarkWebSocketTunnel: upstream-to-client throughput of 64 KiB
// frames through a tunnel that follows the framing (opened with a token)
// against the same proxy's passthrough tunnel, which is ReverseProxy's
// plain copy: the ratio is the cost of ending tunnels with their token.
func BenchmarkWebSocketTunnel(b *testing.B) {
	frame := wstest.AppendFrame(nil, wstest.OpBinary, make([]byte, 64<<10), false)
	for _, route := range []string{"passthrough", "token"} {
		b.Run(route, func(b *testing.B) {
			s := newWSStack(b, 0)
			target := "/ws/browser"
			if route == "token" {
				target = "/ws/bench?token=" + s.token("bench", time.Now().Add(time.Hour))
			}
			client, up := s.open(b, target)
			client.conn.SetDeadline(time.Time{})
			up.conn.SetDeadline(time.Time{})
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			go func() {
				for range b.N {
					if _, err := up.conn.Write(frame); err != nil {
						return
					}
				}
			}()
			if _, err := io.CopyN(io.Discard, client.br, int64(b.N)*int64(len(frame))); err != nil {
				b.Fatal(err)
			}
		})
	}
}
