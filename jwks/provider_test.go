package jwks_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/jwks"
)

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(pub.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}
}

func ecJWK(kid string, pub *ecdsa.PublicKey) map[string]any {
	b, _ := pub.Bytes()
	size := (len(b) - 1) / 2
	return map[string]any{"kty": "EC", "kid": kid, "crv": pub.Curve.Params().Name, "alg": "ES256",
		"x": b64.EncodeToString(b[1 : 1+size]), "y": b64.EncodeToString(b[1+size:])}
}

// TestFetcherProviderKeys: with ProviderKeys, an OpenID provider's RSA and
// EC keys are taken, and what cannot verify an id token safely is skipped
// with a reason; without it, only Ed25519 keys are, as before.
func TestFetcherProviderKeys(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	offCurve := ecJWK("off", &ecKey.PublicKey)
	offCurve["y"] = offCurve["x"]
	body := doc(
		rsaJWK("rsa", &rsaKey.PublicKey),
		ecJWK("ec", &ecKey.PublicKey),
		okp("ed", edPub),
		rsaJWK("weak", &weak.PublicKey),
		offCurve,
		with(rsaJWK("priv", &rsaKey.PublicKey), "d", "AQAB"),
		with(rsaJWK("enc", &rsaKey.PublicKey), "use", "enc"),
		with(rsaJWK("wrongalg", &rsaKey.PublicKey), "alg", "HS256"),
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
		with(rsaJWK("", &rsaKey.PublicKey), "kid", nil),
	)
	srv := jwksServer(t, body)
	f, logs := newFetcher(t, jwks.Options{URL: srv.URL, ProviderKeys: true})
	keys, err := f.PublicKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kids(keys), []string{"rsa", "ec", "ed"}; !slices.Equal(got, want) {
		t.Errorf("got kids %v, want %v", got, want)
	}
	for _, k := range keys {
		switch k.KID {
		case "rsa":
			if pub, ok := k.Provider.(*rsa.PublicKey); !ok || !pub.Equal(&rsaKey.PublicKey) || k.Alg != "RS256" {
				t.Errorf("rsa: got %#v, want the RSA key with alg RS256", k)
			}
		case "ec":
			if pub, ok := k.Provider.(*ecdsa.PublicKey); !ok || !pub.Equal(&ecKey.PublicKey) {
				t.Errorf("ec: got %#v, want the EC key", k)
			}
		case "ed":
			if !k.Public.Equal(edPub) || k.Provider != nil {
				t.Errorf("ed: got %#v, want the Ed25519 key in Public", k)
			}
		}
	}
	all := strings.Join(logs.lines(), "\n")
	for _, reason := range []string{"RSA key shorter than 2048 bits", "the point is not on the curve", "carries a private key", "use is not sig", "is not an RSA signature", "kty is not RSA, EC or OKP", "no kid"} {
		if !strings.Contains(all, reason) {
			t.Errorf("got logs %q, want a skip saying %q", all, reason)
		}
	}

	// The verifier's fetcher still takes Ed25519 keys only.
	f2, _ := newFetcher(t, jwks.Options{URL: srv.URL})
	keys, err = f2.PublicKeys(context.Background())
	if err != nil || !slices.Equal(kids(keys), []string{"ed"}) {
		t.Errorf("without ProviderKeys: got %v %v, want only ed", kids(keys), err)
	}
}
