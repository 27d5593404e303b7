package issuer

import (
	"net/url"
	"testing"
)

// FuzzParseCookieValue: never panics, and accepts a value only when it is
// exactly a signature of its token under the secret.
func FuzzParseCookieValue(f *testing.F) {
	secret := []byte(baSecret)
	f.Add(baCookie)
	f.Add(baSessionToken)
	f.Add(baCookie + "%zz")
	f.Add("a.b")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		token, ok := parseCookieValue(secret, raw)
		if !ok {
			return
		}
		got, err1 := url.QueryUnescape(raw)
		want, err2 := url.QueryUnescape(signCookieValue(secret, token))
		if err1 != nil || err2 != nil || got != want {
			t.Fatalf("accepted %q for token %q, which is not its signature", raw, token)
		}
	})
}
