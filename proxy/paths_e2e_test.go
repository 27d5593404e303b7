package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawRequest writes a request line and headers on a raw TCP connection, so
// nothing on the client side cleans the target, and returns the status.
func rawRequest(t *testing.T, addr, target string, headers ...string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", target, addr)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	conn.Write([]byte(b.String()))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", target, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestPathAttacks sends request-targets that try to make the proxy and the
// upstream disagree about the path, and checks for each the status and
// what (if anything) the upstream received.
func TestPathAttacks(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("path@example.com")
	addr := strings.TrimPrefix(s.srv.URL, "http://")
	refused := ""
	tests := []struct {
		target string
		status int
		path   string // what the upstream must see; refused = nothing
	}{
		// Dot segments, raw and encoded, before and inside /api/admin.
		{"/api/../api/admin/x", 400, refused},
		{"/api/./admin/x", 400, refused},
		{"/api/tasks/../admin/x", 400, refused},
		{"/api/tasks/..", 400, refused},
		{"/api/%2e%2e/admin/x", 400, refused},
		{"/api/%2E%2E/admin/x", 400, refused},
		{"/api/.%2e/admin/x", 400, refused},
		{"/api/%2e./admin/x", 400, refused},
		{"/api/%2e/admin/x", 400, refused},
		{"/api/tasks/%2e%2e/%2e%2e/admin/x", 400, refused},
		{"/x/../api/admin/x", 400, refused},
		{"/%2e%2e/api/admin/x", 400, refused},
		// Overlong UTF-8 and fullwidth look-alikes of dot and slash.
		{"/api/%c0%ae%c0%ae/admin/x", 400, refused},
		{"/api/%c0%afadmin/x", 400, refused},
		{"/api/%e0%80%ae%e0%80%ae/admin", 400, refused},
		{"/api/%ef%bc%8e%ef%bc%8e/admin", 400, refused},
		{"/api/tasks%ef%bc%8fadmin", 400, refused},
		{"/api/\xef\xbc\x8e\xef\xbc\x8e/admin", 400, refused},
		// Slashes: doubled, encoded, backslashes.
		{"//api/admin/x", 400, refused},
		{"/api//admin/x", 400, refused},
		{"/api/admin//x", 400, refused},
		{"/api%2fadmin/x", 400, refused},
		{"/api%2Fadmin/x", 400, refused},
		{"/api/admin%2fx", 400, refused},
		{"/api%5cadmin/x", 400, refused},
		{"/api%5Cadmin/x", 400, refused},
		{"/api\\admin\\x", 400, refused},
		{"/api/%255c/admin", 400, refused},
		// Semicolons (path parameters) before and inside the admin prefix.
		{"/api;/admin/x", 400, refused},
		{"/api/admin;/x", 400, refused},
		{"/api/admin;jsessionid=1/x", 400, refused},
		{"/api%3b/admin/x", 400, refused},
		{"/api/admin%3B/x", 400, refused},
		{"/api/tasks;x=../admin", 400, refused},
		// Other encodings that split routers.
		{"/api/a%2Cb", 400, refused},
		{"/api/a%3Db", 400, refused},
		{"/api/tasks%23frag", 400, refused},
		{"/api/tasks%3Fq=1", 400, refused},
		{"/api/tasks%00", 400, refused},
		{"/api/tasks%00.json", 400, refused},
		{"/api/tasks%0d%0aX-Injected:%201", 400, refused},
		{"/api/tasks%09", 400, refused},
		{"/api/t%61sks", 400, refused},
		{"/%61pi/admin/x", 400, refused},
		{"/api/%41dmin/x", 400, refused},
		{"/api/caf%C3%A9", 400, refused},
		{"/api/tasks%", 400, refused},
		{"/api/tasks%zz", 400, refused},
		// Case variants of every configured prefix.
		{"/API/tasks", 400, refused},
		{"/Api/admin/x", 400, refused},
		{"/api/ADMIN/x", 400, refused},
		{"/api/Admin", 400, refused},
		{"/api/AUTH/get-session", 400, refused},
		{"/api/auth/../admin", 400, refused},
		{"/api/MCP-OAUTH/authorize", 400, refused},
		{"/WS/chat", 400, refused},
		{"/ws/BROWSER", 400, refused},
		// Unicode look-alikes: not under /api (or /ws) as written, but
		// after NFKC, case folding or a second decoding.
		{"/%EF%BC%A1pi/tasks", 400, refused},
		{"/%ef%bd%81%ef%bd%90%ef%bd%89/tasks", 400, refused},
		{"/%EF%BC%A1%EF%BC%B0%EF%BC%A9/admin/users", 400, refused},
		{"/%F0%9D%90%9A%F0%9D%90%A9%F0%9D%90%A2/admin/x", 400, refused},
		{"/%E2%92%B6pi/tasks", 400, refused},
		{"/api%EF%BC%8Ftasks", 400, refused},
		{"/%EF%BC%8Fapi/admin/x", 400, refused},
		{"/x%EF%BC%8F..%EF%BC%8Fapi/tasks", 400, refused},
		{"/x/%E2%80%A4%E2%80%A4/api/admin/x", 400, refused},
		{"/x/%EF%B8%B0/api/admin/x", 400, refused},
		{"/x/%EF%BC%8E%EF%BC%8E/api/admin/x", 400, refused},
		{"/x%EF%BC%BC..%EF%BC%BCapi%EF%BC%BCadmin", 400, refused},
		{"/%EF%BD%97s/chat", 400, refused},
		{"/w%C5%BF/chat", 400, refused},
		{"/ws/%EF%BD%82rowser", 400, refused},
		{"/ap%C2%ADi/tasks", 400, refused},
		{"/%2561pi/admin/x", 400, refused},
		{"/%25EF%25BC%25A1pi/tasks", 400, refused},
		{"/x/%C0%AE%C0%AE/api/admin/x", 400, refused},
		{"/api/%EF%BD%81dmin/users", 400, refused},
		{"/\xef\xbc\xa1pi/tasks", 400, refused},
		{"/\xef\xbc\xa1\xef\xbc\xb0\xef\xbc\xa9/admin/users", 400, refused},
		{"/x/\xe2\x80\xa4\xe2\x80\xa4/api/admin/x", 400, refused},
		// Absolute-form, opaque and odd targets.
		{"http://evil.example/api/admin/x", 400, refused},
		{"http://" + addr + "/api/tasks", 400, refused},
		{"https:/api/admin", 400, refused},
		{"*", 400, refused},
		// Prefixes without their trailing slash, and near misses.
		{"/api/admin", 403, refused},
		{"/api/admin/", 403, refused},
		{"/api/administrator", 200, "/api/administrator"},
		{"/api/adminx/y", 200, "/api/adminx/y"},
		{"/api", 200, "/api"},
		{"/api/", 200, "/api/"},
		{"/apix", 200, "/apix"},
		// Legitimate paths go through exactly as classified.
		{"/api/tasks", 200, "/api/tasks"},
		{"/api/tasks/", 200, "/api/tasks/"},
		{"/api/tasks?x=%2e%2e&y=..%2f", 200, "/api/tasks"},
		{"/api/a-b_c.d~e", 200, "/api/a-b_c.d~e"},
		{"/page%20one", 200, "/page one"},
		{"/static/caf%C3%A9.png", 200, "/static/café.png"},
		{"/files/%C3%A9t%C3%A9.pdf", 200, "/files/été.pdf"},
		{"/caf%C3%A9", 200, "/café"},
		{"/%EF%BD%86iles/x", 200, "/ｆiles/x"},
		{"/%EF%BC%A1%EF%BC%B0%EF%BC%A9x", 200, "/ＡＰＩx"},
		{"/x/%E2%80%A4%E2%80%A4/index.html", 200, "/x/․․/index.html"},
		{"/files/100%25.pdf", 200, "/files/100%.pdf"},
	}
	if len(tests) < 60 {
		t.Fatalf("only %d targets", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			s.up.take()
			status := rawRequest(t, addr, tt.target, "Authorization", "Bearer "+jwt)
			if status != tt.status {
				t.Fatalf("got %d, want %d", status, tt.status)
			}
			got := s.up.take()
			if tt.path == refused {
				if len(got) != 0 {
					t.Fatalf("upstream received %q", got[0].Path)
				}
				return
			}
			if len(got) != 1 || got[0].Path != tt.path {
				t.Fatalf("upstream received %+v, want exactly %q", got, tt.path)
			}
		})
	}
}

