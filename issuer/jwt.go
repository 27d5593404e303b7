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
type jwtClaims struct {
	Sub           string `json:"sub"`
	Iat           int64  `json:"iat"`
	Exp           int64  `json:"exp"`
	Iss           string `json:"iss"`
	Aud           string `json:"aud"`
	Jti           string `json:"jti"`
	ID            string `json:"id"`
	Email         string `json:"email"`
	Name          string `json:"name"`
	EmailVerified bool   `json:"emailVerified"`
}

// signJWT makes a compact JWS. It is a few lines of stdlib rather than a
// library call because the header and claims are fixed and the signer is
// ours; verification, where hostile input arrives, uses jwx.
func signJWT(key *keyEntry, u User, origin string, now time.Time, ttl time.Duration) (string, error) {
	jti, err := newID()
	if err != nil {
		return "", err
	}
	h, err := json.Marshal(jwtHeader{Alg: "EdDSA", Kid: key.rec.ID, Typ: "JWT"})
	if err != nil {
		return "", fmt.Errorf("jwt header: %w", err)
	}
	iat := now.Unix()
	c, err := json.Marshal(jwtClaims{
		Sub: u.ID, Iat: iat, Exp: iat + int64(ttl/time.Second), Iss: origin, Aud: origin, Jti: jti,
		ID: u.ID, Email: u.Email, Name: u.Name, EmailVerified: u.EmailVerified,
	})
	if err != nil {
		return "", fmt.Errorf("jwt claims: %w", err)
	}
	signing := b64url.EncodeToString(h) + "." + b64url.EncodeToString(c)
	sig := ed25519.Sign(key.priv, []byte(signing))
	return signing + "." + b64url.EncodeToString(sig), nil
}
