package issuer

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/authsidecar/authsidecar/internal/seal"
)

// What a Better Auth application's BETTER_AUTH_SECRET still opens after
// its database was taken over ("db import-better-auth",
// docs/migration.md): its session cookies, its encrypted signing keys
// and, under encryptOAuthTokens, its provider tokens.

// BetterAuthCookie is a Better Auth application's session cookie, accepted
// beside the sidecar's own while its users move: a browser that holds one
// is signed in, and get-session gives it the sidecar's cookie in its
// place. The zero value accepts none.
type BetterAuthCookie struct {
	// Name is the cookie's name before any "__Secure-" prefix, which an
	// https BaseURL adds, as Better Auth does ("better-auth.session_token"
	// by default).
	Name string
	// Secret is the BETTER_AUTH_SECRET the cookie is signed with.
	Secret []byte
}

// ErrBetterAuthSecret: a private key of Better Auth's does not open with
// the secret given as BETTER_AUTH_SECRET.
var ErrBetterAuthSecret = errors.New("its private key does not open with BETTER_AUTH_SECRET: is it the secret Better Auth ran with?")

func (b BetterAuthCookie) enabled() bool { return b.Name != "" && len(b.Secret) > 0 }

// betterAuthOpen is Better Auth's symmetricDecrypt for a plain string
// secret: hex of a 24-byte nonce, the XChaCha20-Poly1305 ciphertext and
// its tag, under the key SHA-256(secret). ok is false for anything that
// does not open: another secret, or a value that is not such a thing.
func betterAuthOpen(secret []byte, hexValue string) (plain []byte, ok bool) {
	raw, err := hex.DecodeString(hexValue)
	if err != nil {
		return nil, false
	}
	aead, err := chacha20poly1305.NewX(secretKey(secret))
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, false
	}
	plain, err = aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	return plain, err == nil
}

// ReencryptKey returns a jwks row of Better Auth's jwt() plugin with its
// private key opened with from (BETTER_AUTH_SECRET) and sealed again with
// to (AUTH_SECRET), so the key serves the sidecar as one of its own: its
// JWTs keep verifying, and it may go on signing. A private key stored in
// the clear (Better Auth's disablePrivateKeyEncryption) is sealed as it
// is. Only Ed25519 (EdDSA, the plugin's default) keys are taken.
func ReencryptKey(rec KeyRecord, from, to []byte) (KeyRecord, error) {
	if rec.Alg != "" && rec.Alg != "EdDSA" || rec.Crv != "" && rec.Crv != "Ed25519" {
		return rec, fmt.Errorf("key %s: alg %q crv %q: only EdDSA with Ed25519 is supported", rec.ID, rec.Alg, rec.Crv)
	}
	pub, err := parsePublicKey(rec.PublicKey)
	if err != nil {
		return rec, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	var priv ed25519.PrivateKey
	if plain := strings.TrimSpace(rec.PrivateKey); strings.HasPrefix(plain, "{") {
		if priv, err = privateFromJWK([]byte(plain), pub); err != nil {
			return rec, fmt.Errorf("key %s: %w", rec.ID, err)
		}
	} else if priv, err = openPrivateKey(from, rec.PrivateKey, pub); err != nil {
		if errors.Is(err, ErrKeyUndecryptable) {
			err = ErrBetterAuthSecret
		}
		return rec, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	if rec.PrivateKey, err = sealPrivateKey(to, priv); err != nil {
		return rec, fmt.Errorf("key %s: %w", rec.ID, err)
	}
	rec.PublicKey, rec.Alg, rec.Crv = marshalPublicKey(pub), "EdDSA", "Ed25519"
	return rec, nil
}

// OpenBetterAuthToken returns a provider token as Better Auth stored it,
// decrypted when it is encrypted with secret (Better Auth's
// encryptOAuthTokens): a value that opens is encrypted, since the AEAD
// tag cannot match by chance; any other value is the token in the clear.
// A value in Better Auth's versioned envelope ("$ba$", its secret
// rotation) cannot be opened with one secret: an error.
func OpenBetterAuthToken(secret []byte, stored string) (string, error) {
	if strings.HasPrefix(stored, "$ba$") {
		return "", errors.New("encrypted with a versioned secret ($ba$): not supported")
	}
	if plain, ok := betterAuthOpen(secret, stored); ok {
		return string(plain), nil
	}
	return stored, nil
}

// SealAccountTokens returns a with t's tokens sealed under secret
// (AUTH_SECRET), bound to a.ID, as a sign-in through the sidecar seals
// them: the account reads as if its user had signed in here.
func SealAccountTokens(secret []byte, a Account, t ProviderTokens) (Account, error) {
	key, err := seal.New(secret, tokensPurpose)
	if err != nil {
		return a, fmt.Errorf("issuer: %w", err)
	}
	return (&social{tokens: key}).withTokens(a, t)
}
