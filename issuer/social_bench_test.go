package issuer_test

import (
	"net/http"
	"testing"

	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// The social sign-in's cost, against baselines measured in the same run
// (go test -bench 'Social|PasswordSignIn' -run '^$' ./issuer): compare
// the ratios, not the times, which depend on the machine.
//
//   - BenchmarkSocialFlowOIDC: a whole sign-in at the real OpenID provider
//     (zitadel's example OP, in process): sign-in/social, the provider's
//     login form, the callback (token request, id token verified with
//     cached keys, userinfo, user+account+session written), get-session.
//   - BenchmarkSocialCallback: the callback alone, at the Google stand-in
//     (token request, id token verified, a returning user's tokens and a
//     session written).
//   - BenchmarkPasswordSignIn: the baseline: sign-in/email (scrypt at the
//     tests' cheap cost) and get-session.

func BenchmarkSocialFlowOIDC(b *testing.B) {
	se := newSocialEnv(b, nil)
	for b.Loop() {
		br := se.browser(b)
		location(b, br.flow("corp", oidctest.Alice, nil))
		br.jwt()
	}
}

func BenchmarkSocialCallback(b *testing.B) {
	se := newSocialEnv(b, nil)
	br := se.browser(b)
	location(b, br.flow("google", oidctest.User{}, nil)) // the user exists from here on
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		cb := br.login(br.start(map[string]any{"provider": "google", "callbackURL": "/dashboard"}), oidctest.User{})
		b.StartTimer()
		if r := br.callback(cb); r.status != http.StatusFound || r.header.Get("Location") != "/dashboard" {
			b.Fatalf("got %d %q", r.status, r.header.Get("Location"))
		}
	}
}

func BenchmarkPasswordSignIn(b *testing.B) {
	se := newSocialEnv(b, nil)
	se.signUp("bench@example.com", "correct horse battery")
	for b.Loop() {
		br := se.browser(b)
		if r := br.post("/api/auth/sign-in/email", map[string]any{"email": "bench@example.com", "password": "correct horse battery"}); r.status != 200 {
			b.Fatalf("sign-in: %d %s", r.status, r.body)
		}
		br.jwt()
	}
}
