package mail

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/authsidecar/authsidecar/internal/seal"
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
	key *seal.Key
}

// NewBox derives the outbox key from secret (AUTH_SECRET's bytes).
func NewBox(secret []byte) (*Box, error) {
	key, err := seal.New(secret, boxInfo)
	if err != nil {
		return nil, fmt.Errorf("outbox box: %w", err)
	}
	return &Box{key: key}, nil
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
	sealed, err := b.key.Seal(plain, []byte(id))
	if err != nil {
		return nil, fmt.Errorf("seal outbox payload: %w", err)
	}
	return sealed, nil
}

// Open authenticates and decrypts a payload sealed for row id. Any failure
// to authenticate is ErrCannotOpen (the cause is not distinguishable, by
// design of the AEAD); a payload that authenticates but does not decode to
// a Message of a known kind is refused too.
func (b *Box) Open(id string, sealed []byte) (Message, error) {
	plain, err := b.key.Open(sealed, []byte(id))
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
