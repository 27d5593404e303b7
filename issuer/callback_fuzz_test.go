package issuer

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCallbackQuery: whatever query a provider (or anyone) sends the
// callback, parsing never panics; what it accepts is valid UTF-8, holds
// each parameter once, and survives the form_post bounce (encode, parse)
// unchanged; and an error code appended to an error URL stays one
// parameter of that URL.
func FuzzCallbackQuery(f *testing.F) {
	for _, s := range []string{
		"code=abc&state=xyz", "code=abc&state=xyz&iss=https%3A%2F%2Fidp.example.com",
		"error=access_denied&error_description=End-User+denied&state=s", "state=a&state=b", "code=%zz",
		"code=a;state=b", "state=" + strings.Repeat("x", 9000), "iss=", "code=%ff%fe&state=s", "",
	} {
		f.Add(s, "/login-error?x=1#frag")
	}
	f.Fuzz(func(t *testing.T, raw, errURL string) {
		p, ok := parseCallbackQuery(raw)
		if !ok {
			if p != (callbackParams{}) {
				t.Fatalf("refused %q but returned %+v", raw, p)
			}
			return
		}
		if len(raw) > maxCallbackQuery {
			t.Fatalf("accepted %d bytes, over the %d limit", len(raw), maxCallbackQuery)
		}
		for _, v := range []string{p.code, p.state, p.err, p.errDesc, p.iss} {
			if !utf8.ValidString(v) {
				t.Fatalf("accepted invalid UTF-8 %q", v)
			}
		}
		again, ok := parseCallbackQuery(p.encode())
		if !ok || again != p {
			t.Fatalf("bounce changed %+v into %+v (%v)", p, again, ok)
		}
		code, ok := oauthErrorCode(p.err, 64)
		if !ok {
			return
		}
		loc := withError(errURL, code, "")
		u, err := url.Parse(loc)
		if err != nil {
			// errURL was never a URL: only safeRedirect-checked ones
			// reach withError.
			return
		}
		if _, parseErr := url.ParseQuery(u.RawQuery); parseErr == nil && u.Query().Get("error") != code && !strings.Contains(errURL, "error=") {
			t.Fatalf("withError(%q, %q) = %q: error parameter is %q", errURL, code, loc, u.Query().Get("error"))
		}
	})
}
