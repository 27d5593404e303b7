package proxy

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"
)

func benchCompact(b *testing.B) string {
	_, priv, _ := ed25519.GenerateKey(nil)
	n := time.Now()
	h, _ := json.Marshal(map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"})
	c, _ := json.Marshal(map[string]any{"sub": "user-1", "iat": n.Unix(), "exp": n.Add(time.Hour).Unix(), "iss": "http://localhost:8080", "aud": "http://localhost:8080",
		"jti": "0123456789abcdef0123456789abcdef", "id": "user-1", "email": "user-1@example.com", "name": "Bench", "emailVerified": false})
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

// BenchmarkPrecheck is what the verifier spends around the signature:
// precheck, claims decoding and validation.
func BenchmarkPrecheck(b *testing.B) {
	tok := benchCompact(b)
	b.ReportAllocs()
	for b.Loop() {
		t, err := precheck(tok)
		if err != nil {
			b.Fatal(err)
		}
		c, err := t.claims.decode("http://localhost:8080")
		if err != nil {
			b.Fatal(err)
		}
		if r, err := c.validate(time.Now(), 30*time.Second, 30*24*time.Hour, "http://localhost:8080"); err != nil {
			b.Fatal(r, err)
		}
	}
}
