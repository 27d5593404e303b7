package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/wstest"
)

// TestWebSocketTokenExpiryBinary runs the built binary as a verifier
// trusting a JWKS the test serves, so the test can forge a token that
// expires two seconds from now with a real Ed25519 key. A WebSocket
// opened with it through the sidecar to a real RFC 6455 upstream gets a
// close frame 1008 on both sides at exp + auth.leeway, not before, then
// the end of both connections; /metrics and the access log say why.
func TestWebSocketTokenExpiryBinary(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": "k1",
			"x": base64.RawURLEncoding.EncodeToString(pub),
		}}})
	}))
	t.Cleanup(jwksSrv.Close)
	type peer struct {
		end  *wsPeer
		user string
	}
	peers := make(chan peer, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, br, err := wstest.Accept(w, r)
		if err == nil {
			peers <- peer{&wsPeer{conn: conn, r: br}, r.Header.Get("X-User-Id")}
		}
	}))
	t.Cleanup(up.Close)

	const leeway = time.Second
	cfg, port := writeConfigFile(t, t.TempDir(), "verifier.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://api.example.test"
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks" }
auth: { leeway: %s }
`, up.URL, jwksSrv.URL, leeway))
	v := startBinary(t, cfg, port)

	// exp is whole seconds: 1 to 2 s from now, then the leeway.
	exp := time.Unix(time.Now().Unix()+2, 0)
	deadline := exp.Add(leeway)
	claims, _ := json.Marshal(map[string]any{"sub": "ws-user", "iat": time.Now().Unix(), "exp": exp.Unix(), "iss": jwksSrv.URL, "aud": jwksSrv.URL})
	in := b64url(`{"alg":"EdDSA","kid":"k1","typ":"JWT"}`) + "." + b64url(string(claims))
	token := in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))

	code, conn, br, err := wstest.Dial(strings.TrimPrefix(v.base, "http://"), "/ws/chat?token="+token)
	if err != nil || code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the sidecar: got %d %v, want 101", code, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	client := &wsPeer{conn: conn, r: br, client: true}
	var p peer
	select {
	case p = <-peers:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never got the upgrade")
	}
	defer p.end.conn.Close()
	p.end.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if p.user != "ws-user" {
		t.Fatalf("upstream got X-User-Id %q, want ws-user", p.user)
	}
	if err := client.write(wstest.OpText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if f, err := p.end.read(); err != nil || string(f.Payload) != "hi" {
		t.Fatalf("frame through the tunnel: got %+v %v", f, err)
	}

	type result struct {
		who       string
		at, endAt time.Time
		f         wstest.Frame
		err, end  error
	}
	results := make(chan result, 2)
	for who, e := range map[string]*wsPeer{"client": client, "upstream": p.end} {
		go func() {
			r := result{who: who}
			r.f, r.err = e.read()
			r.at = time.Now()
			if r.err == nil {
				e.write(wstest.OpClose, wstest.ClosePayload(1000, "")) // answer, as a peer does
				_, r.end = e.read()
				r.endAt = time.Now()
			}
			results <- r
		}()
	}
	for range 2 {
		r := <-results
		code, reason := r.f.CloseCode()
		switch {
		case r.err != nil:
			t.Errorf("%s: got %v, want a close frame", r.who, r.err)
		case r.f.Op != wstest.OpClose || code != 1008 || reason != "token expired":
			t.Errorf("%s: got op %#x code %d %q, want close 1008 \"token expired\"", r.who, r.f.Op, code, reason)
		case r.at.Before(deadline):
			t.Errorf("%s: close frame %v before exp + leeway", r.who, deadline.Sub(r.at))
		case r.at.Sub(deadline) > 5*time.Second:
			t.Errorf("%s: close frame %v after exp + leeway, want within 5s", r.who, r.at.Sub(deadline))
		case !errors.Is(r.end, io.EOF):
			t.Errorf("%s: after the close frame got %v, want EOF", r.who, r.end)
		default:
			t.Logf("%s: close 1008 %v after exp+leeway, EOF %v later", r.who, r.at.Sub(deadline).Round(time.Millisecond), r.endAt.Sub(r.at).Round(time.Millisecond))
		}
	}

	// The counter moves when the tunnel's handler returns, which may be a
	// moment after the peers saw EOF: poll for it, within a bound.
	want := `authsidecar_websocket_closed_total{reason="token_expired"} 1`
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(v.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var metrics strings.Builder
		bodyTo(&metrics, res)
		if strings.Contains(metrics.String(), want) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("/metrics lacks %s 5s after the tunnel ended", want)
			break
		}
	}
	// The access log is batched: it arrives within sidecar.LogFlushInterval.
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if line := accessLineFor(v.stderr.String(), "ws-user"); line != nil {
			if line["status"] != 101.0 || line["class"] != "websocket" || line["close_reason"] != "token_expired" {
				t.Errorf("access log: got %v, want status 101, class websocket, close_reason token_expired", line)
			}
			if strings.Contains(v.stderr.String(), token) {
				t.Error("the token is in the log")
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no access log line for the tunnel:\n%s", v.stderr.String())
		}
	}
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// wsPeer is one end of a WebSocket: a client masks what it sends, a
// server does not.
type wsPeer struct {
	conn interface {
		io.ReadWriteCloser
		SetDeadline(time.Time) error
	}
	r      io.Reader
	client bool
}

func (p *wsPeer) write(op byte, b []byte) error { return wstest.WriteFrame(p.conn, op, b, p.client) }
func (p *wsPeer) read() (wstest.Frame, error)   { return wstest.ReadFrame(p.r, !p.client) }

// accessLineFor returns the access log line ("msg":"request") of user.
func accessLineFor(log, user string) map[string]any {
	for _, line := range strings.Split(log, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "request" && l["user_id"] == user {
			return l
		}
	}
	return nil
}
