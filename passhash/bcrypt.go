package passhash

import (
	"fmt"

	"golang.org/x/crypto/bcrypt"
)

// bcryptHash is "$2a$", "$2b$" or "$2y$", a two-digit cost, 22 characters
// of salt and 31 of hash in bcrypt's base64. The three prefixes compute
// alike: $2b$ fixed OpenBSD's wrap-around of passwords over 255 bytes
// (longer than any bcrypt reads: it stops at 72), $2y$ is PHP's name
// for the fixed crypt_blowfish.
type bcryptHash struct {
	stored []byte
}

// bcryptChars is bcrypt's base64 alphabet.
var bcryptChars = charset("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

func parseBcrypt(s string) (Hash, error) {
	if len(s) != 60 || s[6] != '$' {
		return nil, fmt.Errorf("%w: bcrypt is 60 characters, $2?$cost$ and 53 of salt and hash", ErrMalformed)
	}
	if s[4] < '0' || s[4] > '9' || s[5] < '0' || s[5] > '9' {
		return nil, fmt.Errorf("%w: bcrypt cost", ErrMalformed)
	}
	cost := int(s[4]-'0')*10 + int(s[5]-'0')
	if cost < bcrypt.MinCost {
		return nil, fmt.Errorf("%w: bcrypt cost %d below %d", ErrMalformed, cost, bcrypt.MinCost)
	}
	if cost > MaxBcryptCost {
		return nil, fmt.Errorf("%w: bcrypt cost %d, at most %d", ErrTooCostly, cost, MaxBcryptCost)
	}
	for i := 7; i < len(s); i++ {
		if !bcryptChars[s[i]] {
			return nil, fmt.Errorf("%w: bcrypt salt and hash are not bcrypt's base64", ErrMalformed)
		}
	}
	return bcryptHash{stored: []byte(s)}, nil
}

func (bcryptHash) Format() Format { return Bcrypt }
func (bcryptHash) Cost() Cost     { return Cost{Threads: 1} }

// Verify uses x/crypto's bcrypt, which compares in constant time and,
// as the C implementations do, reads at most 72 bytes of the password.
func (h bcryptHash) Verify(password string) bool {
	return bcrypt.CompareHashAndPassword(h.stored, []byte(password)) == nil
}

// charset is a lookup table of the bytes of alphabet.
func charset(alphabet string) (set [256]bool) {
	for i := range len(alphabet) {
		set[alphabet[i]] = true
	}
	return set
}
