package proxy

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// This file is the only one that calls jwx (v2, deprecated upstream): a move
// to v3 changes this file alone.

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
	// MaxTTL bounds exp - iat (plus Leeway). Zero: 30 days.
	MaxTTL time.Duration
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

type jwtVerifier struct {
	o     JWTVerifierOptions
	clock jwt.Clock
}

// NewJWTVerifier returns a Verifier for EdDSA JWTs signed by keys in o.Keys.
func NewJWTVerifier(o JWTVerifierOptions) Verifier {
	if o.MaxTTL == 0 {
		o.MaxTTL = 30 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &jwtVerifier{o: o, clock: jwt.ClockFunc(o.Now)}
}

func (v *jwtVerifier) Verify(ctx context.Context, token string) (Claims, error) {
	h, err := precheck(token)
	if err != nil {
		return Claims{}, err
	}
	key, err := v.o.Keys.Lookup(ctx, h.Kid)
	if err != nil {
		switch {
		case errors.Is(err, ErrUnknownKID):
			return Claims{}, authErr(ReasonUnknownKID, fmt.Errorf("kid %q", h.Kid))
		case errors.Is(err, ErrKeysUnavailable):
			return Claims{}, authErr(ReasonKeysUnavailable, err)
		}
		return Claims{}, authErr(ReasonUnavailable, err)
	}
	// The algorithm is the key's (EdDSA), never the token's.
	tok, err := jwt.ParseString(token,
		jwt.WithKey(jwa.EdDSA, key),
		jwt.WithValidate(true),
		jwt.WithClock(v.clock),
		jwt.WithAcceptableSkew(v.o.Leeway),
		jwt.WithIssuer(v.o.Issuer),
		jwt.WithAudience(v.o.Audience),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("iat"),
		jwt.WithRequiredClaim("sub"),
		jwt.WithMaxDelta(v.o.MaxTTL+v.o.Leeway, jwt.ExpirationKey, jwt.IssuedAtKey),
	)
	if err != nil {
		return Claims{}, authErr(jwxReason(err), err)
	}
	if !validSubject(tok.Subject()) {
		return Claims{}, authErr(ReasonBadClaims, errors.New("sub is empty or not printable"))
	}
	nbf := tok.IssuedAt()
	if n := tok.NotBefore(); n.After(nbf) {
		nbf = n
	}
	return Claims{Subject: tok.Subject(), Expires: tok.Expiration(), NotBefore: nbf, KID: h.Kid}, nil
}

func jwxReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired()):
		return ReasonExpired
	case errors.Is(err, jwt.ErrTokenNotYetValid()), errors.Is(err, jwt.ErrInvalidIssuedAt()):
		return ReasonNotYetValid
	case errors.Is(err, jwt.ErrInvalidIssuer()):
		return ReasonWrongIssuer
	case errors.Is(err, jwt.ErrInvalidAudience()):
		return ReasonWrongAudience
	case jwt.IsValidationError(err):
		return ReasonBadClaims
	case jws.IsVerificationError(err):
		return ReasonBadSignature
	}
	return ReasonMalformed
}
