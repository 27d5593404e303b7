package mail

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// boxInfo is the HKDF info string. It separates this key from every other
// key derived from AUTH_SECRET, and its version lets a future format derive
// a different key.
const boxInfo = "authsidecar outbox v1"

// ErrCannotOpen means a sealed payload does not open: it was sealed under
// another AUTH_SECRET, for another row, or it was altered.
var ErrCannotOpen = errors.New("outbox payload does not open (AUTH_SECRET changed, or the row was altered or moved)")

// Box seals and opens message payloads with a key derived from AUTH_SECRET
// (HKDF-SHA256, info "authsidecar outbox v1", XChaCha20-Poly1305, random nonce
// prepended, AAD = the outbox row id so a payload cannot be moved to another row).
// A Box is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// NewBox derives the outbox key from secret (AUTH_SECRET's bytes).
func NewBox(secret []byte) (*Box, error) {
	if len(secret) == 0 {
		return nil, errors.New("outbox box: empty secret")
	}
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, secret, nil, []byte(boxInfo)), key); err != nil {
		return nil, fmt.Errorf("outbox box: derive key: %w", err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("outbox box: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal returns nonce‖ciphertext‖tag of m's JSON, bound to the row id.
// The 24-byte XChaCha nonce is random: at 192 bits a collision is not a
// concern however many messages one secret seals.
func (b *Box) Seal(id string, m Message) ([]byte, error) {
	if id == "" {
		return nil, errors.New("seal outbox payload: empty id")
	}
	if !m.Kind.Valid() {
		return nil, fmt.Errorf("seal outbox payload: unknown kind %q", m.Kind)
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("seal outbox payload: %w", err)
	}
	ns := b.aead.NonceSize()
	out := make([]byte, ns, ns+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("seal outbox payload: nonce: %w", err)
	}
	return b.aead.Seal(out, out[:ns], plain, []byte(id)), nil
}

// Open authenticates and decrypts a payload sealed for row id. Any failure
// to authenticate is ErrCannotOpen (the cause is not distinguishable, by
// design of the AEAD); a payload that authenticates but does not decode to
// a Message of a known kind is refused too.
func (b *Box) Open(id string, sealed []byte) (Message, error) {
	ns := b.aead.NonceSize()
	if len(sealed) < ns+b.aead.Overhead() {
		return Message{}, fmt.Errorf("open outbox payload %s: %w", id, ErrCannotOpen)
	}
	plain, err := b.aead.Open(nil, sealed[:ns], sealed[ns:], []byte(id))
	if err != nil {
		return Message{}, fmt.Errorf("open outbox payload %s: %w", id, ErrCannotOpen)
	}
	var m Message
	if err := json.Unmarshal(plain, &m); err != nil {
		return Message{}, fmt.Errorf("open outbox payload %s: decode: %w", id, err)
	}
	if !m.Kind.Valid() {
		return Message{}, fmt.Errorf("open outbox payload %s: unknown kind %q", id, m.Kind)
	}
	return m, nil
}
