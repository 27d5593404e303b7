package scrypt

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	xscrypt "golang.org/x/crypto/scrypt"
)

// RFC 7914 section 12 (the 1 GiB vector left out).
var vectors = []struct {
	password, salt string
	N, r, p        int
	want           string
}{
	{"", "", 16, 1, 1, "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"},
	{"password", "NaCl", 1024, 8, 16, "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"},
	{"pleaseletmein", "SodiumChloride", 16384, 8, 1, "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"},
}

func TestRFC7914(t *testing.T) {
	for _, v := range vectors {
		w, err := NewWork(v.N, v.r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Key(w, []byte(v.password), []byte(v.salt), v.N, v.r, v.p, 64)
		if err != nil || hex.EncodeToString(got) != v.want {
			t.Errorf("N=%d r=%d p=%d: got %x (%v), want %s", v.N, v.r, v.p, got, err, v.want)
		}
	}
}

// TestMatchesXCrypto: the same keys as golang.org/x/crypto/scrypt, with
// one Work reused (dirty) across many calls, as the issuer reuses it.
func TestMatchesXCrypto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cost := range []struct{ N, r, p int }{{2, 1, 1}, {16, 1, 1}, {64, 2, 3}, {1024, 8, 1}, {256, 16, 2}} {
		w, err := NewWork(cost.N, cost.r)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Free()
		for i := range 20 {
			pw := make([]byte, rng.IntN(80))
			salt := make([]byte, rng.IntN(40))
			for j := range pw {
				pw[j] = byte(rng.Uint32())
			}
			for j := range salt {
				salt[j] = byte(rng.Uint32())
			}
			keyLen := 1 + rng.IntN(100)
			want, err := xscrypt.Key(pw, salt, cost.N, cost.r, cost.p, keyLen)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Key(w, pw, salt, cost.N, cost.r, cost.p, keyLen)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("cost %+v call %d: got %x (%v), want %x", cost, i, got, err, want)
			}
		}
	}
}

func TestRefuses(t *testing.T) {
	w, err := NewWork(16, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		w       *Work
		N, r, p int
	}{
		{w, 15, 1, 1},   // not a power of 2
		{w, 1, 1, 1},    // too small
		{w, 16, 0, 1},   // r
		{w, 16, 1, 0},   // p
		{w, 32, 1, 1},   // work made for N=16
		{w, 16, 2, 1},   // work made for r=1
		{nil, 16, 1, 1}, // no work
		{w, 16, 1, 1 << 30},
	} {
		t.Run(fmt.Sprintf("N=%d,r=%d,p=%d", tc.N, tc.r, tc.p), func(t *testing.T) {
			if k, err := Key(tc.w, []byte("pw"), []byte("salt"), tc.N, tc.r, tc.p, 32); err == nil {
				t.Errorf("got key %x, want an error", k)
			}
		})
	}
	if _, err := NewWork(3, 1); err == nil {
		t.Error("NewWork(3, 1): want an error")
	}
	if b := w.Bytes(); b != 128*16*1+256*1 {
		t.Errorf("Bytes: got %d, want %d", b, 128*16+256)
	}
	w.Free()
	w.Free() // twice is fine
	if k, err := Key(w, []byte("pw"), []byte("salt"), 16, 1, 1, 32); err == nil {
		t.Errorf("Key on freed work: got %x, want an error", k)
	}
}
