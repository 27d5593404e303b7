// Package seal encrypts values kept at rest (outbox payloads, identity
// provider tokens, sign-in flows) with a key derived from AUTH_SECRET:
// HKDF-SHA256 with a purpose string as info, XChaCha20-Poly1305 with a
// random 24-byte nonce prepended, and associated data that binds a sealed
// value to its place (a row id), so it cannot be moved to another.
package seal

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// ErrCannotOpen means a sealed value does not open: it was sealed under
// another secret or purpose, for another place, or it was altered. The
// AEAD cannot tell these apart, by design.
var ErrCannotOpen = errors.New("sealed value does not open")

// Key seals and opens values for one purpose. It is safe for concurrent
// use.
type Key struct {
	aead cipher.AEAD
}

// New derives the key for purpose (the HKDF info, which separates it from
// every other key derived from secret; a version in it lets a future
// format use another key) from secret.
func New(secret []byte, purpose string) (*Key, error) {
	if len(secret) == 0 {
		return nil, errors.New("seal: empty secret")
	}
	if purpose == "" {
		return nil, errors.New("seal: empty purpose")
	}
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, secret, nil, []byte(purpose)), key); err != nil {
		return nil, fmt.Errorf("seal: derive key: %w", err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Key{aead: aead}, nil
}

// Seal returns nonce‖ciphertext‖tag of plain, bound to ad. At 192 bits a
// random nonce never collides however many values one secret seals.
func (k *Key) Seal(plain, ad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	out := make([]byte, ns, ns+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return k.aead.Seal(out, out[:ns], plain, ad), nil
}

// Open authenticates and decrypts a value sealed with ad. Any failure is
// ErrCannotOpen.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	if len(sealed) < ns+k.aead.Overhead() {
		return nil, ErrCannotOpen
	}
	plain, err := k.aead.Open(nil, sealed[:ns], sealed[ns:], ad)
	if err != nil {
		return nil, ErrCannotOpen
	}
	return plain, nil
}
