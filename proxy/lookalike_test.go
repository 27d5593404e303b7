package proxy

import (
	"strings"
	"testing"
)

// lookalikeRouter has, besides the usual routes, routes outside /api whose
// names hold letters with well-known look-alikes: fi (ligature), k (Kelvin
// sign), i (dotted and dotless I).
func lookalikeRouter() *router {
	return newRouter(
		[]string{"/api/mcp-oauth/authorize", "/profile"},
		[]string{"/ws/browser", "/hooks/"},
		[]string{"/ws/", "/kiosk/"},
		[]AdminRoute{{Prefix: "/api/admin/", Roles: []string{"admin"}}, {Prefix: "/internal/", Roles: []string{"ops"}}, {Prefix: "/office/", Roles: []string{"staff"}}},
	)
}

// TestLookalikePaths: a request-target that is not a protected route as
// written but becomes one after NFKC, case folding, a second decoding or
// dot-segment removal is refused; ordinary non-ASCII paths are classified
// as written.
func TestLookalikePaths(t *testing.T) {
	r := lookalikeRouter()
	refused := []struct{ target, why string }{
		{"/%EF%BC%A1pi/tasks", "fullwidth A: /Api/tasks"},
		{"/%EF%BD%81%EF%BD%90%EF%BD%89/tasks", "fullwidth api"},
		{"/%EF%BC%A1%EF%BC%B0%EF%BC%A9/admin/users", "fullwidth API, admin"},
		{"/%F0%9D%90%9A%F0%9D%90%A9%F0%9D%90%A2/tasks", "mathematical bold api"},
		{"/%E2%92%B6pi/tasks", "circled A"},
		{"/api%EF%BC%8Ftasks", "fullwidth solidus after /api"},
		{"/%EF%BC%8Fapi/tasks", "fullwidth solidus: //api/tasks"},
		{"/x%EF%BC%8F..%EF%BC%8Fapi/tasks", "fullwidth solidus and dots: /x/../api/tasks"},
		{"/x/%E2%80%A4%E2%80%A4/api/admin/x", "one-dot leaders"},
		{"/x/%EF%B8%B0/api/admin/x", "two-dot leader presentation form"},
		{"/x/%EF%BC%8E%EF%BC%8E/api/admin/x", "fullwidth full stops"},
		{"/x%EF%BC%BC..%EF%BC%BCapi%EF%BC%BCadmin", "fullwidth reverse solidus"},
		{"/%EF%BC%A1pi%EF%BC%9F", "fullwidth question mark: /Api?"},
		{"/%EF%BD%97s%EF%BC%9Bx/chat", "fullwidth semicolon: /ws;x/chat"},
		{"/ws%EF%BC%8Fchat", "websocket prefix via fullwidth solidus"},
		{"/%EF%BD%97s/chat", "fullwidth w, websocket"},
		{"/w%C5%BF/chat", "long s folds to s"},
		{"/%E2%84%AAiosk/x", "Kelvin sign"},
		{"/pro%EF%AC%81le", "fi ligature, cookie-only"},
		{"/o%EF%AC%83ce/x", "ffi ligature, admin"},
		{"/%C4%B0nternal/x", "dotted capital I lowers to i"},
		{"/%C4%B1nternal/x", "dotless i uppers to I"},
		{"/ap%C2%ADi/tasks", "soft hyphen"},
		{"/a%E2%80%8Bpi/tasks", "zero-width space"},
		{"/%2561pi/admin/x", "decoded twice: /api/admin/x"},
		{"/%25EF%25BC%25A1pi/tasks", "decoded twice, then NFKC"},
		{"/%EF%BC%8561pi/admin/x", "fullwidth percent sign"},
		{"/x/%C0%AE%C0%AE/api/admin/x", "overlong dots"},
		{"/%C0%AFapi/tasks", "overlong solidus"},
		{"/x/%E0%80%AE%E0%80%AE/api/tasks", "three-byte overlong dots"},
		{"/ws/%EF%BD%82rowser", "websocket path that is passthrough after NFKC"},
		{"/hooks/%E2%80%A4%E2%80%A4/internal/x", "passthrough path that is admin after NFKC"},
		{"/internal/%E2%80%A4%E2%80%A4/office/x", "one admin route to another"},
		{"/api%EF%BC%8E/tasks", "fullwidth full stop: /api./tasks"},
		{"/ws%E2%80%A4/chat", "one-dot leader: /ws./chat"},
		{"/api/admin%EF%BC%8Ejson", "fullwidth full stop under /api"},
		{"/internal%EF%BC%8Ejson", "fullwidth full stop: /internal.json, admin"},
		// Under /api every non-ASCII byte is refused already.
		{"/api/%EF%BD%81dmin/users", "fullwidth a under /api"},
		{"/api/%EF%BD%81%EF%BD%95%EF%BD%94%EF%BD%88/get-session", "fullwidth auth under /api"},
		// Raw (unencoded) non-ASCII is refused everywhere.
		{"/\xef\xbd\x81pi/tasks", "raw fullwidth a"},
		{"/\xef\xbc\xa1\xef\xbc\xb0\xef\xbc\xa9/admin/users", "raw fullwidth API"},
	}
	for _, tt := range refused {
		t.Run("refused "+tt.why, func(t *testing.T) {
			p, err := canonicalPath(tt.target)
			if err == nil {
				var c Class
				c, _, err = r.classify(p)
				if err == nil {
					t.Fatalf("%q (%q) classified %v, want refused", tt.target, p, c)
				}
			}
			if _, ok := err.(errBadPath); !ok {
				t.Fatalf("got error %T %v, want errBadPath", err, err)
			}
		})
	}
	ok := []struct {
		target string
		want   Class
	}{
		{"/caf%C3%A9", ClassPublic},
		{"/files/%C3%A9t%C3%A9.pdf", ClassPublic},
		{"/%E6%97%A5%E6%9C%AC%E8%AA%9E/", ClassPublic},
		{"/wiki/Stra%C3%9Fe", ClassPublic},
		{"/%EF%BD%86iles/x", ClassPublic},                 // fullwidth f: /files/x is public too
		{"/%EF%BC%A1%EF%BC%B0%EF%BC%A9x", ClassPublic},    // /APIx
		{"/api%EF%BD%98", ClassPublic},                    // /apix
		{"/x/%E2%80%A4%E2%80%A4/index.html", ClassPublic}, // /index.html
		{"/files/100%25.pdf", ClassPublic},
		{"/files/%25zz", ClassPublic},
		{"/hooks/caf%C3%A9", ClassPassthrough},
		{"/ws/caf%C3%A9", ClassWebSocket},
		{"/ws/%E2%80%A4%E2%80%A4/ws/chat", ClassWebSocket}, // still /ws/chat
		{"/internal/r%C3%A9sum%C3%A9", ClassAdmin},
		{"/ws/%E2%80%A4%E2%80%A4/index.html", ClassWebSocket}, // public after NFKC: served as public anyway
	}
	for _, tt := range ok {
		t.Run("ok "+tt.target, func(t *testing.T) {
			p, err := canonicalPath(tt.target)
			if err != nil {
				t.Fatalf("canonicalPath: %v", err)
			}
			c, _, err := r.classify(p)
			if err != nil || c != tt.want {
				t.Fatalf("got %v %v, want %v", c, err, tt.want)
			}
		})
	}
}

