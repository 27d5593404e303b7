package proxy_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// FuzzVerify: the pre-check and verifier never panic, and accept nothing
// but the exact tokens the reference signer made.
func FuzzVerify(f *testing.F) {
	seed := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := seed.Public().(ed25519.PublicKey)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}, Now: clock})
	kc.Load(context.Background())
	v := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second, Now: clock})
	good := map[string]bool{}
	for _, sub := range []string{"u1", "user-2"} {
		tok := sign(seed, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"},
			map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "iss": origin, "aud": origin})
		good[tok] = true
		f.Add(tok)
		parts := strings.Split(tok, ".")
		f.Add(parts[0] + "." + parts[1] + "." + flipLast(parts[2]))
		f.Add(`{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`)
		f.Add(parts[0] + "." + parts[1] + ".")
	}
	f.Add("")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(context.Background(), token)
		if err == nil && !good[token] {
			t.Fatalf("accepted a token the signer never made: %q (%+v)", token, c)
		}
	})
}
