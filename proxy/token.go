package proxy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/internal/strictjson"
)

// A token is read in one pass over each part: precheck splits and
// decodes it and walks the header and the payload once (validity,
// duplicate names, the members we use); the signature is then checked
// over the bytes as received (jwx.go), and the claims are judged here.
// What is accepted, and with which failure reason, is what jwx's
// jwt.Parse with our options accepted (jwx_reference_test.go holds that
// path and a differential test against it), with one deliberate
// difference: jwx treats an exp of 0 (1970-01-01) or of the zero time as
// "no expiry"; here such a token is expired.

var strictB64 = base64.RawURLEncoding.Strict()

// compactByte is 0 for a byte that cannot appear in a compact JWS, '.' for
// the separator and 1 for the base64url alphabet: one load a byte instead
// of five comparisons, on every token the cache has not seen.
var compactByte = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case c == '.':
			t[c] = '.'
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			t[c] = 1
		}
	}
	return t
}()

// compactToken is a token that passed precheck.
type compactToken struct {
	kid string
	// signingInput is header "." payload exactly as received: strict
	// base64url has one encoding per byte string, so it is also what the
	// issuer signed.
	signingInput string
	signature    []byte
	// headerErr is a header member of the wrong type; jwx reported it
	// after the key lookup, as malformed.
	headerErr error
	claims    rawClaims
}

// rawClaims are the payload members the verifier reads, as raw JSON, and
// err is a payload problem found in the walk that jwx found only after the
// signature check (a value encoding/json cannot decode).
type rawClaims struct {
	exp, iat, nbf, sub, iss, aud, jti []byte
	// sid and iatMS are the issuer's private claims the revocation check
	// reads (issuer/jwt.go); a token without them (another issuer's) is
	// checked by sub and iat alone.
	sid, iatMS []byte
	err        error
}

// Header members that would let the token choose its own key (jku, jwk,
// x5u, x5c) or demand extensions (crit, b64) are refused outright; alg,
// kid, typ, cty, x5t and x5t#S256 are read. A name that is one of these in
// another case is refused too: encoding/json, which read the header
// before, matched names without regard to case, and jwx did not, so such a
// name meant one thing to one reader and another to the next.
var headerFolds = func() (names [][]byte) {
	for _, n := range []string{"jku", "jwk", "x5u", "x5c", "crit", "b64", "alg", "kid", "typ", "cty", "x5t", "x5t#S256"} {
		names = append(names, []byte(n))
	}
	return names
}()

// precheck accepts only compact serialization: at most maxTokenLen bytes
// of base64url in exactly three non-empty parts, canonically encoded,
// whose header and payload are JSON objects without repeated names. The
// header must say alg EdDSA and name a kid. The JWS JSON serialization
// never gets past this, so a library's leniency with it does not matter.
func precheck(token string) (compactToken, error) {
	var t compactToken
	if len(token) > maxTokenLen {
		return t, authErr(ReasonMalformed, errors.New("token longer than 4 KiB"))
	}
	parts := 0
	for i := 0; i < len(token); i++ {
		switch compactByte[token[i]] {
		case 0:
			return t, authErr(ReasonMalformed, errors.New("token is not base64url compact serialization"))
		case '.':
			parts++
		}
	}
	if parts != 2 {
		return t, authErr(ReasonMalformed, errors.New("token does not have three parts"))
	}
	hdrSeg, rest, _ := strings.Cut(token, ".")
	paySeg, sigSeg, _ := strings.Cut(rest, ".")
	if hdrSeg == "" || paySeg == "" || sigSeg == "" {
		return t, authErr(ReasonMalformed, errors.New("token has an empty part"))
	}
	// Strict decoding refuses non-zero trailing bits, so one signature has
	// exactly one encoding.
	payload, err := strictB64.DecodeString(paySeg)
	if err != nil {
		return t, authErr(ReasonMalformed, errors.New("payload is not canonical base64url"))
	}
	if t.signature, err = strictB64.DecodeString(sigSeg); err != nil {
		return t, authErr(ReasonMalformed, errors.New("signature is not canonical base64url"))
	}
	// Duplicates: jwx would take the last of two "sub" members; another
	// reader of the same token might take the first.
	if err := strictjson.Members(payload, t.claims.member); err != nil {
		return t, authErr(ReasonMalformed, fmt.Errorf("payload: %w", err))
	}
	raw, err := strictB64.DecodeString(hdrSeg)
	if err != nil {
		return t, authErr(ReasonMalformed, errors.New("header is not canonical base64url"))
	}
	if err := t.header(raw); err != nil {
		return t, authErr(ReasonMalformed, err)
	}
	t.signingInput = token[:len(hdrSeg)+1+len(paySeg)]
	return t, nil
}

