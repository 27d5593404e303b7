package proxy_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// mapKeys is a KeyLookup over a map.
type mapKeys map[string]ed25519.PublicKey

func (m mapKeys) Lookup(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if k, ok := m[kid]; ok {
		return k, nil
	}
	return nil, proxy.ErrUnknownKID
}

// diffPair is the fast verifier and the jwx reference on the same keys
// and clock.
type diffPair struct {
	fast proxy.Verifier
	ref  *referenceVerifier
	now  time.Time
}

func newDiffPair(pub ed25519.PublicKey, now time.Time) diffPair {
	keys := mapKeys{"k1": pub}
	clock := func() time.Time { return now }
	const leeway = 30 * time.Second
	return diffPair{
		fast: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: keys, Issuer: origin, Audience: origin, Leeway: leeway, Now: clock}),
		ref:  &referenceVerifier{keys: keys, issuer: origin, audience: origin, leeway: leeway, maxTTL: 30 * 24 * time.Hour, now: clock},
		now:  now,
	}
}

// compare returns a description of how the two verifiers differ on
// token, or "" when they agree: the same claims, or the same reason.
func (p diffPair) compare(token string) string {
	got, err := p.fast.Verify(context.Background(), token)
	gotReason := ""
	if err != nil {
		var ae *proxy.AuthError
		if !errors.As(err, &ae) {
			return fmt.Sprintf("fast verifier error is not an AuthError: %v", err)
		}
		gotReason = ae.Reason
	}
	want, wantReason := p.ref.verify(token)
	switch {
	case gotReason != wantReason:
		return fmt.Sprintf("fast: %q (%v), jwx: %q", gotReason, err, wantReason)
	case gotReason == "" && (got.Subject != want.Subject || !got.Expires.Equal(want.Expires) || !got.NotBefore.Equal(want.NotBefore) || got.KID != want.KID):
		return fmt.Sprintf("claims differ: fast %+v, jwx %+v", got, want)
	}
	return ""
}

// claimChoices are raw JSON values (or "" for absent) for each claim,
// the good one first, chosen to cover every type and edge jwx's decoding distinguishes.
func claimChoices(now time.Time) map[string][]string {
	n := now.Unix()
	num := func(d time.Duration) string { return fmt.Sprint(now.Add(d).Unix()) }
	rfc := func(d time.Duration) string { return `"` + now.Add(d).UTC().Format(time.RFC3339) + `"` }
	return map[string][]string{
		"exp": {num(time.Hour), "", num(-time.Hour), num(-29 * time.Second), num(-31 * time.Second), num(31 * 24 * time.Hour),
			num(30*24*time.Hour + 59*time.Second), num(30*24*time.Hour + 61*time.Second),
			`"` + num(time.Hour) + `"`, `"` + num(time.Hour) + `.7"`, num(time.Hour) + ".9999999999", num(time.Hour) + ".5", fmt.Sprintf("%de0", n+3600), fmt.Sprintf("%.6e", float64(n+3600)),
			rfc(time.Hour), rfc(-time.Hour), `"2026-11-25T10:00:00.5+01:00"`, `"0001-01-01T00:00:00Z"`,
			"1e400", "1e30", "9223372036854775807", "-5", "-0", "null", "true", `""`, `".5"`, `"abc"`, `[1]`, `{}`, `"1.2.3"`},
		"iat": {num(0), "", num(-10 * time.Second), num(-time.Hour), num(29 * time.Second), num(31 * time.Second), num(time.Hour),
			`"` + num(0) + `"`, rfc(0), num(0) + ".25", "null", "false", `"x"`, "-1", "1e400", `{"a":1}`},
		"nbf":   {"", num(-time.Hour), num(29 * time.Second), num(31 * time.Second), rfc(time.Minute), "0.5", "null", `"soon"`, `"` + num(-time.Minute) + `"`},
		"iss":   {`"` + origin + `"`, "", `"https://evil.example"`, "null", "5", `"\u0068ttp://localhost:8080"`, `["` + origin + `"]`, `""`},
		"aud":   {`"` + origin + `"`, "", `["` + origin + `"]`, `["https://x","` + origin + `"]`, `[]`, `[5]`, `["` + origin + `",null]`, "null", "5", `"https://evil.example"`, `{"a":"` + origin + `"}`},
		"sub":   {`"user-1"`, "", `""`, "null", "7", `"a b"`, `"\u00e9t\u00e9"`, `"` + strings.Repeat("u", 300) + `"`, `"\u0075ser-2"`, `"a\nb"`, `["user-1"]`},
		"jti":   {"", `"0123456789abcdef"`, "null", "5", `{}`},
		"extra": {"", `"name":"Ann"`, `"x":1e400`, `"x":[1,{"y":-1e999}]`, `"x":"1e400"`, `"SUB":"admin"`, `"Exp":1`, `"emailVerified":false`, `"n":12345678901234567890123`},
	}
}

