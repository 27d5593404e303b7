package jwks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"math/big"
	"strings"

	"github.com/authsidecar/authsidecar/proxy"
)

// minRSABits: shorter RSA keys are factorable by a determined attacker;
// RFC 7518 section 3.3 asks for 2048 bits.
const minRSABits = 2048

// usableProviderKey returns an identity provider's RSA or EC signing key
// as a proxy.Key, or why it cannot verify id tokens. What a token may be
// signed with follows from the key's type (and alg, when named): never
// "none" or an HMAC, whose key would be the client secret.
func usableProviderKey(k jwk) (proxy.Key, string) {
	switch {
	case k.Kid == "":
		return proxy.Key{}, "no kid"
	case k.Use != nil && *k.Use != "sig":
		return proxy.Key{}, "use is not sig"
	case k.D != nil || k.P != nil:
		return proxy.Key{}, "carries a private key (d)"
	}
	alg := ""
	if k.Alg != nil {
		alg = *k.Alg
	}
	key := proxy.Key{KID: k.Kid, Alg: alg}
	switch k.Kty {
	case "RSA":
		if alg != "" && !strings.HasPrefix(alg, "RS") && !strings.HasPrefix(alg, "PS") {
			return proxy.Key{}, "alg " + sanitize([]byte(alg)) + " is not an RSA signature"
		}
		n, err := strictB64.DecodeString(k.N)
		if err != nil || len(n) == 0 || n[0] == 0 {
			return proxy.Key{}, "n is not unpadded base64url of a positive integer"
		}
		e, err := strictB64.DecodeString(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return proxy.Key{}, "e is not a small unpadded base64url integer"
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits {
			return proxy.Key{}, "RSA key shorter than 2048 bits"
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return proxy.Key{}, "RSA exponent is not an odd number of at least 3"
		}
		key.Provider = pub
	case "EC":
		curves := map[string]struct {
			c   elliptic.Curve
			alg string
		}{"P-256": {elliptic.P256(), "ES256"}, "P-384": {elliptic.P384(), "ES384"}, "P-521": {elliptic.P521(), "ES512"}}
		cv, ok := curves[k.Crv]
		if !ok {
			return proxy.Key{}, "crv is not P-256, P-384 or P-521"
		}
		if alg != "" && alg != cv.alg {
			return proxy.Key{}, "alg " + sanitize([]byte(alg)) + " does not match crv " + k.Crv
		}
		x, errX := strictB64.DecodeString(k.X)
		y, errY := strictB64.DecodeString(k.Y)
		size := (cv.c.Params().BitSize + 7) / 8
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return proxy.Key{}, "x or y is not unpadded base64url of the curve's size"
		}
		// ParseUncompressedPublicKey refuses a point off the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(cv.c, append(append([]byte{4}, x...), y...))
		if err != nil {
			return proxy.Key{}, "the point is not on the curve"
		}
		key.Provider = pub
	default:
		return proxy.Key{}, "kty is not RSA, EC or OKP"
	}
	return key, ""
}
