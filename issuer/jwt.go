package issuer

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"
)

// jwtHeader is fixed: the algorithm is the key's, never negotiable.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// jwtClaims answer only "who you are" (docs/protocol.md): the registered claims
// plus a snapshot of the user. Never roles or tier.
//
// Two more say what a revocation needs (docs/revocation.md): sid, the id of
// the session the token was minted from (never its cookie token), and
// iat_ms, the issue time to the millisecond: a user's cutoff in the same
// second as a new sign-in must not take the new token with the old ones,
// and iat has whole seconds only. Both are private claims that Better
// Auth's client and other verifiers ignore.
type jwtClaims struct {
	Sub           string `json:"sub"`
	Iat           int64  `json:"iat"`
	IatMS         int64  `json:"iat_ms"`
	Exp           int64  `json:"exp"`
	Iss           string `json:"iss"`
	Aud           string `json:"aud"`
	Jti           string `json:"jti"`
	Sid           string `json:"sid"`
	ID            string `json:"id"`
	Email         string `json:"email"`
	Name          string `json:"name"`
	EmailVerified bool   `json:"emailVerified"`
}

// signJWT makes a compact JWS for u, minted from the session sid at
// issued (to the millisecond; its whole seconds are iat). It is a few
// lines of stdlib rather than a library call because the header and
// claims are fixed and the signer is ours; verification, where hostile
// input arrives, uses jwx.
func signJWT(key *keyEntry, u User, sid, origin string, now, issued time.Time, ttl time.Duration) (string, error) {
	jti, err := newID()
	if err != nil {
		return "", err
	}
	iat := now.Unix()
	return signCompact(key, "JWT", jwtClaims{
		Sub: u.ID, Iat: iat, IatMS: issued.UnixMilli(), Exp: iat + int64(ttl/time.Second), Iss: origin, Aud: origin, Jti: jti, Sid: sid,
		ID: u.ID, Email: u.Email, Name: u.Name, EmailVerified: u.EmailVerified,
	})
}

// signCompact signs payload, marshalled to JSON, under the header typ.
func signCompact(key *keyEntry, typ string, payload any) (string, error) {
	h, err := json.Marshal(jwtHeader{Alg: "EdDSA", Kid: key.rec.ID, Typ: typ})
	if err != nil {
		return "", fmt.Errorf("jws header: %w", err)
	}
	c, err := json.Marshal(payload)
	if err != nil {
		return "", fmt.Errorf("jws payload: %w", err)
	}
	signing := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	sig := ed25519.Sign(key.priv, []byte(signing))
	return signing + "." + b64url.EncodeToString(sig), nil
}
