package mail

import (
	"bytes"
	"errors"
	"regexp"
	"testing"
	"time"
)

// sampleMessage is a realistic message whose URL carries a token that the
// tests look for in places it must not be.
func sampleMessage(k Kind) Message {
	return Message{
		Kind:           k,
		To:             "ada@example.com",
		URL:            "https://app.example.com/api/auth/reset-password/Tok3nTok3nTok3nTok3nTok3nTok3n?callbackURL=%2Fsettings",
		TokenExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		User:           User{ID: "u_1", Email: "ada@example.com", Name: "Ada"},
	}
}

func mustBox(t testing.TB, secret string) *Box {
	t.Helper()
	b, err := NewBox([]byte(secret))
	if err != nil {
		t.Fatalf("NewBox: %v", err)
	}
	return b
}

func TestBoxRoundTrip(t *testing.T) {
	b := mustBox(t, "a-secret-of-at-least-32-characters-long")
	for _, k := range Kinds() {
		m := sampleMessage(k)
		id := NewID()
		sealed, err := b.Seal(id, m)
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		got, err := b.Open(id, sealed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !got.TokenExpiresAt.Equal(m.TokenExpiresAt) {
			t.Errorf("TokenExpiresAt: got %v, want %v", got.TokenExpiresAt, m.TokenExpiresAt)
		}
		got.TokenExpiresAt = m.TokenExpiresAt
		if got != m {
			t.Errorf("got %+v, want %+v", got, m)
		}
	}
}

func TestBoxRefuses(t *testing.T) {
	b := mustBox(t, "a-secret-of-at-least-32-characters-long")
	other := mustBox(t, "another-secret-of-at-least-32-characters")
	m := sampleMessage(PasswordReset)
	id := NewID()
	sealed, err := b.Seal(id, m)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		box    *Box
		id     string
		sealed func() []byte
	}{
		{"wrong id", b, NewID(), func() []byte { return sealed }},
		{"wrong secret", other, id, func() []byte { return sealed }},
		{"truncated", b, id, func() []byte { return sealed[:len(sealed)-1] }},
		{"too short for a nonce", b, id, func() []byte { return sealed[:10] }},
		{"empty", b, id, func() []byte { return nil }},
	}
	// Every single byte flipped, nonce, ciphertext and tag alike.
	for i := range sealed {
		tests = append(tests, struct {
			name   string
			box    *Box
			id     string
			sealed func() []byte
		}{"tampered byte", b, id, func() []byte {
			c := bytes.Clone(sealed)
			c[i] ^= 0x01
			return c
		}})
	}
	for _, tt := range tests {
		_, err := tt.box.Open(tt.id, tt.sealed())
		if !errors.Is(err, ErrCannotOpen) {
			t.Fatalf("%s: got %v, want ErrCannotOpen", tt.name, err)
		}
	}
}

func TestBoxSealedHidesTheLink(t *testing.T) {
	b := mustBox(t, "a-secret-of-at-least-32-characters-long")
	m := sampleMessage(PasswordReset)
	sealed, err := b.Seal(NewID(), m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{m.URL, "Tok3nTok3nTok3n", m.To, `"url"`} {
		if bytes.Contains(sealed, []byte(s)) {
			t.Errorf("sealed payload contains %q", s)
		}
	}
	// Two seals of the same message differ (fresh nonce), so equal
	// payloads in the table reveal nothing.
	again, _ := b.Seal(NewID(), m)
	if bytes.Equal(sealed[:24], again[:24]) {
		t.Error("two seals share a nonce")
	}
}

func TestBoxRefusesBadInput(t *testing.T) {
	if _, err := NewBox(nil); err == nil {
		t.Error("NewBox(nil): got nil error")
	}
	b := mustBox(t, "s")
	if _, err := b.Seal("", sampleMessage(PasswordReset)); err == nil {
		t.Error("Seal with empty id: got nil error")
	}
	if _, err := b.Seal(NewID(), sampleMessage("newsletter")); err == nil {
		t.Error("Seal of unknown kind: got nil error")
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^msg_[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("id %q does not match %s", id, re)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}
