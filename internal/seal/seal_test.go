package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef-test")
	k, err := New(secret, "test purpose v1")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := k.Seal([]byte("gho_provider_token"), []byte("row1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("gho_provider_token")) {
		t.Fatal("got the plain text inside the sealed value")
	}
	got, err := k.Open(sealed, []byte("row1"))
	if err != nil || string(got) != "gho_provider_token" {
		t.Fatalf("got %q, %v; want the plain text back", got, err)
	}
	other, _ := New(secret, "another purpose v1")
	otherSecret, _ := New([]byte("another secret of at least 32 bytes!!"), "test purpose v1")
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for _, tc := range []struct {
		name   string
		k      *Key
		sealed []byte
		ad     string
	}{
		{"another row", k, sealed, "row2"},
		{"another purpose", other, sealed, "row1"},
		{"another secret", otherSecret, sealed, "row1"},
		{"altered", k, tampered, "row1"},
		{"truncated", k, sealed[:10], "row1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.k.Open(tc.sealed, []byte(tc.ad)); !errors.Is(err, ErrCannotOpen) {
				t.Errorf("got %v, want ErrCannotOpen", err)
			}
		})
	}
}

func TestSealNonceFresh(t *testing.T) {
	k, _ := New([]byte("0123456789abcdef0123456789abcdef-test"), "p")
	a, _ := k.Seal([]byte("x"), nil)
	b, _ := k.Seal([]byte("x"), nil)
	if bytes.Equal(a, b) {
		t.Error("got the same sealed bytes twice, want a fresh nonce each time")
	}
}
