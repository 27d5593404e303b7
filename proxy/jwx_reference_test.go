package proxy_test

// The verifier as it was before token.go: jwx's jwt.ParseString over the
// token, after the same precheck. It is kept, verbatim but for names, as
// the reference the fast path must agree with (TestVerifyMatchesJWX,
// FuzzVerifyMatchesJWX).

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/authsidecar/authsidecar/internal/strictjson"
	"github.com/authsidecar/authsidecar/proxy"
)

type referenceVerifier struct {
	keys             map[string]ed25519.PublicKey
	issuer, audience string
	leeway, maxTTL   time.Duration
	now              func() time.Time
}

// verify returns the claims, or the failure reason.
func (v *referenceVerifier) verify(token string) (proxy.Claims, string) {
	h, err := referencePrecheck(token)
	if err != nil {
		return proxy.Claims{}, proxy.ReasonMalformed
	}
	key, ok := v.keys[h.Kid]
	if !ok {
		return proxy.Claims{}, proxy.ReasonUnknownKID
	}
	tok, err := jwt.ParseString(token,
		jwt.WithKey(jwa.EdDSA, key),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(v.now)),
		jwt.WithAcceptableSkew(v.leeway),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(v.audience),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("iat"),
		jwt.WithRequiredClaim("sub"),
		jwt.WithMaxDelta(v.maxTTL+v.leeway, jwt.ExpirationKey, jwt.IssuedAtKey),
	)
	if err != nil {
		return proxy.Claims{}, referenceReason(err)
	}
	if !referenceValidSubject(tok.Subject()) {
		return proxy.Claims{}, proxy.ReasonBadClaims
	}
	nbf := tok.IssuedAt()
	if n := tok.NotBefore(); n.After(nbf) {
		nbf = n
	}
	return proxy.Claims{Subject: tok.Subject(), Expires: tok.Expiration(), NotBefore: nbf, KID: h.Kid}, ""
}

func referenceReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired()):
		return proxy.ReasonExpired
	case errors.Is(err, jwt.ErrTokenNotYetValid()), errors.Is(err, jwt.ErrInvalidIssuedAt()):
		return proxy.ReasonNotYetValid
	case errors.Is(err, jwt.ErrInvalidIssuer()):
		return proxy.ReasonWrongIssuer
	case errors.Is(err, jwt.ErrInvalidAudience()):
		return proxy.ReasonWrongAudience
	case jwt.IsValidationError(err):
		return proxy.ReasonBadClaims
	case jws.IsVerificationError(err):
		return proxy.ReasonBadSignature
	}
	return proxy.ReasonMalformed
}

func referenceValidSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

var referenceB64 = base64.RawURLEncoding.Strict()

// referenceHeader holds the protected header members we look at. Members that
// would let the token choose its own key (jku, jwk, x5u, x5c) or demand
// extensions (crit) are refused outright.
type referenceHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Typ  string          `json:"typ"`
	Jku  json.RawMessage `json:"jku"`
	Jwk  json.RawMessage `json:"jwk"`
	X5u  json.RawMessage `json:"x5u"`
	X5c  json.RawMessage `json:"x5c"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
}

// referencePrecheck accepts only compact serialization: at most 4096 bytes
// of base64url in exactly three non-empty parts. It returns the decoded
// protected header. The JWS JSON serialization never gets past this, so a
// library's leniency with it does not matter.
func referencePrecheck(token string) (referenceHeader, error) {
	var h referenceHeader
	if len(token) > 4096 {
		return h, errors.New("token longer than 4 KiB")
	}
	parts := 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case c == '.':
			parts++
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return h, errors.New("token is not base64url compact serialization")
		}
	}
	if parts != 2 {
		return h, errors.New("token does not have three parts")
	}
	hdrSeg, rest, _ := strings.Cut(token, ".")
	paySeg, sigSeg, _ := strings.Cut(rest, ".")
	if hdrSeg == "" || paySeg == "" || sigSeg == "" {
		return h, errors.New("token has an empty part")
	}
	// Strict decoding refuses non-zero trailing bits, so one signature has
	// exactly one encoding.
	payload, err := referenceB64.DecodeString(paySeg)
	if err != nil {
		return h, errors.New("payload is not canonical base64url")
	}
	if _, err := referenceB64.DecodeString(sigSeg); err != nil {
		return h, errors.New("signature is not canonical base64url")
	}
	// jwx would take the last of two "sub" members; another reader of the
	// same token might take the first.
	if err := strictjson.CheckDuplicates(payload); err != nil {
		return h, fmt.Errorf("payload: %w", err)
	}
	raw, err := referenceB64.DecodeString(hdrSeg)
	if err != nil {
		return h, errors.New("header is not canonical base64url")
	}
	if err := strictjson.CheckDuplicates(raw); err != nil {
		return h, fmt.Errorf("header: %w", err)
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, errors.New("header is not a JSON object")
	}
	switch {
	case h.Alg != "EdDSA":
		return h, errors.New("header alg is not EdDSA")
	case h.Kid == "":
		return h, errors.New("header has no kid")
	case h.Jku != nil || h.Jwk != nil || h.X5u != nil || h.X5c != nil || h.Crit != nil || h.B64 != nil:
		return h, errors.New("header carries jku, jwk, x5u, x5c, crit or b64")
	case h.Typ != "" && h.Typ != "JWT":
		return h, errors.New("header typ is not JWT")
	}
	return h, nil
}