// TestLookalikeBudget: checking a path costs a bounded amount. A long
// non-ASCII path, or one whose readings together grow past the budget
// (NFKC turns U+FDFA into 18 characters), is refused rather than expanded;
// a merely longish one passes.
func TestLookalikeBudget(t *testing.T) {
	r := lookalikeRouter()
	tests := []struct {
		name, path string
		refused    string // "" for accepted
	}{
		{"2 KiB of é", "/" + strings.Repeat("é", 1024), ""},
		{"8 KiB of U+FDFA", "/" + strings.Repeat("\uFDFA", 2730), ""},
		{"over 8 KiB", "/" + strings.Repeat("é", 4096), "longer than 8 KiB"},
		{"over the budget", "/" + strings.Repeat("\uFDFAA\u00ad%41", 800), "too many readings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := r.classify(tt.path)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("got %v, want accepted", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("got %v %v, want refused for %q", c, err, tt.refused)
			}
		})
	}
}

func TestLookalikeReductions(t *testing.T) {
	tests := []struct {
		name    string
		reduce  func(string) string
		in, out string
	}{
		{"unescape", unescapeLenient, "/%61pi/%zz/100%", "/api/%zz/100%"},
		{"unescape none", unescapeLenient, "/plain", "/plain"},
		{"ignorable", dropIgnorable, "/a\u00adp\u200bi\ufe0f\ufeff", "/api"},
		{"overlong 2", decodeOverlong, "/\xc0\xae\xc0\xae/\xc0\xaf", "/..//"},
		{"overlong 3", decodeOverlong, "/\xe0\x80\xae\xe0\x80\xafx", "/./x"},
		{"overlong 4", decodeOverlong, "/\xf0\x80\x80\xaex", "/.x"},
		{"overlong truncated", decodeOverlong, "/\xc0", "/\xc0"},
		{"not overlong", decodeOverlong, "/caf\xc3\xa9\xff", "/caf\xc3\xa9\xff"},
		{"resolve dots", resolveDots, "/x/../api/admin/", "/api/admin/"},
		{"resolve backslash", resolveDots, `/x\..\api\admin`, "/api/admin"},
		{"resolve params", resolveDots, "/ws;x/chat;y=1", "/ws/chat"},
		{"resolve query", resolveDots, "/Api?x/../y", "/Api"},
		{"resolve root", resolveDots, "/..", "/"},
		{"resolve empty", resolveDots, "//api//tasks", "/api/tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.reduce(tt.in); got != tt.out {
				t.Fatalf("got %q, want %q", got, tt.out)
			}
		})
	}
}

// TestNeedsLookalikeCheckAllocs: the test every request pays for does not
// allocate, and is false for ASCII without "%".
func TestNeedsLookalikeCheckAllocs(t *testing.T) {
	p := "/api/tasks/0123456789abcdef"
	if needsLookalikeCheck(p) {
		t.Fatal("ASCII path needs the check")
	}
	if n := testing.AllocsPerRun(100, func() { needsLookalikeCheck(p) }); n != 0 {
		t.Fatalf("got %v allocs, want 0", n)
	}
	r := lookalikeRouter()
	if n := testing.AllocsPerRun(100, func() { r.classify(p) }); n != 0 {
		t.Fatalf("classify of an ASCII path: got %v allocs, want 0", n)
	}
}

// BenchmarkClassify: an ASCII path pays one scan for the look-alike check;
// a non-ASCII one pays for its readings.
func BenchmarkClassify(b *testing.B) {
	r := lookalikeRouter()
	for _, p := range []string{"/api/tasks/0123456789abcdef", "/assets/app.js", "/files/été.pdf"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.classify(p)
			}
		})
	}
}
