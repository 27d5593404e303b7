package proxy

import (
	"strconv"
	"time"

	"github.com/authsidecar/authsidecar/internal/strictjson"
	"github.com/authsidecar/authsidecar/revocation"
)

// revocation returns what the revocation check needs of a token whose
// claims c passed: the keys of sid and sub, and the issue time to the
// millisecond. The private claims are read leniently, as jwx read unknown
// members: an sid that is not a string is no sid, and an iat_ms that is
// not a whole number of at most 15 digits leaves iat's whole second (the
// second's start, so a cutoff in that second covers the token: the safe
// way to err).
func (c *rawClaims) revocation(tc tokenClaims) revocation.Token {
	sid := ""
	if s, ok := strictjson.String(c.sid); ok && c.sid != nil {
		sid = string(s)
	}
	issued := tc.iat
	if v := c.iatMS; len(v) > 0 && len(v) <= 15 && allDigits(v) {
		n, _ := strconv.ParseInt(string(v), 10, 64)
		issued = time.UnixMilli(n)
	}
	return revocation.TokenOf(sid, tc.sub, issued)
}
