package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestInformationalFiltered: a 1xx answer reaches the client without
// Set-Cookie, identity headers (the identity header in any spelling,
// other proxies'), hop-by-hop headers and those its Connection header
// names, on every forwarding path; its other headers pass, and the final
// answer keeps its own Set-Cookie.
func TestInformationalFiltered(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nX-Kept: yes\r\n" +
		"Set-Cookie: sid=from-the-hint; Path=/\r\nSet-Cookie2: old=1\r\nX-User-Id: u-victim\r\nx_user_id: u-victim\r\n" +
		"Remote-User: victim\r\nX-Forwarded-User: victim\r\nConnection: X-Hint\r\nX-Hint: leaked\r\nKeep-Alive: timeout=5\r\n\r\n"
	final := "HTTP/1.1 200 OK\r\nSet-Cookie: ok=1\r\nContent-Length: 2\r\n\r\nok"
	for _, rq := range hopRequests {
		t.Run(rq.path, func(t *testing.T) {
			addr := rawProxy(t, func(r *http.Request) string {
				if strings.HasSuffix(r.URL.Path, "/ws") {
					return hint + strings.Replace(final, "200 OK", "403 Forbidden", 1)
				}
				return hint + final
			})
			a := rawExchange(t, addr, rq.request)
			if len(a.informational) != 1 {
				t.Fatalf("got %d 1xx answers, want 1", len(a.informational))
			}
			h := a.informational[0].Header
			for _, name := range []string{"Set-Cookie", "Set-Cookie2", "X-User-Id", "X_user_id", "Remote-User", "X-Forwarded-User", "Connection", "X-Hint", "Keep-Alive"} {
				if v, ok := h[name]; ok {
					t.Errorf("the 103 passed %s: %q", name, v)
				}
			}
			if h.Get("Link") != "</a.css>; rel=preload" || h.Get("X-Kept") != "yes" {
				t.Errorf("the 103 lost what it may carry: %v", h)
			}
			if got := a.final.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "ok=1" {
				t.Errorf("final answer's Set-Cookie %q, want [ok=1]", got)
			}
		})
	}
}

// TestInformationalBounded: 16 1xx answers are passed on; at the 17th the
// request fails with 502, and the client sees no more of them, on every
// forwarding path.
func TestInformationalBounded(t *testing.T) {
	for _, n := range []int{maxInformational, maxInformational + 1, 200} {
		for _, rq := range hopRequests {
			t.Run(fmt.Sprintf("%d %s", n, rq.path), func(t *testing.T) {
				addr := rawProxy(t, func(r *http.Request) string {
					var b strings.Builder
					for i := range n {
						fmt.Fprintf(&b, "HTTP/1.1 103 Early Hints\r\nLink: </%d.css>; rel=preload\r\n\r\n", i)
					}
					b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					return b.String()
				})
				wantHints, wantStatus := n, http.StatusOK
				if n > maxInformational {
					wantHints, wantStatus = maxInformational, http.StatusBadGateway
				}
				// Twice: the first request gave its upstream slot back.
				for range 2 {
					a := rawExchange(t, addr, rq.request)
					if len(a.informational) != wantHints || a.final.StatusCode != wantStatus {
						t.Fatalf("got %d 1xx answers and %d, want %d and %d", len(a.informational), a.final.StatusCode, wantHints, wantStatus)
					}
					for i, res := range a.informational {
						if want := fmt.Sprintf("</%d.css>; rel=preload", i); res.Header.Get("Link") != want {
							t.Fatalf("1xx %d: Link %q, want %q", i, res.Header.Get("Link"), want)
						}
					}
				}
			})
		}
	}
}
