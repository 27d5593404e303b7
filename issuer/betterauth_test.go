package issuer

import (
	"context"
	"crypto/ed25519"
	"testing"
)

// Vectors recorded from a real Better Auth 1.7.25 run.
const (
	baSecret       = "test-secret-0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
	baSessionToken = "zSTbU7L7Re4aDEQOuDvjysHfDRhYJ7Fe"
	baCookie       = "zSTbU7L7Re4aDEQOuDvjysHfDRhYJ7Fe.vpqb7dNDIT7C5IHgUzVP6cY%2FyERFkj0%2F%2FaqxCvRHjbw%3D"
	baPassword     = "correct-horse-battery"
	baHash         = "688ed2eed5afa35b87328d81d7008bb0:45a8ebd51eb99f5a907091161a76ffd741c9308c4d22a42e7f10e478d0862331f88edd11e4fb7dbcc62c9b4af68e56633c41341778a484a2762e19e6aba7ea04"
	baPublicKey    = `{"crv":"Ed25519","x":"RsD-7wF8-0tY_RjOzxXMDIcKHY9HiQdyrWloqoKm_YE","kty":"OKP"}`
	baPrivateKey   = `"7983e1a73cdcdfcb34a32501ecfd144aed8515fee90b82f9f17c20af500365cb35f535f222d4943041baac77b009108f0b8f22a9341f1320b4941aa6b00df09ad3dd1e3ba56c27dd1a84eeac81a48e403248a9f925b2626754a2389d62d7273714d6880b30d2b0adb849ea81ea396a8d2c482c798e7463e2fb73f41480aadf888a69ca1ea0962a1130316ad079ba054670a803d5802fd3161759af4c07035f52d16634045c305fa4a7"`
)

func TestBetterAuthCookie(t *testing.T) {
	if got := signCookieValue([]byte(baSecret), baSessionToken); got != baCookie {
		t.Fatalf("signCookieValue: got %s, want %s", got, baCookie)
	}
	tests := []struct {
		name   string
		secret string
		value  string
		want   bool
	}{
		{"real cookie", baSecret, baCookie, true},
		{"other secret", baSecret + "x", baCookie, false},
		{"token changed", baSecret, "y" + baCookie[1:], false},
		{"signature cut", baSecret, baCookie[:len(baCookie)-3], false},
		{"no signature", baSecret, baSessionToken, false},
		{"empty", baSecret, "", false},
		{"bad escape", baSecret, baCookie + "%zz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, ok := parseCookieValue([]byte(tt.secret), tt.value)
			if ok != tt.want {
				t.Fatalf("got ok=%v, want %v", ok, tt.want)
			}
			if ok && token != baSessionToken {
				t.Fatalf("got token %q, want %q", token, baSessionToken)
			}
		})
	}
}

// TestBetterAuthPasswordHash pins the real scrypt parameters against a hash
// Better Auth made.
func TestBetterAuthPasswordHash(t *testing.T) {
	h := newHasher(ScryptParams{}, 1)
	for _, tt := range []struct {
		pw   string
		want bool
	}{{baPassword, true}, {baPassword + "!", false}} {
		ok, err := h.verify(context.Background(), tt.pw, baHash)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tt.want {
			t.Errorf("verify(%q): got %v, want %v", tt.pw, ok, tt.want)
		}
	}
}

func TestBetterAuthPrivateKey(t *testing.T) {
	pub, err := parsePublicKey(baPublicKey)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := openPrivateKey([]byte(baSecret), baPrivateKey, pub)
	if err != nil {
		t.Fatalf("decrypt Better Auth's row: %v", err)
	}
	msg := []byte("signed by the decrypted key")
	if !ed25519.Verify(pub, msg, ed25519.Sign(priv, msg)) {
		t.Fatal("decrypted key does not sign for its public key")
	}
	if _, err := openPrivateKey([]byte(baSecret+"other"), baPrivateKey, pub); err != ErrKeyUndecryptable {
		t.Fatalf("other secret: got %v, want ErrKeyUndecryptable", err)
	}
	// Our own sealing round-trips, plain and JSON-wrapped.
	sealed, err := sealPrivateKey([]byte(baSecret), priv)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{sealed, `"` + sealed + `"`} {
		if _, err := openPrivateKey([]byte(baSecret), col, pub); err != nil {
			t.Errorf("open %q...: %v", col[:8], err)
		}
	}
	otherPub, _, _ := ed25519.GenerateKey(nil)
	if _, err := openPrivateKey([]byte(baSecret), sealed, otherPub); err == nil {
		t.Error("a private key that does not match its public key was accepted")
	}
}

func TestPasswordHashRoundTrip(t *testing.T) {
	h := newHasher(ScryptParams{N: 16, R: 1, P: 1}, 2)
	ctx := context.Background()
	// NFKC: the ligature "ﬁ" and "fi" are the same password.
	stored, err := h.hash(ctx, "pässwörd-ﬁ-123")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pw   string
		want bool
	}{{"pässwörd-ﬁ-123", true}, {"pässwörd-fi-123", true}, {"passwörd-fi-123", false}, {"", false}} {
		ok, err := h.verify(ctx, tt.pw, stored)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tt.want {
			t.Errorf("verify(%q): got %v, want %v", tt.pw, ok, tt.want)
		}
	}
	for _, bad := range []string{"", "nocolon", "abc:zz", "abc:00"} {
		if _, err := h.verify(ctx, "x", bad); err == nil {
			t.Errorf("verify against %q: got nil error, want one", bad)
		}
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := newID()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 32 {
			t.Fatalf("got length %d, want 32", len(id))
		}
		for i := 0; i < len(id); i++ {
			if !isAlnum(id[i]) {
				t.Fatalf("got %q, want only [A-Za-z0-9]", id)
			}
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValidEmail(t *testing.T) {
	tests := []struct {
		email string
		want  bool
	}{
		{"a@example.com", true},
		{"alice+tag@example.co.uk", true},
		{"o'neil@example.com", true},
		{"a_b-c.d@sub-domain.example.org", true},
		{"not-an-email", false},
		{"@example.com", false},
		{"a@", false},
		{"a@example", false},
		{"a@example.c", false},
		{".a@example.com", false},
		{"a.@example.com", false},
		{"a..b@example.com", false},
		{"a@@example.com", false},
		{"a b@example.com", false},
		{"a@-example.com", false},
		{"a@example.c0m", false},
		{"a@exa_mple.com", false},
		{"ä@example.com", false},
		{"a@example.com\x00", false},
		{string(make([]byte, 250)) + "@example.com", false},
	}
	for _, tt := range tests {
		if got := validEmail(tt.email); got != tt.want {
			t.Errorf("validEmail(%q): got %v, want %v", tt.email, got, tt.want)
		}
	}
}