// header walks the protected header once.
func (t *compactToken) header(raw []byte) error {
	var alg string
	err := strictjson.Members(raw, func(name, value []byte) error {
		switch string(name) {
		case "jku", "jwk", "x5u", "x5c", "crit", "b64":
			return errors.New("header carries jku, jwk, x5u, x5c, crit or b64")
		case "alg":
			if s, ok := strictjson.String(value); ok {
				alg = string(s)
			}
		case "kid":
			s, ok := strictjson.String(value)
			if !ok {
				return errors.New("header kid is not a string")
			}
			t.kid = string(s)
		case "typ":
			s, ok := strictjson.String(value)
			switch {
			case !ok && !isNull(value):
				return errors.New("header typ is not a string")
			case len(s) > 0 && string(s) != "JWT":
				return errors.New("header typ is not JWT")
			}
		case "cty", "x5t", "x5t#S256":
			if _, ok := strictjson.String(value); !ok && !isNull(value) && t.headerErr == nil {
				t.headerErr = fmt.Errorf("header %s is not a string", name)
			}
		default:
			for _, k := range headerFolds {
				if bytes.EqualFold(name, k) {
					return fmt.Errorf("header member %q is %q in another case", name, k)
				}
			}
			if !numbersFitFloat64(value) && t.headerErr == nil {
				t.headerErr = fmt.Errorf("header %s holds a number beyond float64", name)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, strictjson.ErrInvalid), errors.Is(err, strictjson.ErrNotObject):
		return errors.New("header is not a JSON object")
	case err != nil:
		return fmt.Errorf("header: %w", err)
	case alg != "EdDSA":
		return errors.New("header alg is not EdDSA")
	case t.kid == "":
		return errors.New("header has no kid")
	}
	return nil
}

// member keeps the raw values of the claims the verifier reads.
func (c *rawClaims) member(name, value []byte) error {
	switch string(name) {
	case "exp":
		c.exp = value
	case "iat":
		c.iat = value
	case "nbf":
		c.nbf = value
	case "sub":
		c.sub = value
	case "iss":
		c.iss = value
	case "aud":
		c.aud = value
	case "jti":
		c.jti = value
	case "sid", "iat_ms":
		if name[0] == 's' {
			c.sid = value
		} else {
			c.iatMS = value
		}
		if !numbersFitFloat64(value) && c.err == nil {
			c.err = fmt.Errorf("claim %s holds a number beyond float64", name)
		}
	default:
		if !numbersFitFloat64(value) && c.err == nil {
			c.err = fmt.Errorf("claim %s holds a number beyond float64", name)
		}
	}
	return nil
}

func isNull(v []byte) bool { return string(v) == "null" }

// numbersFitFloat64 reports whether every number in v, one valid JSON
// value, is within float64's range. encoding/json, which jwx decodes
// unknown members with, refuses 1e400; so do we.
func numbersFitFloat64(v []byte) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			for i++; v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i
			long := false
			for ; j < len(v); j++ {
				d := v[j]
				if d == 'e' || d == 'E' {
					long = true
				} else if !(d == '-' || d == '+' || d == '.' || '0' <= d && d <= '9') {
					break
				}
			}
			// Without an exponent only a literal of over 300 digits can
			// overflow.
			if long || j-i > 300 {
				if _, err := strconv.ParseFloat(string(v[i:j]), 64); err != nil {
					return false
				}
			}
			i = j - 1
		}
	}
	return true
}

// tokenClaims are the decoded claims of a token.
type tokenClaims struct {
	exp, iat, nbf          time.Time
	hasExp, hasIat, hasNbf bool
	sub                    string
	hasSub                 bool
	iss                    []byte
	hasIss                 bool
	audOK, hasAud          bool
}

// decode types the raw claims as jwx did: exp, iat and nbf are numeric
// dates; sub, iss and jti strings (null reads as ""); aud a string or an
// array of strings, checked here for audience. Any other type is
// malformed.
func (c *rawClaims) decode(audience string) (tokenClaims, error) {
	var out tokenClaims
	if c.err != nil {
		return out, c.err
	}
	var err error
	for _, d := range [...]struct {
		raw  []byte
		name string
		t    *time.Time
		has  *bool
	}{{c.exp, "exp", &out.exp, &out.hasExp}, {c.iat, "iat", &out.iat, &out.hasIat}, {c.nbf, "nbf", &out.nbf, &out.hasNbf}} {
		if d.raw == nil {
			continue
		}
		if *d.t, err = numericDate(d.raw); err != nil {
			return out, fmt.Errorf("claim %s: %w", d.name, err)
		}
		*d.has = true
	}
	if c.sub != nil {
		s, err := nullableString(c.sub)
		if err != nil {
			return out, fmt.Errorf("claim sub: %w", err)
		}
		out.sub, out.hasSub = string(s), true
	}
	if c.iss != nil {
		if out.iss, err = nullableString(c.iss); err != nil {
			return out, fmt.Errorf("claim iss: %w", err)
		}
		out.hasIss = true
	}
	if c.jti != nil {
		if _, err := nullableString(c.jti); err != nil {
			return out, fmt.Errorf("claim jti: %w", err)
		}
	}
	if c.aud != nil {
		out.hasAud = true
		if s, ok := strictjson.String(c.aud); ok {
			out.audOK = string(s) == audience
		} else {
			ok, err := strictjson.Elements(c.aud, func(e []byte) error {
				s, ok := strictjson.String(e)
				if !ok {
					return errors.New("an aud element is not a string")
				}
				out.audOK = out.audOK || string(s) == audience
				return nil
			})
			if !ok {
				err = errors.New("aud is neither a string nor an array")
			}
			if err != nil {
				return out, fmt.Errorf("claim aud: %w", err)
			}
		}
	}
	return out, nil
}

