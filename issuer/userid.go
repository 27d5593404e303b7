package issuer

import (
	"crypto/rand"
	"io"
)

// MaxUserIDBytes bounds a user id given from outside (ValidUserID): it is
// every JWT's sub and every forwarded request's identity header.
const MaxUserIDBytes = 128

// MaxNameBytes bounds a user's name, at sign-up and wherever a user is
// made from outside: it keeps every user's JWT well under 4 KiB.
const MaxNameBytes = maxNameBytes

// ValidEmail reports whether s is an address sign-up accepts (zod's
// z.email(), as Better Auth checks it). The caller lower-cases it, as
// every stored address is.
func ValidEmail(s string) bool { return validEmail(s) }

// NewUserID returns a new user id: 32 characters of [A-Za-z0-9] from
// crypto/rand (Better Auth's shape), at least one of them a letter after
// f. So a generated id is never an integer (not all digits) nor a UUID in
// any spelling (no hyphen, and not all hex digits), whatever ids a legacy
// application's users were imported with: an id the sidecar makes cannot
// be one of theirs. Redrawing costs nothing in practice: an all-hex draw
// has odds of (22/62)^32, about 4e-15.
func NewUserID() (string, error) { return newUserIDFrom(rand.Reader) }

func newUserIDFrom(r io.Reader) (string, error) {
	for {
		id, err := newIDFrom(r)
		if err != nil || !allHex(id) {
			return id, err
		}
	}
}

// allHex reports whether s holds only hex digits, of either case.
func allHex(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
