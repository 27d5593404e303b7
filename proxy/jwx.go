package proxy

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// This file is the only one that calls jwx (v2, deprecated upstream): a move
// to v3 changes this file alone. jwx checks the signature; token.go reads
// the token around it in one pass (jwx's jwt.Parse over the same token
// took about twice the signature check, with 311 allocations;
// BenchmarkVerifyMissJWX keeps that path for comparison).

// KeyLookup returns the public key for a kid (KeyCache implements it).
type KeyLookup interface {
	Lookup(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// JWTVerifierOptions configures NewJWTVerifier.
type JWTVerifierOptions struct {
	// Keys resolves kids to public keys. Required.
	Keys KeyLookup
	// Issuer and Audience must equal the token's iss and aud. Required.
	Issuer, Audience string
	// Leeway is the clock skew accepted on exp, nbf and iat. Zero: none.
	Leeway time.Duration
	// MaxTTL bounds exp - iat (plus twice Leeway: once here, once as the
	// skew jwx added to every check, kept so nothing accepted changed).
	// Zero: 30 days.
	MaxTTL time.Duration
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

type jwtVerifier struct {
	o JWTVerifierOptions
	// sig is jwx's EdDSA verifier. The algorithm is the key's (every key
	// we hold is Ed25519), never the token's.
	sig jws.Verifier
}

// NewJWTVerifier returns a Verifier for EdDSA JWTs signed by keys in o.Keys.
func NewJWTVerifier(o JWTVerifierOptions) Verifier {
	if o.MaxTTL == 0 {
		o.MaxTTL = 30 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sig, err := jws.NewVerifier(jwa.EdDSA)
	if err != nil {
		// jwx registers EdDSA in its init: this cannot fail at run time.
		panic(fmt.Sprintf("proxy: jwx has no EdDSA verifier: %v", err))
	}
	return &jwtVerifier{o: o, sig: sig}
}

func (v *jwtVerifier) Verify(ctx context.Context, token string) (Claims, error) {
	t, err := precheck(token)
	if err != nil {
		return Claims{}, err
	}
	key, err := v.o.Keys.Lookup(ctx, t.kid)
	if err != nil {
		switch {
		case errors.Is(err, ErrUnknownKID):
			return Claims{}, authErr(ReasonUnknownKID, fmt.Errorf("kid %q", t.kid))
		case errors.Is(err, ErrKeysUnavailable):
			return Claims{}, authErr(ReasonKeysUnavailable, err)
		}
		return Claims{}, authErr(ReasonUnavailable, err)
	}
	if t.headerErr != nil {
		return Claims{}, authErr(ReasonMalformed, t.headerErr)
	}
	// The verifier only reads the input: it is handed the token's bytes in
	// place rather than a ~400-byte copy per token.
	input := unsafe.Slice(unsafe.StringData(t.signingInput), len(t.signingInput))
	if err := v.sig.Verify(input, t.signature, key); err != nil {
		return Claims{}, authErr(ReasonBadSignature, err)
	}
	c, err := t.claims.decode(v.o.Audience)
	if err != nil {
		return Claims{}, authErr(ReasonMalformed, err)
	}
	if reason, err := c.validate(v.o.Now(), v.o.Leeway, v.o.MaxTTL+v.o.Leeway, v.o.Issuer); err != nil {
		return Claims{}, authErr(reason, err)
	}
	nbf := c.iat
	if c.hasNbf && c.nbf.After(nbf) {
		nbf = c.nbf
	}
	return Claims{Subject: c.sub, Expires: c.exp, NotBefore: nbf, KID: t.kid, Revocation: t.claims.revocation(c)}, nil
}
