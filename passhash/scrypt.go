package passhash

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"

	"golang.org/x/crypto/scrypt"
	"golang.org/x/text/unicode/norm"
)

// Better Auth's scrypt cost and key length, which its "saltHex:keyHex"
// does not record.
const (
	betterAuthN, betterAuthR, betterAuthP = 16384, 16, 1
	betterAuthKeyLen                      = 64
)

// scryptHash is either format computed by scrypt. Better Auth's (the
// sidecar's own) uses the salt's hex string as the salt bytes, not
// decoded, and the NFKC form of the password; passlib's uses the decoded
// salt and the password as it is.
type scryptHash struct {
	format        Format
	n, r, p       int
	salt, derived []byte
}

// parseBetterAuth reads "saltHex:keyHex" as Better Auth and the issuer
// do: the salt is whatever comes before the first colon (any non-empty
// string: the issuer's check has always taken it so), the key 64 bytes
// in hex.
func parseBetterAuth(s string) (Hash, error) {
	salt, key, _ := strings.Cut(s, ":")
	if salt == "" || len(salt) > maxParam {
		return nil, fmt.Errorf("%w: scrypt salt of %d characters", ErrMalformed, len(salt))
	}
	if len(key) != 2*betterAuthKeyLen {
		return nil, fmt.Errorf("%w: scrypt key is %d hex digits", ErrMalformed, 2*betterAuthKeyLen)
	}
	derived, err := hex.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("%w: scrypt key is not hex", ErrMalformed)
	}
	return scryptHash{format: Scrypt, n: betterAuthN, r: betterAuthR, p: betterAuthP, salt: []byte(salt), derived: derived}, nil
}

// parseScryptPHC reads passlib's "$scrypt$ln=<log2 N>,r=<r>,p=<p>$salt$hash",
// salt and hash in unpadded base64.
func parseScryptPHC(s string) (Hash, error) {
	parts := strings.Split(s, "$") // "", "scrypt", params, salt, hash
	if len(parts) != 5 {
		return nil, fmt.Errorf("%w: scrypt-phc is $scrypt$ln=…,r=…,p=…$salt$hash", ErrMalformed)
	}
	p, err := phcParams(parts[2], []string{"ln", "r", "p"}, []int{62, 1 << 20, 1 << 20}, ScryptPHC)
	if err != nil {
		return nil, err
	}
	ln, r, par := p[0], p[1], p[2]
	if ln < 1 || r < 1 || par < 1 {
		return nil, fmt.Errorf("%w: scrypt-phc needs ln, r and p of at least 1", ErrMalformed)
	}
	// 128·N·r and 128·N·r·p in bits, so that no product overflows.
	if mem := 7 + ln + bits.Len(uint(r)); mem > 62 || int64(128)<<ln*int64(r) > MaxScryptMemory {
		return nil, fmt.Errorf("%w: scrypt-phc memory 128·N·r over %d MiB", ErrTooCostly, MaxScryptMemory>>20)
	}
	if int64(128)<<ln*int64(r)*int64(par) > MaxScryptWork {
		return nil, fmt.Errorf("%w: scrypt-phc work 128·N·r·p over %d MiB", ErrTooCostly, MaxScryptWork>>20)
	}
	salt, err := decodeParam(b64, parts[3], "salt", 1)
	if err != nil {
		return nil, err
	}
	derived, err := decodeParam(b64, parts[4], "hash", 16)
	if err != nil {
		return nil, err
	}
	return scryptHash{format: ScryptPHC, n: 1 << ln, r: r, p: par, salt: salt, derived: derived}, nil
}

func (h scryptHash) Format() Format { return h.format }

func (h scryptHash) Cost() Cost {
	return Cost{Memory: 128 * int64(h.n) * int64(h.r), Threads: 1}
}

func (h scryptHash) Verify(password string) bool {
	if h.format == Scrypt {
		password = norm.NFKC.String(password)
	}
	got, err := scrypt.Key([]byte(password), h.salt, h.n, h.r, h.p, len(h.derived))
	return err == nil && subtle.ConstantTimeCompare(got, h.derived) == 1
}
