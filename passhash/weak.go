package passhash

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// digestHash is a weak format: one digest of salt ‖ password, in hex.
//
//   - MD5, SHA1, SHA256: the bare hex digest of the password, 32, 40 or
//     64 digits (PHP's md5(), sha1() and hash('sha256'); passlib's
//     hex_md5, hex_sha1, hex_sha256; Django's unsalted_md5).
//   - MD5Salted, SHA1Salted: Django's "md5$salt$hex" and "sha1$salt$hex",
//     hex(md5(salt ‖ password)); an empty salt ("md5$$hex", "sha1$$hex")
//     is how Django's unsalted_md5 and unsalted_sha1 wrote them.
//   - SHA256Salted: "sha256$salt$hex", the same recipe over SHA-256. No
//     system writes it: it is the spelling for exporting any salt-first
//     SHA-256 column (the salt as the text it is).
type digestHash struct {
	format Format
	h      func() hash.Hash
	salt   string
	sum    []byte
}

func parseDigest(s string) (Hash, error) {
	switch len(s) {
	case 2 * md5.Size:
		return newDigest(MD5, "", s)
	case 2 * sha1.Size:
		return newDigest(SHA1, "", s)
	case 2 * sha256.Size:
		return newDigest(SHA256, "", s)
	}
	return nil, fmt.Errorf("%w: %d hex digits", ErrUnknownFormat, len(s))
}

func parseSaltedDigest(s string, f Format) (Hash, error) {
	parts := strings.Split(s, "$") // algorithm, salt, hex
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: %s is algorithm$salt$hex", ErrMalformed, f)
	}
	if len(parts[1]) > maxParam {
		return nil, fmt.Errorf("%w: %s salt of %d characters", ErrMalformed, f, len(parts[1]))
	}
	return newDigest(f, parts[1], parts[2])
}

func newDigest(f Format, salt, hexSum string) (Hash, error) {
	h := digestHash{format: f, salt: salt}
	switch f {
	case MD5, MD5Salted:
		h.h = md5.New
	case SHA1, SHA1Salted:
		h.h = sha1.New
	default:
		h.h = sha256.New
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != h.h().Size() {
		return nil, fmt.Errorf("%w: %s digest is %d hex digits", ErrMalformed, f, 2*h.h().Size())
	}
	h.sum = sum
	return h, nil
}

func (h digestHash) Format() Format { return h.format }
func (digestHash) Cost() Cost       { return Cost{Threads: 1} }

func (h digestHash) Verify(password string) bool {
	d := h.h()
	d.Write([]byte(h.salt))
	d.Write([]byte(password))
	return subtle.ConstantTimeCompare(d.Sum(nil), h.sum) == 1
}