var headerChoices = []string{
	`{"alg":"EdDSA","kid":"k1","typ":"JWT"}`,
	`{"alg":"EdDSA","kid":"k1"}`,
	`{"alg":"EdDSA","kid":"k1","typ":null}`,
	`{"alg":"EdDSA","kid":"k1","typ":""}`,
	`{"alg":"EdDSA","kid":"k1","typ":"jwt"}`,
	`{"alg":"EdDSA","kid":"k1","typ":5}`,
	`{"alg":"EdDSA","kid":"k1","cty":"JWT"}`,
	`{"alg":"EdDSA","kid":"k1","cty":5}`,
	`{"alg":"EdDSA","kid":"k1","cty":null}`,
	`{"alg":"EdDSA","kid":"k1","x5t":7}`,
	`{"alg":"EdDSA","kid":"k1","x5t#S256":"abc"}`,
	`{"alg":"EdDSA","kid":"k1","z":1e400}`,
	`{"alg":"EdDSA","kid":"k1","z":[1e308,{"q":"1e999"}]}`,
	`{"alg":"\u0045dDSA","kid":"k\u0031"}`,
	`{"alg":"EdDSA","kid":"k2"}`,
	`{"alg":"EdDSA","kid":""}`,
	`{"alg":"EdDSA","kid":null}`,
	`{"alg":"EdDSA","kid":1}`,
	`{"alg":"ES256","kid":"k1"}`,
	`{"alg":"EdDSA","kid":"k1","jku":null}`,
	`{"alg":"EdDSA","kid":"k1","b64":true}`,
	`{"alg":"EdDSA","kid":"k1","JKU":"https://evil"}`,
	`["alg","EdDSA"]`,
}

// TestVerifyMatchesJWX signs thousands of combinations of the values
// above (with the right key, and some with another) and requires the fast
// verifier to answer exactly as jwx's jwt.Parse did: the same claims, or
// the same failure reason. Two differences are deliberate, and checked
// separately in TestVerifyDeliberateDifferences.
func TestVerifyMatchesJWX(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	now := time.Date(2026, 11, 25, 12, 0, 0, 300_000_000, time.UTC)
	p := newDiffPair(pub, now)
	choices := claimChoices(now)
	names := []string{"exp", "iat", "nbf", "iss", "aud", "sub", "jti", "extra"}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 4000
	if testing.Short() {
		n = 500
	}
	accepted, seen := 0, map[string]bool{}
	for i := 0; i < n; i++ {
		var members []string
		for _, name := range names {
			c := choices[name]
			// Mostly the good value (the first), so that most tokens
			// fail on one claim at most and each reason gets exercised.
			v := c[0]
			if rng.IntN(6) == 0 {
				v = c[rng.IntN(len(c))]
			}
			switch {
			case v == "":
			case name == "extra":
				members = append(members, v)
			default:
				members = append(members, fmt.Sprintf("%q:%s", name, v))
			}
		}
		rng.Shuffle(len(members), func(a, b int) { members[a], members[b] = members[b], members[a] })
		payload := "{" + strings.Join(members, ",") + "}"
		header := headerChoices[0]
		if rng.IntN(6) == 0 {
			header = headerChoices[rng.IntN(len(headerChoices))]
		}
		if deliberateDifference(header, payload) {
			continue
		}
		key := priv
		if rng.IntN(20) == 0 {
			key = other
		}
		tok := signRaw(key, header, payload)
		if seen[tok] {
			continue
		}
		seen[tok] = true
		if d := p.compare(tok); d != "" {
			t.Errorf("header %s payload %s: %s", header, payload, d)
		}
		if _, err := p.fast.Verify(context.Background(), tok); err == nil {
			accepted++
		}
	}
	// The test proves nothing if everything is refused, or accepted.
	if accepted < len(seen)/10 || accepted > len(seen)*9/10 {
		t.Errorf("%d of %d tokens accepted: the mix does not exercise both sides", accepted, len(seen))
	}
	t.Logf("%d distinct tokens, %d accepted by both", len(seen), accepted)
}

// deliberateDifference reports whether a token falls under one of the
// two deliberate differences, which TestVerifyDeliberateDifferences
// covers: an exp that jwx reads as "never" (0 or the zero time), and a
// header member named like one we read but in another case.
func deliberateDifference(header, payload string) bool {
	for _, unset := range []string{`"exp":0,`, `"exp":0}`, `"exp":"0001-01-01T00:00:00Z"`, `"exp":-0`, `"exp":0.5`, `"exp":".5"`} {
		if strings.Contains(payload, unset) {
			return true
		}
	}
	return strings.Contains(header, `"JKU"`)
}

