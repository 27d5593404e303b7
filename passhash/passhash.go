package passhash

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Format names a stored hash's format. The names are the values of the
// format label of authsidecar_password_hashes.
type Format string

// The formats Parse knows.
const (
	Scrypt              Format = "scrypt"
	ScryptPHC           Format = "scrypt-phc"
	Bcrypt              Format = "bcrypt"
	Argon2id            Format = "argon2id"
	Argon2i             Format = "argon2i"
	DjangoPBKDF2SHA256  Format = "django-pbkdf2-sha256"
	DjangoPBKDF2SHA1    Format = "django-pbkdf2-sha1"
	PasslibPBKDF2SHA256 Format = "passlib-pbkdf2-sha256"
	PasslibPBKDF2SHA512 Format = "passlib-pbkdf2-sha512"
	ASPNetIdentityV2    Format = "aspnet-identity-v2"
	ASPNetIdentityV3    Format = "aspnet-identity-v3"
	PHPass              Format = "phpass"
	MD5                 Format = "md5"
	SHA1                Format = "sha1"
	SHA256              Format = "sha256"
	MD5Salted           Format = "md5-salted"
	SHA1Salted          Format = "sha1-salted"
	SHA256Salted        Format = "sha256-salted"
)

// Formats lists every format Parse knows, the sidecar's own first.
func Formats() []Format {
	return []Format{Scrypt, ScryptPHC, Bcrypt, Argon2id, Argon2i,
		DjangoPBKDF2SHA256, DjangoPBKDF2SHA1, PasslibPBKDF2SHA256, PasslibPBKDF2SHA512,
		ASPNetIdentityV2, ASPNetIdentityV3, PHPass,
		MD5, SHA1, SHA256, MD5Salted, SHA1Salted, SHA256Salted}
}

// Native reports whether f is the sidecar's own format: every other one
// is replaced by it on the first sign-in that proves the password.
func (f Format) Native() bool { return f == Scrypt }

// Weak reports whether f is a plain digest (MD5, SHA-1, SHA-256, salted
// or not): one guess costs a microsecond, so Parse refuses it unless
// Options.AllowWeak.
func (f Format) Weak() bool {
	switch f {
	case MD5, SHA1, SHA256, MD5Salted, SHA1Salted, SHA256Salted:
		return true
	}
	return false
}

// The cost bounds: a hash beyond them is refused by Parse, at import and
// at sign-in alike, as a hash that would take far longer or far more
// memory than the sidecar's own (scrypt N=16384, r=16: 32 MiB, ~80 ms).
// Each allows about thirty times that.
const (
	MaxBcryptCost       = 15
	MaxArgon2Memory     = 256 << 20 // bytes (m=262144 KiB)
	MaxArgon2Time       = 10
	MaxArgon2Threads    = 16
	MaxPBKDF2Iterations = 5_000_000
	// MaxScryptMemory bounds scrypt's 128·N·r bytes, as argon2's m.
	MaxScryptMemory = 256 << 20
	// MaxScryptWork bounds 128·N·r·p: four passes at the memory bound,
	// 32 times the sidecar's own.
	MaxScryptWork = 1 << 30
	// MaxPHPassRounds bounds phpass's 2^n MD5 rounds (phpass itself
	// allows 2^30): 2^24 cost about what MaxPBKDF2Iterations do.
	MaxPHPassRounds = 24
)

// maxParam bounds the bytes of a salt or a derived key: real ones are 8
// to 64.
const maxParam = 1024

// Errors Parse returns, wrapped with the reason.
var (
	ErrUnknownFormat = errors.New("unknown password hash format")
	ErrMalformed     = errors.New("malformed password hash")
	ErrTooCostly     = errors.New("password hash beyond the cost bounds")
	ErrWeak          = errors.New("weak password hash not allowed")
)

// Options says what Parse accepts.
type Options struct {
	// AllowWeak accepts the weak formats (Format.Weak). Zero: they are
	// refused with ErrWeak.
	AllowWeak bool
}

// Cost is what verifying a password against a hash takes.
type Cost struct {
	// Memory is the work memory one verification allocates, in bytes:
	// argon2's m, scrypt's 128·N·r; 0 for the others (a few KiB).
	Memory int64
	// Threads is how many goroutines a verification computes on at once:
	// argon2's p, 1 for every other format.
	Threads int
}