// TestHostTricks: whatever Host a client sends, the request goes to the
// configured upstream and, with allowed_hosts set, an unknown Host is
// refused.
func TestHostTricks(t *testing.T) {
	s := newStack(t)
	_, _, jwt := s.user("host@example.com")
	addr := strings.TrimPrefix(s.srv.URL, "http://")
	up, _ := url.Parse(s.up.URL)
	for _, host := range []string{"evil.example", "localhost", "127.0.0.1:1", "[::1]"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /api/tasks HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", host, jwt)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got := s.up.take()
		if res.StatusCode != 200 || len(got) != 1 || got[0].Header.Get("X-Forwarded-Host") != host {
			t.Errorf("Host %q: got %d %+v", host, res.StatusCode, got)
		}
		_ = up
	}
	// Two Host headers are refused by net/http itself (400, plain text).
	if status := rawRequest(t, addr, "/api/tasks", "Host", "evil.example", "Authorization", "Bearer "+jwt); status != 400 {
		t.Errorf("duplicate Host: got %d, want 400", status)
	}
	if len(s.up.take()) != 0 {
		t.Error("a request with two Host headers reached the upstream")
	}
}

// TestDottedSpellings: the spellings of a role-protected prefix that
// Windows (a segment's trailing dots and spaces dropped) and Spring MVC's
// suffix patterns (/api/admin.json served by /api/admin) read as the
// protected route: trailing dots and spaces are refused, and a suffix
// keeps the route's class, so the role (or the credential) is required
// and an admin still gets through. Sent on a raw connection, as written.
func TestDottedSpellings(t *testing.T) {
	s := newStack(t)
	cookie, uid, jwt := s.user("dotted@example.com")
	_, adminID, adminJWT := s.user("dotted-admin@example.com")
	if err := s.db.GrantRole(context.Background(), adminID, "admin"); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.srv.URL, "http://")
	user, admin := []string{"Authorization", "Bearer " + jwt}, []string{"Authorization", "Bearer " + adminJWT}
	tests := []struct {
		name   string
		target string
		hdr    []string
		status int
		user   string // X-User-Id the upstream must see; "" with status 200: none
	}{
		{"trailing dot inside admin", "/api/admin./stats", user, 400, ""},
		{"trailing dot inside admin, admin", "/api/admin./stats", admin, 400, ""},
		{"trailing dot ends admin", "/api/admin.", user, 400, ""},
		{"two trailing dots", "/api/admin../stats", user, 400, ""},
		{"trailing dot on /api", "/api./admin/stats", nil, 400, ""},
		{"trailing dot on /api, user", "/api./admin/stats", user, 400, ""},
		{"trailing dot outside /api", "/foo./bar", nil, 400, ""},
		{"trailing dot on a websocket prefix", "/ws./chat", nil, 400, ""},
		{"trailing space on /api", "/api%20/admin/stats", nil, 400, ""},
		{"trailing space inside admin", "/api/admin%20/stats", user, 400, ""},
		{"trailing dot and space", "/api/admin.%20/stats", user, 400, ""},
		{"suffix on admin", "/api/admin.json", user, 403, ""},
		{"suffix on admin, no token", "/api/admin.json", nil, 401, ""},
		{"suffix on admin, admin", "/api/admin.json", admin, 200, adminID},
		{"suffixed segment under admin", "/api/admin.x/y", user, 403, ""},
		{"suffixed segment under admin, admin", "/api/admin.x/y", admin, 200, adminID},
		{"suffix on admin in another case", "/api/Admin.json", admin, 400, ""},
		{"suffix on /api, no token", "/api.json", nil, 401, ""},
		{"suffix on /api", "/api.json", user, 200, uid},
		{"suffixed /api segment, no token", "/api.x/tasks", nil, 401, ""},
		{"suffixed /api segment", "/api.x/tasks", user, 200, uid},
		{"suffix on /api/auth, no token", "/api/auth.x", nil, 401, ""},
		{"suffix on /api/auth", "/api/auth.x", user, 200, uid},
		{"suffix on a websocket prefix, no token", "/ws.x/chat", nil, 401, ""},
		{"suffix on a websocket prefix", "/ws.x/chat?token=" + jwt, nil, 200, uid},
		{"suffix on cookie-only, Bearer", "/api/mcp-oauth/authorize.json", user, 401, ""},
		{"suffix on cookie-only, cookie", "/api/mcp-oauth/authorize.json", []string{"Cookie", cookie}, 200, uid},
		{"near miss", "/api/administrator.json", user, 200, uid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.up.take()
			if status := rawRequest(t, addr, tt.target, tt.hdr...); status != tt.status {
				t.Fatalf("got %d, want %d", status, tt.status)
			}
			got := s.up.take()
			if tt.status != 200 {
				if len(got) != 0 {
					t.Fatalf("upstream received %q (X-User-Id %q), want nothing", got[0].Path, got[0].Header.Values("X-User-Id"))
				}
				return
			}
			want, _, _ := strings.Cut(tt.target, "?")
			if len(got) != 1 || got[0].Path != want {
				t.Fatalf("upstream received %+v, want exactly %q", got, want)
			}
			if ids := got[0].Header.Values("X-User-Id"); len(ids) != 1 || ids[0] != tt.user {
				t.Fatalf("upstream saw X-User-Id %q, want %q", ids, tt.user)
			}
		})
	}
}