// TestVerifyDeliberateDifferences pins where the fast path refuses what
// jwx accepted: a token jwx would never expire, and header names that
// encoding/json (which read the header before jwx did) matched without
// regard to case.
func TestVerifyDeliberateDifferences(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	p := newDiffPair(pub, now)
	iat := now.Unix()
	claims := func(exp string) string {
		return fmt.Sprintf(`{"sub":"user-1","iat":%d,"exp":%s,"iss":%q,"aud":%q}`, iat, exp, origin, origin)
	}
	tests := []struct {
		name, header, payload string
		jwx, fast             string // reasons; "" is accepted
	}{
		{"exp 0 never expires in jwx", `{"alg":"EdDSA","kid":"k1"}`, claims("0"), "", proxy.ReasonExpired},
		{"exp zero time never expires in jwx", `{"alg":"EdDSA","kid":"k1"}`, claims(`"0001-01-01T00:00:00Z"`), "", proxy.ReasonExpired},
		{"exp 0.5 is 0 in jwx", `{"alg":"EdDSA","kid":"k1"}`, claims("0.5"), "", proxy.ReasonExpired},
		{"exp and iat 0", `{"alg":"EdDSA","kid":"k1"}`, `{"sub":"user-1","iat":0,"exp":0,"iss":"` + origin + `","aud":"` + origin + `"}`, "", proxy.ReasonExpired},
		{"Alg for alg", `{"Alg":"EdDSA","kid":"k1"}`, claims(fmt.Sprint(iat + 60)), "", proxy.ReasonMalformed},
		{"KID for kid", `{"alg":"EdDSA","KID":"k1"}`, claims(fmt.Sprint(iat + 60)), "", proxy.ReasonMalformed},
		{"kid and Kid", `{"alg":"EdDSA","kid":"k1","Kid":"k2"}`, claims(fmt.Sprint(iat + 60)), proxy.ReasonUnknownKID, proxy.ReasonMalformed},
		{"Kelvin-sign kid", `{"alg":"EdDSA","\u212Aid":"k1"}`, claims(fmt.Sprint(iat + 60)), "", proxy.ReasonMalformed},
		{"JKU", `{"alg":"EdDSA","kid":"k1","JKU":"https://evil"}`, claims(fmt.Sprint(iat + 60)), proxy.ReasonMalformed, proxy.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := signRaw(priv, tt.header, tt.payload)
			if _, reason := p.ref.verify(tok); reason != tt.jwx {
				t.Errorf("jwx: %q, want %q (the reference changed?)", reason, tt.jwx)
			}
			_, err := p.fast.Verify(context.Background(), tok)
			if got := reasonOrEmpty(err); got != tt.fast {
				t.Errorf("fast: %q (%v), want %q", got, err, tt.fast)
			}
		})
	}
}

func reasonOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	var ae *proxy.AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return "not an AuthError: " + err.Error()
}

// FuzzVerifyMatchesJWX signs whatever header and payload the fuzzer makes
// with the trusted key and requires the fast verifier to agree with jwx,
// outside the deliberate differences.
func FuzzVerifyMatchesJWX(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	now := time.Date(2026, 11, 25, 12, 0, 0, 300_000_000, time.UTC)
	p := newDiffPair(pub, now)
	choices := claimChoices(now)
	good := fmt.Sprintf(`{"sub":"user-1","iat":%s,"exp":%s,"iss":%q,"aud":%q}`, choices["iat"][0], choices["exp"][0], origin, origin)
	for _, h := range headerChoices {
		f.Add(h, good)
	}
	for name, values := range choices {
		for _, v := range values {
			if v != "" && name != "extra" {
				f.Add(headerChoices[0], strings.Replace(good, `"sub":"user-1"`, fmt.Sprintf(`"sub":"user-1",%q:%s`, name+"x", v), 1))
				f.Add(headerChoices[0], strings.Replace(good, `"`+name+`":`, `"`+name+`x":`, 1)[:len(good)-1]+fmt.Sprintf(`,%q:%s}`, name, v))
			}
		}
	}
	f.Fuzz(func(t *testing.T, header, payload string) {
		tok := signRaw(priv, header, payload)
		if d := p.compare(tok); d != "" && !deliberateTokenDifference(p, tok) {
			t.Errorf("header %q payload %q: %s", header, payload, d)
		}
	})
}

// deliberateTokenDifference decides from the decoded token itself
// whether it is one of the deliberate differences: the reference accepts
// it while its exp reads as 0 or the zero time, or its header has a name
// that folds to one we read.
func deliberateTokenDifference(p diffPair, tok string) bool {
	parts := strings.Split(tok, ".")
	raw, _ := b64.DecodeString(parts[0])
	var h map[string]any
	if json.Unmarshal(raw, &h) == nil {
		for name := range h {
			for _, k := range []string{"alg", "kid", "typ", "cty", "x5t", "x5t#S256", "jku", "jwk", "x5u", "x5c", "crit", "b64"} {
				if name != k && strings.EqualFold(name, k) {
					return true
				}
			}
		}
	}
	c, reason := p.ref.verify(tok)
	return reason == "" && (c.Expires.IsZero() || c.Expires.Unix() == 0)
}
