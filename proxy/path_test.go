package proxy

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

func TestCanonicalPath(t *testing.T) {
	ok := []struct{ target, want string }{
		{"/", "/"},
		{"/api/tasks", "/api/tasks"},
		{"/api/tasks/", "/api/tasks/"},
		{"/api/tasks?x=1&y=%2F", "/api/tasks"},
		{"/api/a-b_c.d~e", "/api/a-b_c.d~e"},
		{"/api/file.json", "/api/file.json"},
		{"/api/..x", "/api/..x"},
		{"/.well-known/openid-configuration", "/.well-known/openid-configuration"},
		{"/api/a.b/c", "/api/a.b/c"},
		{"/api/%20space", "/api/ space"},
		{"/page%20one", "/page one"},
		{"/caf%C3%A9", "/café"},
		{"/static/%7Euser", "/static/~user"},
		{"/a,b=c", "/a,b=c"},
		{"/api/a,b=c", "/api/a,b=c"},
	}
	for _, tt := range ok {
		t.Run("ok "+tt.target, func(t *testing.T) {
			got, err := canonicalPath(tt.target)
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
	bad := []string{
		"", "*", "http://evil/api/x", "http:api/x", "api/x",
		"/api/../admin", "/api/./x", "/api/x/..", "/api/x/.", "/..", "/.",
		"/api/%2e%2e/admin", "/api/%2E%2E/admin", "/api/.%2e/admin", "/api/%2e./admin", "/api/%2e/x",
		"/api//admin", "//api/admin", "/api/x//",
		"/api\\admin", "/api%5cadmin", "/api%5Cadmin",
		"/api%2fadmin", "/api%2Fadmin",
		"/api/admin;x", "/api;/admin", "/api/admin%3bx", "/api%3B/admin",
		"/api/a%2Cb", "/api/a%3Db",
		"/api/x#frag", "/api/x%23frag",
		"/api/x%00", "/x%00y", "/api/x\x00", "/x\ty", "/x%0d%0aSet-Cookie:", "/x%7f",
		"/api/caf\xc3\xa9", "/caf\xc3\xa9", "/api/caf%C3%A9", "/api/%c0%ae%c0%ae/admin",
		"/%61pi/admin", "/api/%61dmin", "/api/admin%2D", "/api/x%7E",
		"/api/%zz", "/api/%4", "/api/%",
		"/api/%3F", "/x%3f", "/api/%255c/admin", "/api/%2525",
		// A segment ending in a dot: Windows drops it (/api/admin./x is
		// /api/admin/x to IIS), wherever it is.
		"/api/x..", "/api/admin./stats", "/api/admin.", "/api/admin../stats", "/api./admin/stats", "/api.",
		"/foo./bar", "/foo.", "/a/b.../c", "/api/admin.%2e/x", "/caf%C3%A9./x", "/x./?q=1",
		// Or in a space, which Windows drops too.
		"/api%20/admin/stats", "/api/admin%20/stats", "/api/admin%20", "/foo%20/bar", "/foo%20", "/api/admin.%20/x", "/api/admin%20./x",
	}
	for _, target := range bad {
		t.Run("bad "+target, func(t *testing.T) {
			if got, err := canonicalPath(target); err == nil {
				t.Fatalf("got %q, want refused", got)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	r := newRouter([]string{"/api/mcp-oauth/authorize"}, []string{"/ws/browser", "/hooks/"}, []string{"/ws/"},
		[]AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}})
	tests := []struct {
		path string
		want Class
	}{
		{"/api/auth", ClassAuth},
		{"/api/auth/", ClassAuth},
		{"/api/auth/get-session", ClassAuth},
		{"/api/authx", ClassBusiness},
		{"/api/mcp-oauth/authorize", ClassCookieOnly},
		{"/api/mcp-oauth/authorize/x", ClassBusiness},
		{"/api/mcp-oauth", ClassBusiness},
		{"/ws/browser", ClassPassthrough},
		{"/ws/browser/x", ClassWebSocket},
		{"/hooks", ClassPassthrough},
		{"/hooks/stripe", ClassPassthrough},
		{"/hooksx", ClassPublic},
		{"/ws", ClassWebSocket},
		{"/ws/", ClassWebSocket},
		{"/ws/chat", ClassWebSocket},
		{"/wsx", ClassPublic},
		{"/api/admin", ClassAdmin},
		{"/api/admin/", ClassAdmin},
		{"/api/admin/users", ClassAdmin},
		{"/api/administrator", ClassBusiness},
		{"/api/administrator.json", ClassBusiness},
		// A protected route's last segment extended with a dot is inside
		// the route (Spring's suffix patterns serve /api/admin.json from
		// /api/admin); passthrough routes and /api/auth do not extend.
		{"/api/admin.json", ClassAdmin},
		{"/api/admin.x/y", ClassAdmin},
		{"/api/admin.tar.gz", ClassAdmin},
		{"/api.json", ClassBusiness},
		{"/api.x/tasks", ClassBusiness},
		{"/api/auth.x", ClassBusiness},
		{"/api/auth.json/get-session", ClassBusiness},
		{"/api/mcp-oauth/authorize.json", ClassCookieOnly},
		{"/api/mcp-oauth/authorize.json/x", ClassBusiness},
		{"/ws.x/chat", ClassWebSocket},
		{"/ws.json", ClassWebSocket},
		{"/ws/browser.json", ClassWebSocket},
		{"/hooks.json", ClassPublic},
		{"/hooks.x/stripe", ClassPublic},
		{"/apix.json", ClassPublic},
		{"/wsx.json", ClassPublic},
		{"/api", ClassBusiness},
		{"/api/", ClassBusiness},
		{"/api/tasks", ClassBusiness},
		{"/apix", ClassPublic},
		{"/", ClassPublic},
		{"/index.html", ClassPublic},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, _, err := r.classify(tt.path)
			if err != nil || got != tt.want {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
	for _, p := range []string{"/API", "/Api/tasks", "/api/AUTH/x", "/api/Admin", "/WS/chat", "/ws/Browser", "/api/mcp-oauth/Authorize", "/Hooks/x",
		"/API.json", "/Api.x/tasks", "/api/Admin.json", "/api/ADMIN.x/y", "/WS.x/chat", "/api/mcp-oauth/Authorize.json"} {
		t.Run("case "+p, func(t *testing.T) {
			if c, _, err := r.classify(p); err == nil {
				t.Fatalf("got %v, want refused", c)
			}
		})
	}
}

// FuzzCanonicalPath: never panics, and an accepted path is a fixed point
// (canonicalizing the result, re-escaped minimally, gives it back).
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/", "/api/tasks", "/api/%2e%2e/x", "/a%20b", "/api//x", "/caf%C3%A9", "http:x",
		// Unicode look-alikes of /api, /ws, dots and slashes.
		"/%EF%BC%A1pi/tasks", "/\xef\xbd\x81pi/tasks", "/%EF%BC%8Fapi/x", "/x%EF%BC%8F..%EF%BC%8Fapi/tasks",
		"/x/%E2%80%A4%E2%80%A4/api/admin", "/x/%EF%B8%B0/api/admin", "/x/%EF%BC%8E%EF%BC%8E/api/admin",
		"/%F0%9D%90%9A%F0%9D%90%A9%F0%9D%90%A2/x", "/%E2%92%B6pi/x", "/w%C5%BF/chat", "/%E2%84%AAiosk/x",
		"/pro%EF%AC%81le", "/%C4%B0nternal/x", "/%C4%B1nternal/x", "/ap%C2%ADi/x", "/%2561pi/admin",
		"/x/%C0%AE%C0%AE/api/admin", "/%EF%BC%A1pi%EF%BC%9F", "/files/%C3%A9t%C3%A9.pdf",
		// Dotted spellings of protected routes.
		"/api/admin./x", "/api./admin/x", "/api/admin.json", "/api.x/tasks", "/ws.x/chat", "/profile.json", "/ws%EF%BC%8E/chat", "/api%20/admin/x"} {
		f.Add(s)
	}
	r := lookalikeRouter()
	f.Fuzz(func(t *testing.T, target string) {
		raw, _, _ := strings.Cut(target, "?")
		if fastCanonical(raw) {
			if slow, err := decodeCanonical(raw); err != nil || slow != raw {
				t.Fatalf("fast path accepted %q, full check says %q %v", raw, slow, err)
			}
		}
		got, err := canonicalPath(target)
		if err != nil {
			return
		}
		if !strings.HasPrefix(got, "/") || strings.Contains(got, "//") || strings.Contains(got, "/../") || strings.HasSuffix(got, "/..") ||
			strings.Contains(got, "./") || strings.HasSuffix(got, ".") || strings.Contains(got, " /") || strings.HasSuffix(got, " ") {
			t.Fatalf("%q accepted as %q", target, got)
		}
		// A path the router accepts must not read, after one fixed
		// pipeline of the reductions an upstream may apply, as a
		// protected route of another class.
		class, _, err := r.classify(got)
		if err != nil {
			return
		}
		read := resolveDots(foldCase(norm.NFKC.String(unescapeLenient(got))))
		if c, _ := r.lookup(read, true); c != ClassPublic && c != class {
			t.Fatalf("%q classified %v reads as %q, class %v", target, class, read, c)
		}
		// Nor, with its last segment's suffix dropped (Spring's suffix
		// patterns), as a route that demands more than its own, or
		// another admin route's roles.
		if i := strings.LastIndexByte(got, '.'); i > strings.LastIndexByte(got, '/') {
			own, ownAdmin := r.lookup(got, false)
			if c, admin := r.lookup(got[:i], true); c != ClassPublic && c != ClassPassthrough && (c != own || admin != ownAdmin) {
				t.Fatalf("%q classified %v reads as %q without its suffix, class %v", target, own, got[:i], c)
			}
		}
	})
}

// BenchmarkCanonicalPath: the fast path (no escape) and the full check
// (an escape), as every request pays one of them.
func BenchmarkCanonicalPath(b *testing.B) {
	for _, p := range []string{"/api/tasks/0123456789abcdef", "/assets/app.v2.min.js", "/static/caf%C3%A9.png"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				canonicalPath(p)
			}
		})
	}
}
