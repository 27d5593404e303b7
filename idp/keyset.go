package idp

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"

	"github.com/authsidecar/authsidecar/proxy"
)

// keySet is go-oidc's KeySet over a proxy.KeyCache: the provider's JWKS
// read by the same bounded fetcher, under the same max age and cooldown,
// as verifier mode reads an issuer's. An unknown kid causes at most one
// read per cooldown; a kid still unknown after it is refused.
type keySet struct {
	cache *proxy.KeyCache
	algs  []string // the asymmetric algorithms this provider may use
}

func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	algs := make([]jose.SignatureAlgorithm, len(k.algs))
	for i, a := range k.algs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	// ParseSigned refuses any algorithm not listed: "none" and HMAC never
	// are.
	jws, err := jose.ParseSigned(raw, algs)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("not exactly one signature")
	}
	h := jws.Signatures[0].Header
	if h.KeyID == "" {
		return nil, errors.New("no kid")
	}
	key, err := k.cache.LookupKey(ctx, h.KeyID)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", clip(h.KeyID), err)
	}
	if key.Alg != "" && key.Alg != h.Algorithm {
		return nil, fmt.Errorf("key %q is for %s, the token says %s", clip(h.KeyID), key.Alg, clip(h.Algorithm))
	}
	var pub any = key.Provider
	if key.Public != nil {
		pub = key.Public
	}
	// go-jose refuses a key whose type does not fit the algorithm.
	payload, err := jws.Verify(pub)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	return payload, nil
}
