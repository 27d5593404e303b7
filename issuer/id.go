package issuer

import (
	"crypto/rand"
	"fmt"
	"io"
)

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newID returns 32 characters drawn uniformly from [A-Za-z0-9] with
// crypto/rand, the shape Better Auth uses for ids and session tokens
// (~190 bits). Bytes >= 248 are rejected so the modulo is unbiased.
func newID() (string, error) { return newIDFrom(rand.Reader) }

func newIDFrom(r io.Reader) (string, error) {
	const n = 32
	out := make([]byte, 0, n)
	buf := make([]byte, 48)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("random id: %w", err)
		}
		for _, b := range buf {
			if b >= 248 { // 248 = 4*62
				continue
			}
			out = append(out, idAlphabet[int(b)%len(idAlphabet)])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// UserIDRule says which ids ValidUserID accepts, for messages.
const UserIDRule = "1 to 128 bytes of A-Z, a-z, 0-9 and . _ : @ -"

// ValidUserID reports whether id may be a user id that comes from
// outside the sidecar (an imported user, a legacy application's answer
// at a lazy migration): 1 to 128 bytes of [A-Za-z0-9._:@-]. Integers,
// UUIDs, ObjectIds and the sidecar's own ids (newID) are all such ids;
// nothing in one needs escaping in a header, a log line or a URL path.
func ValidUserID(id string) bool {
	if id == "" || len(id) > MaxUserIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidRole reports whether role is a role name as "roles grant" and
// routes.admin take it: [a-z0-9_-]+.
func ValidRole(role string) bool {
	if role == "" {
		return false
	}
	for i := 0; i < len(role); i++ {
		switch c := role[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
