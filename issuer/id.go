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
