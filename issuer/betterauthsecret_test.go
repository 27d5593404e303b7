package issuer

import (
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

const sidecarSecret = "0123456789abcdefghijklmnopqrstuvwxyz-new-secret"

// TestReencryptKey: a jwks row Better Auth 1.7.25 wrote opens with its
// secret and comes out sealed with AUTH_SECRET, the same key; one that
// does not open, or is not Ed25519, is refused with the reason.
func TestReencryptKey(t *testing.T) {
	rec := KeyRecord{ID: "kid-1", PublicKey: baPublicKey, PrivateKey: baPrivateKey, CreatedAt: time.Unix(1700000000, 0), Alg: "EdDSA", Crv: "Ed25519"}
	pub, _ := parsePublicKey(baPublicKey)
	got, err := ReencryptKey(rec, []byte(baSecret), []byte(sidecarSecret))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := openPrivateKey([]byte(sidecarSecret), got.PrivateKey, pub)
	if err != nil {
		t.Fatalf("the re-encrypted key with AUTH_SECRET: %v", err)
	}
	if _, err := openPrivateKey([]byte(baSecret), got.PrivateKey, pub); err == nil {
		t.Error("the re-encrypted key still opens with BETTER_AUTH_SECRET")
	}
	if got.ID != rec.ID || got.CreatedAt != rec.CreatedAt || !priv.Public().(ed25519.PublicKey).Equal(pub) {
		t.Errorf("got %+v, want the same key", got)
	}

	// Stored in the clear (disablePrivateKeyEncryption): sealed as it is.
	plain := rec
	plain.PrivateKey = `{"kty":"OKP","crv":"Ed25519","x":"` + b64url.EncodeToString(pub) + `","d":"` + b64url.EncodeToString(priv.Seed()) + `"}`
	if got, err := ReencryptKey(plain, []byte("unused"), []byte(sidecarSecret)); err != nil {
		t.Errorf("a key in the clear: %v", err)
	} else if _, err := openPrivateKey([]byte(sidecarSecret), got.PrivateKey, pub); err != nil {
		t.Errorf("a key in the clear, re-encrypted: %v", err)
	}

	for _, tt := range []struct {
		name string
		edit func(*KeyRecord)
		from string
		want string
	}{
		{"another secret", nil, baSecret + "x", "does not open with BETTER_AUTH_SECRET"},
		{"RS256", func(k *KeyRecord) { k.Alg = "RS256" }, baSecret, `alg "RS256"`},
		{"P-256", func(k *KeyRecord) { k.Alg, k.Crv = "ES256", "P-256" }, baSecret, `crv "P-256"`},
		{"versioned secret", func(k *KeyRecord) { k.PrivateKey = `"$ba$1$00"` }, baSecret, "versioned secrets"},
		{"public key of another", func(k *KeyRecord) { k.PublicKey = marshalPublicKey(make(ed25519.PublicKey, 32)) }, baSecret, "does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := rec
			if tt.edit != nil {
				tt.edit(&k)
			}
			if _, err := ReencryptKey(k, []byte(tt.from), []byte(sidecarSecret)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestOpenBetterAuthToken: a token encrypted the way Better Auth's
// encryptOAuthTokens does opens; a token in the clear, even one of hex
// digits, is taken as it is.
func TestOpenBetterAuthToken(t *testing.T) {
	aead, _ := chacha20poly1305.NewX(secretKey([]byte(baSecret)))
	nonce := make([]byte, aead.NonceSize())
	enc := hex.EncodeToString(aead.Seal(nonce, nonce, []byte("gho_access"), nil))
	for _, tt := range []struct {
		name, stored, want, err string
	}{
		{"encrypted", enc, "gho_access", ""},
		{"clear", "ya29.a0AfH6SM", "ya29.a0AfH6SM", ""},
		{"clear, hex", strings.Repeat("ab", 40), strings.Repeat("ab", 40), ""},
		{"encrypted, another secret's", enc[:len(enc)-2] + "00", enc[:len(enc)-2] + "00", ""},
		{"versioned", "$ba$2$" + enc, "", "versioned secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OpenBetterAuthToken([]byte(baSecret), tt.stored)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %q %v, want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}

// TestSealAccountTokens: tokens sealed for an imported account open as a
// sign-in's do, bound to the account's row.
func TestSealAccountTokens(t *testing.T) {
	a, err := SealAccountTokens([]byte(sidecarSecret), Account{ID: "acc-1", ProviderID: "corp"}, ProviderTokens{AccessToken: "at", RefreshToken: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := newSocial(nil, []byte(sidecarSecret), "auth.session_token")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sc.openToken("acc-1", "access_token", a.AccessToken); err != nil || got != "at" {
		t.Errorf("access token: got %q %v", got, err)
	}
	if got, err := sc.openToken("acc-1", "refresh_token", a.RefreshToken); err != nil || got != "rt" {
		t.Errorf("refresh token: got %q %v", got, err)
	}
	if _, err := sc.openToken("acc-2", "access_token", a.AccessToken); err == nil {
		t.Error("the access token opened for another row")
	}
	if a.IDToken != nil {
		t.Errorf("id token: got %x, want none", a.IDToken)
	}
}