func nullableString(v []byte) ([]byte, error) {
	if isNull(v) {
		return []byte{}, nil
	}
	s, ok := strictjson.String(v)
	if !ok {
		return nil, errors.New("not a string")
	}
	return s, nil
}

// numericDate reads a NumericDate as jwx v2 does: a JSON number (as a
// float64, formatted with nine decimals, whole seconds kept), or a string
// of digits and dots (whole seconds before the first dot), or an RFC 3339
// string. Negative numbers, null and other types are refused.
func numericDate(v []byte) (time.Time, error) {
	if v[0] == '"' {
		s, _ := strictjson.String(v)
		return numericString(string(s))
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return time.Time{}, errors.New("not a number or a string")
	}
	// The common case, a whole number of up to 15 digits, is exact in a
	// float64 and formats back to itself.
	if len(v) <= 15 && allDigits(v) {
		n, _ := strconv.ParseInt(string(v), 10, 64)
		return time.Unix(n, 0).UTC(), nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("number %s: %w", v, err)
	}
	var buf [64]byte
	return numericString(string(strconv.AppendFloat(buf[:0], f, 'f', 9, 64)))
}

func allDigits(v []byte) bool {
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numericString is jwx v2's parseNumericString at its default precision
// (whole seconds).
func numericString(x string) (time.Time, error) {
	for i := 0; i < len(x); i++ {
		if c := x[i]; ('0' <= c && c <= '9') || c == '.' {
			continue
		}
		t, err := time.Parse(time.RFC3339, x)
		if err != nil {
			return time.Time{}, errors.New("neither seconds since the epoch nor an RFC 3339 time")
		}
		return t.UTC(), nil
	}
	whole := x
	if i := strings.IndexByte(x, '.'); i > 0 {
		whole = x[:i]
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("seconds %q: %w", whole, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// validate applies jwx v2's checks in jwx's order, so a token with two
// faults reports the same reason: iat not in the future, exp, nbf (each
// with the leeway, on whole seconds), iss, aud, then exp, iat and sub
// present, then exp - iat within maxDelta (plus the leeway, as jwx added
// it), then sub printable; and, which jwx did not check, exp not 0.
func (c *tokenClaims) validate(now time.Time, leeway, maxDelta time.Duration, issuer string) (string, error) {
	now = now.Truncate(time.Second)
	unset := func(t time.Time) bool { return t.IsZero() || t.Unix() == 0 }
	switch {
	case c.hasIat && !unset(c.iat) && now.Before(c.iat.Truncate(time.Second).Add(-leeway)):
		return ReasonNotYetValid, errors.New(`"iat" is in the future`)
	case c.hasExp && !unset(c.exp) && !now.Before(c.exp.Truncate(time.Second).Add(leeway)):
		return ReasonExpired, errors.New(`"exp" not satisfied`)
	case c.hasNbf && !unset(c.nbf) && now.Before(c.nbf.Truncate(time.Second).Add(-leeway)):
		return ReasonNotYetValid, errors.New(`"nbf" not satisfied`)
	case !c.hasIss || string(c.iss) != issuer:
		return ReasonWrongIssuer, errors.New(`"iss" not satisfied`)
	case !c.hasAud || !c.audOK:
		return ReasonWrongAudience, errors.New(`"aud" not satisfied`)
	case !c.hasExp || !c.hasIat || !c.hasSub:
		return ReasonBadClaims, errors.New("exp, iat or sub missing")
	case c.exp.Sub(c.iat) > maxDelta+leeway:
		return ReasonBadClaims, fmt.Errorf("exp - iat exceeds %s", maxDelta+leeway)
	case !validSubject(c.sub):
		return ReasonBadClaims, errors.New("sub is empty or not printable")
	case unset(c.exp):
		// jwx skipped the exp check for these ("never expires"). Last, so
		// a token jwx refused for another reason still gets that reason.
		return ReasonExpired, errors.New(`"exp" is 0 or the zero time`)
	}
	return "", nil
}
