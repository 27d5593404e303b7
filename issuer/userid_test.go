package issuer

import (
	"bytes"
	"strings"
	"testing"
)

func TestValidUserID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"42", true},
		{"-7", true},
		{"18446744073709551615", true},
		{"550e8400-e29b-41d4-a716-446655440000", true},
		{"550E8400E29B41D4A716446655440000", true},
		{"auth0|abc", false},
		{"user:42@tenant.example", true},
		{"a_b.c", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"", false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
		{"a\x00", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		if got := ValidUserID(tt.id); got != tt.want {
			t.Errorf("ValidUserID(%q): got %t, want %t", tt.id, got, tt.want)
		}
	}
}

// TestNewUserIDNeverHex: a draw of hex digits only (it could read as an
// integer or a hyphenless UUID) is drawn again, so a generated id never
// equals an imported integer or UUID id.
func TestNewUserIDNeverHex(t *testing.T) {
	// Byte 0 is 'A', 57 is '5' and 26 is 'a': hex. Byte 6 is 'G'.
	random := append(bytes.Repeat([]byte{0, 57, 26}, 16), bytes.Repeat([]byte{6}, 48)...)
	id, err := newUserIDFrom(bytes.NewReader(random))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("G", 32); id != want {
		t.Errorf("got %q, want %q (the all-hex draw refused)", id, want)
	}
	for range 1000 {
		id, err := NewUserID()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 32 || allHex(id) || !ValidUserID(id) {
			t.Fatalf("NewUserID: got %q", id)
		}
	}
}
