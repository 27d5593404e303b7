package issuer

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// ErrKeyUndecryptable means a stored private key does not open with the
// current AUTH_SECRET: the secret was rotated (or the row was tampered with).
var ErrKeyUndecryptable = errors.New("private key cannot be decrypted with the current AUTH_SECRET")

// privateJWK is the plaintext Better Auth encrypts, field order included.
type privateJWK struct {
	Crv string `json:"crv"`
	D   string `json:"d"`
	X   string `json:"x"`
	Kty string `json:"kty"`
}

// publicJWK is the jwks.public_key column.
type publicJWK struct {
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kty string `json:"kty"`
}

var b64url = base64.RawURLEncoding

// sealPrivateKey is Better Auth's symmetricEncrypt: XChaCha20-Poly1305 with
// key SHA-256(secret), a random 24-byte nonce prepended, no AAD, lowercase
// hex of nonce‖ciphertext‖tag.
func sealPrivateKey(secret []byte, priv ed25519.PrivateKey) (string, error) {
	plain, err := json.Marshal(privateJWK{
		Crv: "Ed25519",
		D:   b64url.EncodeToString(priv.Seed()),
		X:   b64url.EncodeToString(priv.Public().(ed25519.PublicKey)),
		Kty: "OKP",
	})
	if err != nil {
		return "", fmt.Errorf("marshal private jwk: %w", err)
	}
	aead, err := chacha20poly1305.NewX(secretKey(secret))
	if err != nil {
		return "", fmt.Errorf("xchacha20: %w", err)
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	return hex.EncodeToString(aead.Seal(nonce, nonce, plain, nil)), nil
}

func secretKey(secret []byte) []byte {
	k := sha256.Sum256(secret)
	return k[:]
}

// openPrivateKey decrypts a jwks.private_key value and checks it belongs
// to publicKey. It accepts plain hex and Better Auth's JSON-string-wrapped
// hex. A key that decrypts but does not match its public half is refused:
// signing with it would mint tokens that never verify.
func openPrivateKey(secret []byte, stored string, pub ed25519.PublicKey) (ed25519.PrivateKey, error) {
	s := strings.TrimSpace(stored)
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal([]byte(s), &s); err != nil {
			return nil, fmt.Errorf("private key column: %w", err)
		}
	}
	if strings.HasPrefix(s, "$ba$") {
		return nil, errors.New("versioned secrets ($ba$ prefix) are not supported")
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("private key column: not hex: %w", err)
	}
	if len(raw) < chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead {
		return nil, errors.New("private key column: too short")
	}
	plain, ok := betterAuthOpen(secret, s)
	if !ok {
		return nil, ErrKeyUndecryptable
	}
	return privateFromJWK(plain, pub)
}

// privateFromJWK reads a private Ed25519 JWK and checks it belongs to
// pub. A key that does not match its public half is refused: signing
// with it would mint tokens that never verify.
func privateFromJWK(plain []byte, pub ed25519.PublicKey) (ed25519.PrivateKey, error) {
	var jwk privateJWK
	if err := json.Unmarshal(plain, &jwk); err != nil {
		return nil, fmt.Errorf("private jwk: %w", err)
	}
	if jwk.Kty != "OKP" || jwk.Crv != "Ed25519" {
		return nil, fmt.Errorf("private jwk: unsupported kty %q crv %q", jwk.Kty, jwk.Crv)
	}
	seed, err := b64url.DecodeString(jwk.D)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("private jwk: bad d")
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if subtle.ConstantTimeCompare(priv.Public().(ed25519.PublicKey), pub) != 1 {
		return nil, errors.New("private key does not match its public key")
	}
	return priv, nil
}

// parsePublicKey reads the jwks.public_key column.
func parsePublicKey(col string) (ed25519.PublicKey, error) {
	var jwk publicJWK
	if err := json.Unmarshal([]byte(col), &jwk); err != nil {
		return nil, fmt.Errorf("public jwk: %w", err)
	}
	if jwk.Kty != "OKP" || jwk.Crv != "Ed25519" {
		return nil, fmt.Errorf("public jwk: unsupported kty %q crv %q", jwk.Kty, jwk.Crv)
	}
	x, err := b64url.DecodeString(jwk.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, errors.New("public jwk: bad x")
	}
	return ed25519.PublicKey(x), nil
}

func marshalPublicKey(pub ed25519.PublicKey) string {
	b, _ := json.Marshal(publicJWK{Crv: "Ed25519", X: b64url.EncodeToString(pub), Kty: "OKP"})
	return string(b)
}
