package passhash

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"strings"
)

// pbkdf2Hash is any PBKDF2-HMAC format: Django's, passlib's or ASP.NET
// Identity's. They differ in how they write salt and key, not in what
// they compute.
type pbkdf2Hash struct {
	format        Format
	prf           func() hash.Hash
	iterations    int
	salt, derived []byte
}

func (h pbkdf2Hash) Format() Format { return h.format }
func (h pbkdf2Hash) Cost() Cost     { return Cost{Threads: 1} }

func (h pbkdf2Hash) Verify(password string) bool {
	got, err := pbkdf2.Key(h.prf, password, h.salt, h.iterations, len(h.derived))
	return err == nil && subtle.ConstantTimeCompare(got, h.derived) == 1
}

// iterations reads an iteration count: at least 1, at most
// MaxPBKDF2Iterations.
func iterations(s string, f Format) (int, error) {
	n, err := atoi(s, string(f)+" iterations", MaxPBKDF2Iterations)
	if err == nil && n < 1 {
		err = fmt.Errorf("%w: %s iterations 0", ErrMalformed, f)
	}
	return n, err
}

// parseDjangoPBKDF2 reads Django's "pbkdf2_sha256$iterations$salt$hash":
// the salt is used as the string it is (Django's are alphanumeric), the
// hash is the key in padded base64, as long as the digest.
func parseDjangoPBKDF2(s string, f Format) (Hash, error) {
	parts := strings.Split(s, "$") // algorithm, iterations, salt, hash
	if len(parts) != 4 {
		return nil, fmt.Errorf("%w: %s is algorithm$iterations$salt$hash", ErrMalformed, f)
	}
	prf, size := sha256.New, sha256.Size
	if f == DjangoPBKDF2SHA1 {
		prf, size = sha1.New, sha1.Size
	}
	n, err := iterations(parts[1], f)
	if err != nil {
		return nil, err
	}
	if parts[2] == "" || len(parts[2]) > maxParam {
		return nil, fmt.Errorf("%w: %s salt of %d characters", ErrMalformed, f, len(parts[2]))
	}
	derived, err := decodeParam(base64.StdEncoding.Strict(), parts[3], "hash", size)
	if err != nil {
		return nil, err
	}
	if len(derived) != size {
		return nil, fmt.Errorf("%w: %s hash of %d bytes, want %d", ErrMalformed, f, len(derived), size)
	}
	return pbkdf2Hash{format: f, prf: prf, iterations: n, salt: []byte(parts[2]), derived: derived}, nil
}

// ab64 is passlib's "adapted base64": the standard alphabet with "."
// for "+", unpadded.
var ab64 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./").WithPadding(base64.NoPadding).Strict()

// parsePasslibPBKDF2 reads passlib's "$pbkdf2-sha256$rounds$salt$hash",
// salt and hash in adapted base64, the hash as long as the digest.
func parsePasslibPBKDF2(s string, f Format) (Hash, error) {
	parts := strings.Split(s, "$") // "", "pbkdf2-sha256", rounds, salt, hash
	if len(parts) != 5 {
		return nil, fmt.Errorf("%w: %s is $%s$rounds$salt$hash", ErrMalformed, f, parts[1])
	}
	prf, size := sha256.New, sha256.Size
	if f == PasslibPBKDF2SHA512 {
		prf, size = sha512.New, sha512.Size
	}
	n, err := iterations(parts[2], f)
	if err != nil {
		return nil, err
	}
	salt, err := decodeParam(ab64, parts[3], "salt", 0)
	if err != nil {
		return nil, err
	}
	derived, err := decodeParam(ab64, parts[4], "hash", size)
	if err != nil {
		return nil, err
	}
	if len(derived) != size {
		return nil, fmt.Errorf("%w: %s hash of %d bytes, want %d", ErrMalformed, f, len(derived), size)
	}
	return pbkdf2Hash{format: f, prf: prf, iterations: n, salt: salt, derived: derived}, nil
}

// ASP.NET Identity's blobs, in padded base64 (PasswordHasher.cs):
//
//	v2: 0x00, salt (16 bytes), key (32 bytes); PBKDF2-HMAC-SHA1, 1,000 iterations.
//	v3: 0x01, PRF, iterations, salt length (big-endian uint32 each), salt,
//	    key (the rest); PRF 0 is HMAC-SHA1, 1 HMAC-SHA256, 2 HMAC-SHA512.
//	    Salt and key are at least 16 bytes, as the verifier there requires.
const (
	aspnetV2Iterations = 1000
	aspnetV3Header     = 13
	aspnetMinParam     = 16
)

func parseASPNet(s string) (Hash, error) {
	if len(s) > 4*maxParam {
		return nil, fmt.Errorf("%w: base64 blob of %d characters", ErrMalformed, len(s))
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, ErrUnknownFormat
	}
	switch b[0] {
	case 0x00:
		if len(b) != 1+16+32 {
			return nil, fmt.Errorf("%w: aspnet-identity-v2 is 49 bytes, got %d", ErrMalformed, len(b))
		}
		return pbkdf2Hash{format: ASPNetIdentityV2, prf: sha1.New, iterations: aspnetV2Iterations, salt: b[1:17], derived: b[17:]}, nil
	case 0x01:
	default:
		return nil, ErrUnknownFormat
	}
	if len(b) < aspnetV3Header+2*aspnetMinParam {
		return nil, fmt.Errorf("%w: aspnet-identity-v3 of %d bytes", ErrMalformed, len(b))
	}
	var prf func() hash.Hash
	switch binary.BigEndian.Uint32(b[1:]) {
	case 0:
		prf = sha1.New
	case 1:
		prf = sha256.New
	case 2:
		prf = sha512.New
	default:
		return nil, fmt.Errorf("%w: aspnet-identity-v3 PRF %d", ErrMalformed, binary.BigEndian.Uint32(b[1:]))
	}
	iter := binary.BigEndian.Uint32(b[5:])
	if iter < 1 {
		return nil, fmt.Errorf("%w: aspnet-identity-v3 iterations 0", ErrMalformed)
	}
	if iter > MaxPBKDF2Iterations {
		return nil, fmt.Errorf("%w: aspnet-identity-v3 iterations %d, at most %d", ErrTooCostly, iter, MaxPBKDF2Iterations)
	}
	saltLen := binary.BigEndian.Uint32(b[9:])
	if saltLen < aspnetMinParam || uint64(saltLen) > uint64(len(b)-aspnetV3Header-aspnetMinParam) {
		return nil, fmt.Errorf("%w: aspnet-identity-v3 salt of %d bytes in a blob of %d", ErrMalformed, saltLen, len(b))
	}
	salt := b[aspnetV3Header : aspnetV3Header+saltLen]
	return pbkdf2Hash{format: ASPNetIdentityV3, prf: prf, iterations: int(iter), salt: salt, derived: b[aspnetV3Header+saltLen:]}, nil
}
