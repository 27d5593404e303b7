package passhash

import (
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

const benchPassword = "correct horse battery staple"

// defaults are hashes at the cost each system writes when configured
// with nothing (or its documented default), for BenchmarkVerify: the
// sign-in cost of each format next to the sidecar's own scrypt.
func defaults(b *testing.B) []struct{ name, stored string } {
	salt := []byte("0123456789abcdef")
	pw := benchPassword
	must := func(k []byte, err error) []byte {
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	argon := func(id bool, m, t uint32, p uint8) string {
		name, key := "argon2i", argon2.Key([]byte(pw), salt, t, m, p, 32)
		if id {
			name, key = "argon2id", argon2.IDKey([]byte(pw), salt, t, m, p, 32)
		}
		return fmt.Sprintf("$%s$v=19$m=%d,t=%d,p=%d$%s$%s", name, m, t, p, b64.EncodeToString(salt), b64.EncodeToString(key))
	}
	django := func(name string, h func() hash.Hash, n int) string {
		return fmt.Sprintf("%s$%d$%s$%s", name, n, salt, base64.StdEncoding.EncodeToString(must(pbkdf2.Key(h, pw, salt, n, h().Size()))))
	}
	passlib := func(name string, h func() hash.Hash, n int) string {
		return fmt.Sprintf("$%s$%d$%s$%s", name, n, ab64.EncodeToString(salt), ab64.EncodeToString(must(pbkdf2.Key(h, pw, salt, n, h().Size()))))
	}
	phpass := func(rounds int) string {
		s := string(salt[:8])
		sum := md5.Sum([]byte(s + pw))
		for range 1 << rounds {
			sum = md5.Sum(append(sum[:], pw...))
		}
		return "$P$" + string(itoa64[rounds]) + s + phpassEncode(sum[:])
	}
	sha256sum := sha256.Sum256([]byte(pw))
	return []struct{ name, stored string }{
		{"scrypt (Better Auth, the sidecar's own)", vectorMadeBy(b, Scrypt, "better-auth")},
		{"bcrypt cost 10 (PHP, Devise before 4.9, Spring)", string(must(bcrypt.GenerateFromPassword([]byte(pw), 10)))},
		{"bcrypt cost 12 (Laravel 11, Devise 4.9+)", string(must(bcrypt.GenerateFromPassword([]byte(pw), 12)))},
		{"argon2id m=64MiB t=4 p=1 (PHP)", argon(true, 65536, 4, 1)},
		{"argon2id m=64MiB t=3 p=4 (argon2-cffi, Django)", argon(true, 65536, 3, 4)},
		{"argon2i m=64MiB t=4 p=1 (PHP)", argon(false, 65536, 4, 1)},
		{"scrypt-phc ln=16 r=8 p=1 (passlib)", vectorMadeBy(b, ScryptPHC, "its default cost")},
		{"django-pbkdf2-sha256 1,000,000 (Django 5.2)", django("pbkdf2_sha256", sha256.New, 1_000_000)},
		{"django-pbkdf2-sha256 260,000 (Django 3.2)", django("pbkdf2_sha256", sha256.New, 260_000)},
		{"django-pbkdf2-sha1 260,000 (Django 3.2)", django("pbkdf2_sha1", sha1.New, 260_000)},
		{"passlib-pbkdf2-sha256 29,000 (passlib)", passlib("pbkdf2-sha256", sha256.New, 29_000)},
		{"passlib-pbkdf2-sha512 25,000 (passlib)", passlib("pbkdf2-sha512", sha512.New, 25_000)},
		{"aspnet-identity-v3 SHA512 100,000 (.NET 7+)", vectorMadeBy(b, ASPNetIdentityV3, ".NET 7+")},
		{"aspnet-identity-v3 SHA256 10,000 (.NET Core 2-6)", vectorMadeBy(b, ASPNetIdentityV3, "10000 iterations")},
		{"aspnet-identity-v2 SHA1 1,000", vectorMadeBy(b, ASPNetIdentityV2, "HashPassword_Version2")},
		{"phpass 2^13 (WordPress)", phpass(13)},
		{"phpass 2^11 (phpBB)", phpass(11)},
		{"sha256 (weak)", hex.EncodeToString(sha256sum[:])},
	}
}

// vectorMadeBy is the first committed vector of f whose made_by contains by.
func vectorMadeBy(b *testing.B, f Format, by string) string {
	raw, err := os.ReadFile(filepath.Join("testdata", string(f)+".json"))
	if err != nil {
		b.Fatal(err)
	}
	var v struct {
		Vectors []struct {
			Hash   string
			MadeBy string `json:"made_by"`
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		b.Fatal(err)
	}
	for _, x := range v.Vectors {
		if strings.Contains(x.MadeBy, by) {
			return x.Hash
		}
	}
	b.Fatalf("no %s vector made by %q", f, by)
	return ""
}

// BenchmarkVerify: one verification of the right password at each
// system's default cost (docs/benchmarks.md has them as ratios to
// scrypt).
func BenchmarkVerify(b *testing.B) {
	for _, c := range defaults(b) {
		h, err := Parse(c.stored, Options{AllowWeak: true})
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		pw := benchPassword
		if h.Format() == ASPNetIdentityV2 || h.Format() == ASPNetIdentityV3 && strings.Contains(c.name, "10,000") {
			pw = "my password" // Microsoft's vectors
		}
		if !h.Verify(pw) {
			b.Fatalf("%s: the password does not verify", c.name)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				h.Verify(pw)
			}
		})
	}
}

// BenchmarkParse: parsing every committed vector, as an import parses
// each line's hash: an import of a million users pays a million of these.
func BenchmarkParse(b *testing.B) {
	var all []string
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		var v struct{ Vectors []struct{ Hash string } }
		if err := json.Unmarshal(raw, &v); err != nil {
			b.Fatal(err)
		}
		for _, x := range v.Vectors {
			all = append(all, x.Hash)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Parse(all[i%len(all)], Options{AllowWeak: true}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