// Hash is a parsed stored hash.
type Hash interface {
	// Format is the hash's format.
	Format() Format
	// Cost is what Verify takes.
	Cost() Cost
	// Verify reports whether password is the one hashed, comparing in
	// constant time. Only Scrypt normalizes the password (NFKC, as Better
	// Auth does); the other formats take its UTF-8 bytes as they are, as
	// the systems that write them do.
	Verify(password string) bool
}

// Parse reads a stored hash by its prefix or shape. It computes no hash;
// the error says why a value is refused, without quoting it.
func Parse(stored string, o Options) (Hash, error) {
	h, err := parse(stored)
	if err != nil {
		return nil, err
	}
	if f := h.Format(); f.Weak() && !o.AllowWeak {
		return nil, fmt.Errorf("%w: %s", ErrWeak, f)
	}
	return h, nil
}

func parse(s string) (Hash, error) {
	switch {
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		return parseBcrypt(s)
	case strings.HasPrefix(s, "$argon2id$"):
		return parseArgon2(s, Argon2id)
	case strings.HasPrefix(s, "$argon2i$"):
		return parseArgon2(s, Argon2i)
	case strings.HasPrefix(s, "$scrypt$"):
		return parseScryptPHC(s)
	case strings.HasPrefix(s, "$pbkdf2-sha256$"):
		return parsePasslibPBKDF2(s, PasslibPBKDF2SHA256)
	case strings.HasPrefix(s, "$pbkdf2-sha512$"):
		return parsePasslibPBKDF2(s, PasslibPBKDF2SHA512)
	case strings.HasPrefix(s, "$P$"), strings.HasPrefix(s, "$H$"):
		return parsePHPass(s)
	case strings.HasPrefix(s, "pbkdf2_sha256$"):
		return parseDjangoPBKDF2(s, DjangoPBKDF2SHA256)
	case strings.HasPrefix(s, "pbkdf2_sha1$"):
		return parseDjangoPBKDF2(s, DjangoPBKDF2SHA1)
	case strings.HasPrefix(s, "md5$"):
		return parseSaltedDigest(s, MD5Salted)
	case strings.HasPrefix(s, "sha1$"):
		return parseSaltedDigest(s, SHA1Salted)
	case strings.HasPrefix(s, "sha256$"):
		return parseSaltedDigest(s, SHA256Salted)
	case strings.HasPrefix(s, "$"):
		return nil, fmt.Errorf("%w: prefix %q", ErrUnknownFormat, prefix(s))
	case strings.Contains(s, ":"):
		return parseBetterAuth(s)
	case isHex(s):
		return parseDigest(s)
	case isBase64(s):
		return parseASPNet(s)
	}
	return nil, ErrUnknownFormat
}

// prefix is the "$name$" a refusal may quote: the identifier, never the
// parameters or the salt after it, and only if it looks like one.
func prefix(s string) string {
	end := strings.IndexByte(s[1:], '$')
	if end < 0 || end > 20 {
		return "$"
	}
	name := s[:end+2]
	for _, c := range name[1 : len(name)-1] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "$"
		}
	}
	return name
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func isBase64(s string) bool {
	if s == "" || len(s)%4 != 0 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// b64 is the PHC strings' base64: standard alphabet, no padding. Strict:
// a value whose unused bits are set is not one an encoder wrote.
var b64 = base64.RawStdEncoding.Strict()

// decodeParam decodes a salt or key, bounded by maxParam bytes.
func decodeParam(enc *base64.Encoding, s, what string, minLen int) ([]byte, error) {
	if len(s) > maxParam*2 {
		return nil, fmt.Errorf("%w: %s longer than %d bytes", ErrMalformed, what, maxParam)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not base64", ErrMalformed, what)
	}
	if len(b) < minLen || len(b) > maxParam {
		return nil, fmt.Errorf("%w: %s of %d bytes", ErrMalformed, what, len(b))
	}
	return b, nil
}

// atoi reads a decimal as an encoder writes it: digits, no sign, no
// leading zero, at most max.
func atoi(s, what string, max int) (int, error) {
	if s == "" || len(s) > 10 || s[0] == '0' && len(s) > 1 {
		return 0, fmt.Errorf("%w: %s %q", ErrMalformed, what, clip(s))
	}
	n := 0
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %s %q", ErrMalformed, what, clip(s))
		}
		n = n*10 + int(c-'0')
	}
	if n > max {
		return 0, fmt.Errorf("%w: %s %d, at most %d", ErrTooCostly, what, n, max)
	}
	return n, nil
}

// clip shortens a parameter quoted in a refusal.
func clip(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}
